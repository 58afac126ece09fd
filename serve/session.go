package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/airlock-mcp/airlock/runner"
)

// errNoSession is what Validate says about an id that was never issued, has ended or
// has expired; the transport answers 404 and the client must initialize again.
var errNoSession = errors.New("no such session: initialize again")

// sessions are the Streamable HTTP sessions this server issued at initialize. mcp-go's
// default manager only checks an id's format, so a made-up id ran code and DELETE did
// nothing; here an id is valid only from the initialize that issued it until DELETE
// or idle expiry, and ending a session cancels the calls it has in flight.
//
// It is mcp-go's SessionIdManager: Generate at initialize, Validate on each request,
// Terminate on DELETE and from mcp-go's idle sweeper (WithSessionIdleTTL), which also
// drops mcp-go's own per-session state.
type sessions struct {
	idle    time.Duration
	max     int // live sessions at most; initialize beyond it is refused
	maxEach int // live sessions of one client token at most
	now     func() time.Time

	mu   sync.Mutex
	live map[string]*httpSession
	// pending counts the initializes admitted under the caps whose session is not yet
	// issued, in all and per client (see reserve).
	pending     int
	pendingEach map[string]int
	// ended, when set, is told of each session that ends (HTTPOptions.SessionEnded).
	ended func(id, owner string)
}

type httpSession struct {
	// owner is the client (bearer token's name) whose initialize created the session;
	// only it may use or end the session. claimed is false until that initialize's
	// response carries the id, so the id is never usable unowned.
	owner   string
	claimed bool
	ctx     context.Context
	cancel  context.CancelFunc
	last    time.Time             // end of the latest request, or its start while busy
	busy    int                   // requests and streams in flight
	streams []*context.CancelFunc // its GET streams, oldest first (see stream)
	ending  bool                  // a DELETE is in progress: Terminate ends it even while busy
}

func newSessions(idle time.Duration) *sessions {
	return &sessions{idle: idle, now: time.Now, live: map[string]*httpSession{}, pendingEach: map[string]int{}}
}

// reservation is the place under the caps that reserve gave one initialize; its
// session takes the place over when Generate issues it.
type reservation struct {
	who  string
	used bool
}

// reservationKey carries an initialize's reservation in its request's context, where
// ResolveSessionIdManager finds it.
type reservationKey struct{}

// ResolveSessionIdManager is mcp-go's SessionIdManagerResolver: an initialize's request
// gets a manager whose Generate fills the request's reservation; every other request,
// and the idle sweeper (r is nil), gets s itself.
func (s *sessions) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	if r != nil {
		if res, ok := r.Context().Value(reservationKey{}).(*reservation); ok {
			return reserved{s, res}
		}
	}
	return s
}

// reserved is sessions for one admitted initialize.
type reserved struct {
	*sessions
	res *reservation
}

func (m reserved) Generate() string { return m.generate(m.res) }

// Generate issues a new id: 128 random bits, unguessable, unlike a counter or a
// timestamp, since the id is all that ties a request to its session.
func (s *sessions) Generate() string { return s.generate(nil) }

// generate issues a session, in the place of res when it is set: the session is then
// res's client's from here on for the caps, and claimed by it when the initialize's
// answer goes out.
func (s *sessions) generate(res *reservation) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	id := hex.EncodeToString(b[:])
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := &httpSession{ctx: ctx, cancel: cancel, last: s.now()}
	if res != nil && !res.used {
		res.used = true
		s.unreserve(res.who)
		ss.owner = res.who
	}
	s.live[id] = ss
	return id
}

// Validate accepts only a live session (mcp-go's isTerminated is not used: a terminated
// id is as unknown as a made-up one, and both get 404).
func (s *sessions) Validate(id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lookup(id) == nil {
		return false, errNoSession
	}
	return false, nil
}

// Terminate ends the session and cancels its calls. From the idle sweeper it leaves a
// session with a request or stream in flight alone: such a session is not idle.
func (s *sessions) Terminate(id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.live[id]; ss != nil && (ss.busy == 0 || ss.ending) {
		s.end(id, ss)
	}
	return false, nil
}

// claim gives session id, just issued by an initialize of client who, to that client.
func (s *sessions) claim(id, who string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.live[id]; ss != nil && !ss.claimed && (ss.owner == "" || ss.owner == who) {
		ss.owner, ss.claimed = who, true
	}
}

// begin marks a request or stream of client who in session id as in flight and returns
// the session's context, which ends when the session does; nil when there is no such
// session or it is another client's.
func (s *sessions) begin(id, who string) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.owned(id, who)
	if ss == nil {
		return nil
	}
	ss.busy++
	ss.last = s.now()
	return ss.ctx
}

// done ends what begin started.
func (s *sessions) done(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.live[id]; ss != nil {
		ss.busy--
		ss.last = s.now()
	}
}

// ending marks session id as being deleted by client who; false when there is no such
// session or it is another client's.
func (s *sessions) ending(id, who string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.owned(id, who)
	if ss != nil {
		ss.ending = true
	}
	return ss != nil
}

// lookup returns the live session id, expiring it first if it has been idle too long
// (the sweeper runs only every idle/2). The caller holds mu.
func (s *sessions) lookup(id string) *httpSession {
	ss := s.live[id]
	if ss != nil && ss.busy == 0 && !ss.ending && s.idle > 0 && s.now().Sub(ss.last) > s.idle {
		s.end(id, ss)
		return nil
	}
	return ss
}

// owned is lookup for client who: another client's session, or one whose initialize has
// not answered yet, is as unknown as a made-up id (a token holder who learned an id, from
// a log or a proxy, must not run code in or end another agent's session).
func (s *sessions) owned(id, who string) *httpSession {
	ss := s.lookup(id)
	if ss == nil || !ss.claimed || ss.owner != who {
		return nil
	}
	return ss
}

func (s *sessions) end(id string, ss *httpSession) {
	ss.cancel()
	delete(s.live, id)
	if s.ended != nil {
		s.ended(id, ss.owner)
	}
}

// count is the number of live sessions.
func (s *sessions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}

// reserve admits an initialize of client who under the caps, or says why not. The place
// counts from now, not from when its session is issued or its answer goes out: counted
// then, a burst of simultaneous initializes all found the same free places (4 sessions
// for a cap of 3 in TestSessionCapHoldsUnderABurst). release gives back a place that no
// session took. Without client tokens (who is "") there is only the server's cap.
func (s *sessions) reserve(who string) (*reservation, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.live)+s.pending >= s.max {
		return nil, fmt.Sprintf("too many open MCP sessions (%d)", s.max)
	}
	mine := s.pendingEach[who]
	for _, ss := range s.live {
		if ss.owner == who {
			mine++
		}
	}
	if who != "" && mine >= s.maxEach {
		return nil, fmt.Sprintf("client %q has %d open MCP sessions, its share of the server's", who, mine)
	}
	s.pending++
	s.pendingEach[who]++
	return &reservation{who: who}, ""
}

// release gives back res's place if no session took it (the initialize failed).
func (s *sessions) release(res *reservation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !res.used {
		res.used = true
		s.unreserve(res.who)
	}
}

// unreserve drops one pending place of who. The caller holds mu.
func (s *sessions) unreserve(who string) {
	s.pending--
	if s.pendingEach[who]--; s.pendingEach[who] == 0 {
		delete(s.pendingEach, who)
	}
}

// sseStreams are the legacy SSE transport's sessions, each owned by the client whose
// GET /sse opened it. mcp-go posts a message to whichever stream its sessionId names, so
// without this a token holder who learned another client's id (a log, a proxy) could run
// calls in that session and put answers with ids of their choosing on its stream.
type sseStreams struct {
	max     int // open streams at most (HTTPOptions.MaxSessions); GET /sse beyond it gets 503
	maxEach int // open streams of one client token at most
	mu      sync.Mutex
	open    int            // GET /sse requests being served
	each    map[string]int // of them, per client token
	owner   map[string]string
	// ends holds each open stream's context, which ends with the stream: the calls
	// posted to it end with it (see endWithStream).
	ends map[string]context.Context
	// answers holds each open stream's calls awaiting their answer (see sseAnswers).
	answers map[string]*sseAnswers
	// ended, when set, is told of each stream that closes: its MCP session ends with
	// it (HTTPOptions.SessionEnded).
	ended func(id, owner string)
}

// streamKey carries, in a GET /sse request's context, its liveStream: newID writes the id
// it made there, so that the stream's end can drop it.
type streamKey struct{}

// liveStream is a GET /sse being served.
type liveStream struct {
	id      string
	answers *sseAnswers
}

func newSSEStreams() *sseStreams {
	return &sseStreams{owner: map[string]string{}, each: map[string]int{}, ends: map[string]context.Context{},
		answers: map[string]*sseAnswers{}}
}

// newID is mcp-go's SessionIDGenFunc: 128 random bits, owned by the request's client.
func (s *sseStreams) newID(_ context.Context, r *http.Request) (string, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	o, _ := r.Context().Value(streamKey{}).(*liveStream)
	s.mu.Lock()
	s.owner[id] = runner.PrincipalFrom(r.Context())
	s.ends[id] = r.Context()
	if o != nil {
		o.id = id
		s.answers[id] = o.answers
	}
	s.mu.Unlock()
	return id, nil
}

// stream serves a GET /sse and forgets its id when the stream ends. Each stream is an
// MCP session, so the streams are bounded as Streamable HTTP's sessions are: without
// it, a loop of GETs held a goroutine, a session and a connection each, without end.
func (s *sseStreams) stream(next http.Handler, w http.ResponseWriter, r *http.Request) {
	who := runner.PrincipalFrom(r.Context())
	s.mu.Lock()
	why := ""
	switch {
	case s.open >= s.max:
		why = fmt.Sprintf("too many open SSE streams (%d)", s.max)
	case who != "" && s.each[who] >= s.maxEach:
		why = fmt.Sprintf("client %q has %d open SSE streams, its share of the server's", who, s.each[who])
	}
	if why != "" {
		s.mu.Unlock()
		w.Header().Set("Retry-After", "5")
		plain(w, http.StatusServiceUnavailable, why+": close unused ones, or use Streamable HTTP (/mcp) without sessions")
		return
	}
	s.open++
	s.each[who]++
	s.mu.Unlock()
	o := &liveStream{answers: newSSEAnswers()}
	aw := newAnswerWriter(w, o.answers.answered)
	defer func() {
		s.mu.Lock()
		s.open--
		if s.each[who]--; s.each[who] == 0 {
			delete(s.each, who)
		}
		owner, ok := s.owner[o.id]
		delete(s.owner, o.id)
		delete(s.ends, o.id)
		delete(s.answers, o.id)
		s.mu.Unlock()
		// The stream's calls are cancelled with it (endWithStream): nothing of theirs is
		// held any more.
		aw.release()
		o.answers.end()
		if ok && s.ended != nil {
			s.ended(o.id, owner)
		}
	}()
	next.ServeHTTP(aw, r.WithContext(context.WithValue(r.Context(), streamKey{}, o)))
}

// end is the context of the open stream id, which ends when the stream does; nil when
// no such stream is open.
func (s *sseStreams) end(id string) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ends[id]
}

// answersOf is the open stream id's calls awaiting answers; nil when no such stream is open.
func (s *sseStreams) answersOf(id string) *sseAnswers {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.answers[id]
}

// owns reports whether the open stream id belongs to client who.
func (s *sseStreams) owns(id, who string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.owner[id]
	return ok && o == who
}

// maxStreamsPerSession bounds a session's server-to-client streams (GET /mcp): each holds
// a connection and two goroutines while the session lives, and mcp-go opens as many as it
// is asked for. Clients keep one; the second is the one that replaces it.
const maxStreamsPerSession = 2

// stream counts a server-to-client stream of session id in, ended by cancel, and returns
// the func that counts it out. Past maxStreamsPerSession the session's oldest stream is
// ended rather than the new one refused: a client whose stream died unseen (a NAT that
// dropped it) must still be able to open another.
func (s *sessions) stream(id string, cancel context.CancelFunc) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.live[id]
	if ss == nil {
		return func() {}
	}
	me := &cancel
	ss.streams = append(ss.streams, me)
	if len(ss.streams) > maxStreamsPerSession {
		(*ss.streams[0])()
		ss.streams = ss.streams[1:]
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		ss.streams = slices.DeleteFunc(ss.streams, func(c *context.CancelFunc) bool { return c == me })
	}
}
