// Package session keeps the live sessions of run_code: who owns each, how many each
// client and the server may hold, and when each expires. It knows nothing of the
// sandbox beyond sandbox.Session: the backend builds and destroys them.
package session

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

// Limits bound the sessions of one server.
type Limits struct {
	IdleTTL      time.Duration // a session unused this long is destroyed
	MaxLifetime  time.Duration // a session this old is destroyed, used or not
	MaxPerClient int           // open sessions of one client
	MaxTotal     int           // open sessions of the server
}

var (
	// ErrUnknown is the answer for an id that never existed, has ended, or belongs to
	// another client: the same, so an id cannot be probed.
	ErrUnknown = errors.New("unknown session")
	// ErrLimit means a cap on open sessions is reached.
	ErrLimit = errors.New("session limit reached")
	// ErrBusy means the session is running another call.
	ErrBusy = errors.New("session busy")
)

// Manager holds the open sessions. It is safe for concurrent use.
type Manager struct {
	lim  Limits
	log  *slog.Logger
	now  func() time.Time
	mu   sync.Mutex
	open map[string]*entry
	// opening counts sessions being started, per owner, for EndOwner; pending counts
	// them per client, so the caps hold while a sandbox is built outside the lock.
	opening map[string]int
	pending map[string]int
	// gone are the owners that ended (EndOwner) while a session of theirs was being
	// started: it is destroyed after its first call, as a busy one is.
	gone map[string]bool
	stop chan struct{}
	done chan struct{}
}

type entry struct {
	// client is who the caps count the session against (see OpenFor).
	id, owner, client, language string
	meta                        any
	sess                        sandbox.Session
	created, used               time.Time
	busy                        bool
	orphan                      bool // its owner has gone: ended at Release
	calls                       int
}

// Handle is one call's hold on a session, from Acquire or Open to Release.
type Handle struct {
	ID       string
	Language string
	// Meta is what the opener attached (the runner: the language and environment).
	Meta    any
	Session sandbox.Session
	e       *entry
}

// Stats is what get_config shows.
type Stats struct {
	Open    int `json:"open"`
	Clients int `json:"clients"`
}

// New starts a manager whose reaper destroys expired sessions.
func New(lim Limits, log *slog.Logger) *Manager {
	return newManager(lim, log, time.Now, reapEvery(lim))
}

func reapEvery(lim Limits) time.Duration {
	return min(max(min(lim.IdleTTL, lim.MaxLifetime)/10, 10*time.Millisecond), time.Second)
}

func newManager(lim Limits, log *slog.Logger, now func() time.Time, every time.Duration) *Manager {
	if log == nil {
		log = slog.Default()
	}
	m := &Manager{lim: lim, log: log.With("component", "session"), now: now,
		open: map[string]*entry{}, opening: map[string]int{}, pending: map[string]int{}, gone: map[string]bool{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go m.reaper(every)
	return m
}

// Limits are the manager's limits.
func (m *Manager) Limits() Limits { return m.lim }

// NewID is a fresh session id: 128 random bits.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// Open starts a session for owner with start (which builds the sandbox), within the
// caps, and returns it held for its first call.
func (m *Manager) Open(owner, language string, meta any, start func(id string) (sandbox.Session, error)) (*Handle, error) {
	return m.OpenFor(owner, owner, language, meta, start)
}

// OpenFor is Open for a client that may be several owners: an HTTP client's sessions
// belong to the MCP session they were started in, but its cap is its token's, else one
// token holder with a few MCP sessions held every session of the server.
func (m *Manager) OpenFor(owner, client, language string, meta any, start func(id string) (sandbox.Session, error)) (*Handle, error) {
	m.mu.Lock()
	mine := m.pending[client]
	for _, e := range m.open {
		if e.client == client {
			mine++
		}
	}
	total := len(m.open)
	for _, n := range m.pending {
		total += n
	}
	switch {
	case m.lim.MaxPerClient > 0 && mine >= m.lim.MaxPerClient:
		list := m.describe(client)
		m.mu.Unlock()
		return nil, fmt.Errorf("%w: this client has %d open sessions, its limit (sessions.max_per_client): %s; end one with close_session: true, or let it expire after %s idle",
			ErrLimit, mine, list, m.lim.IdleTTL)
	case m.lim.MaxTotal > 0 && total >= m.lim.MaxTotal:
		list := m.describe(client)
		m.mu.Unlock()
		return nil, fmt.Errorf("%w: the server holds %d open sessions, its limit (sessions.max_total); this client's: %s; retry later or end one with close_session: true",
			ErrLimit, total, list)
	}
	m.opening[owner]++
	m.pending[client]++
	m.mu.Unlock()

	id := NewID()
	sess, err := start(id)
	m.mu.Lock()
	defer m.mu.Unlock()
	// Its owner went, or the server is shutting down (Close, whose reaper has stopped),
	// while it was built: nobody can reach it after this call.
	orphan := m.gone[owner] || closed(m.stop)
	if m.opening[owner]--; m.opening[owner] == 0 {
		delete(m.opening, owner)
		delete(m.gone, owner)
	}
	if m.pending[client]--; m.pending[client] == 0 {
		delete(m.pending, client)
	}
	if err != nil {
		return nil, err
	}
	now := m.now()
	e := &entry{id: id, owner: owner, client: client, language: language, meta: meta, sess: sess, created: now, used: now, busy: true, orphan: orphan}
	m.open[id] = e
	m.log.Info("session opened", "session", id, "language", language, "open", len(m.open))
	return &Handle{ID: id, Language: language, Meta: meta, Session: sess, e: e}, nil
}

// describe lists client's open sessions for an error; m.mu is held.
func (m *Manager) describe(client string) string {
	var items []string
	now := m.now()
	for _, e := range m.open {
		if e.client == client {
			items = append(items, fmt.Sprintf("%s (%s, %d calls, idle %s)", e.id, e.language, e.calls, now.Sub(e.used).Round(time.Second)))
		}
	}
	if len(items) == 0 {
		return "none"
	}
	slices.Sort(items)
	return strings.Join(items, ", ")
}

// Acquire holds owner's session id for one call. Any other owner, and any id not
// open, gets ErrUnknown with the same text.
func (m *Manager) Acquire(owner, id string) (*Handle, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.open[id]
	if !ok || e.owner != owner {
		return nil, Unknown(id)
	}
	select {
	case <-e.sess.Done():
		m.remove(e, "ended")
		return nil, Unknown(id)
	default:
	}
	if e.busy {
		return nil, fmt.Errorf("%w: session %s is running another call; calls in one session run one at a time", ErrBusy, id)
	}
	e.busy = true
	return &Handle{ID: id, Language: e.language, Meta: e.meta, Session: e.sess, e: e}, nil
}

// Unknown is the error for an id that is not one of the caller's open sessions.
func Unknown(id string) error {
	if len(id) > 64 {
		id = id[:64] + "…"
	}
	return fmt.Errorf("%w %q: it never existed, it has ended (closed, expired, or the server restarted), or it is not this client's; start one with session: \"new\"",
		ErrUnknown, strings.ToValidUTF8(id, "?"))
}

// Release ends a call's hold. With end, or once the session has ended on its own, the
// session is destroyed; it reports whether it was.
func (m *Manager) Release(h *Handle, end bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := h.e
	e.busy = false
	e.calls++
	e.used = m.now()
	select {
	case <-e.sess.Done():
		end = true
	default:
	}
	if end || e.orphan {
		m.remove(e, "closed")
	}
	return end || e.orphan
}

// remove destroys e; m.mu is held. Close only signals the sandbox's end; its teardown
// runs in the backend's background.
func (m *Manager) remove(e *entry, why string) {
	if m.open[e.id] != e {
		return
	}
	delete(m.open, e.id)
	e.sess.Close()
	m.log.Info("session ended", "session", e.id, "why", why, "calls", e.calls,
		"age", m.now().Sub(e.created).Round(time.Millisecond), "open", len(m.open))
}

// Stats counts the open sessions and the clients holding them.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	owners := map[string]bool{}
	for _, e := range m.open {
		owners[e.owner] = true
	}
	return Stats{Open: len(m.open), Clients: len(owners)}
}

// EndOwner destroys every session of owner, whose connection or MCP session has ended:
// nobody can reach them any more. One running a call goes when the call returns.
func (m *Manager) EndOwner(owner string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.opening[owner] > 0 {
		m.gone[owner] = true
	}
	for _, e := range m.open {
		if e.owner != owner {
			continue
		}
		if e.busy {
			e.orphan = true
			continue
		}
		m.remove(e, "client gone")
	}
}

func (m *Manager) reaper(every time.Duration) {
	defer close(m.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.reap()
		}
	}
}

// reap destroys sessions idle past IdleTTL, older than MaxLifetime (a call in progress
// included: the lifetime is a hard bound), or ended on their own.
func (m *Manager) reap() {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for _, e := range m.open {
		select {
		case <-e.sess.Done():
			m.remove(e, "ended")
			continue
		default:
		}
		switch {
		case m.lim.MaxLifetime > 0 && now.Sub(e.created) >= m.lim.MaxLifetime:
			m.remove(e, "max_lifetime")
		case !e.busy && m.lim.IdleTTL > 0 && now.Sub(e.used) >= m.lim.IdleTTL:
			m.remove(e, "idle_ttl")
		}
	}
}

// closed reports, without waiting, whether ch has been closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Close destroys every session and stops the reaper; one still being started is
// destroyed after its first call.
func (m *Manager) Close() {
	m.mu.Lock()
	if closed(m.stop) {
		m.mu.Unlock()
		return
	}
	close(m.stop)
	m.mu.Unlock()
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.open {
		m.remove(e, "server shutdown")
	}
}
