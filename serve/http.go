package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/airlock-mcp/airlock/runner"
)

// HTTPOptions configure the HTTP transports.
type HTTPOptions struct {
	// Clients are the accepted bearer tokens; AuthToken is a shorthand for one token
	// (client "default") when Clients is nil. With neither, no token is asked for.
	Clients        *Clients
	AuthToken      string
	AllowedOrigins []string
	MaxBodyBytes   int64
	// BodyTimeout bounds the time a request's body may take to arrive (0:
	// defaultBodyTimeout), WriteTimeout each writeChunk of an answer (0:
	// defaultWriteTimeout); see deadlines.
	BodyTimeout, WriteTimeout time.Duration
	// SSE selects the legacy HTTP+SSE transport (/sse and /message) instead of
	// Streamable HTTP (/mcp).
	SSE bool
	// Stateless serves Streamable HTTP without sessions: no Mcp-Session-Id is issued or
	// needed, so any replica behind a load balancer can answer any request.
	Stateless bool
	// SessionIdle ends a stateful session after this long without a request (0: 30 min).
	SessionIdle time.Duration
	// MaxSessions bounds the live stateful sessions, or on SSE the open streams (0:
	// defaultMaxSessions): without a bound, a loop of initialize requests grows the
	// server's memory until idle expiry, and one of GET /sse until the client stops.
	MaxSessions int
	// MaxSessionsPerClient bounds, with client tokens, one token's share of them (0:
	// defaultMaxSessionsPerClient, at most MaxSessions): else one client's initialize
	// loop filled the cap and every other client was refused until idle expiry.
	MaxSessionsPerClient int
	// SessionEnded, when set, is told of each stateful session that ended (DELETE or
	// idle expiry; for SSE, its stream closed) and the client that owned it: its
	// run_code sessions go with it.
	SessionEnded func(id, owner string)
	// State reports readiness and drains; nil means always ready.
	State *State
	// Metrics serves GET /metrics; nil answers 404 there.
	Metrics http.Handler
	Log     *slog.Logger

	refused *refusalLog
	bodies  *bodyBudget
}

// bodyBudget bounds the request bodies the server holds at once, in bytes: guard reads a
// body whole before the call is admitted (so that a chunked one gets its 413 too), and
// without a bound one client with a token and a thousand connections made it buffer a
// thousand bodies of http.max_body_bytes (16 GiB at the default) before any limit on
// calls applied. A body past the budget is answered 503, retryable: nothing ran. With
// client tokens one client holds at most a quarter of it, so that one sending a few large
// bodies slowly (each may take the body timeout) does not refuse every other client.
type bodyBudget struct {
	mu   sync.Mutex
	held int64
	max  int64
	each map[string]int64 // held per client token
}

// bodyBudgetBodies is the budget in bodies of the largest size: far more than a server's
// sandboxes run at once, and a bounded multiple of the memory one call may use.
const bodyBudgetBodies = 8

// take reserves n bytes for client who, or reports false when they would exceed the
// budget or who's share. A nil budget (no http.max_body_bytes) takes anything.
func (b *bodyBudget) take(who string, n int64) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held+n > b.max || who != "" && b.each[who]+n > b.max/4 {
		return false
	}
	b.held += n
	if who != "" {
		b.each[who] += n
	}
	return true
}

func (b *bodyBudget) give(who string, n int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held -= n
	if who != "" {
		if b.each[who] -= n; b.each[who] == 0 {
			delete(b.each, who)
		}
	}
}

// refusalLog logs refused requests (no token, a foreign Origin or Host) at most once a
// second, with the count of those refused since without a line, and each of the
// client's strings clipped to maxLoggedText: a refusal costs its client nothing, and one
// line each let an unauthenticated flood fill the log's disk.
type refusalLog struct {
	log   *slog.Logger
	mu    sync.Mutex
	next  time.Time
	quiet int
}

func (l *refusalLog) warn(msg string, args ...any) {
	l.mu.Lock()
	now := time.Now()
	if now.Before(l.next) {
		l.quiet++
		l.mu.Unlock()
		return
	}
	n := l.quiet
	l.quiet, l.next = 0, now.Add(time.Second)
	l.mu.Unlock()
	for i, a := range args {
		if v, ok := a.(string); ok {
			args[i] = clipText(v)
		}
	}
	if n > 0 {
		args = append(args, "refused_unlogged", n)
	}
	l.log.Warn(msg, args...)
}

// maxLoggedText bounds what the log keeps of a client's text (a Host, an Origin, a path):
// net/http accepts a request head of up to 1 MiB, and a line a second of that filled the
// log's disk at 3.6 GB an hour.
const maxLoggedText = 128

func clipText(s string) string {
	if len(s) > maxLoggedText {
		s = s[:maxLoggedText] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

const defaultSessionIdle = 30 * time.Minute

// defaultMaxSessions is far above what one server's sandboxes can serve at once (each
// session costs a few KiB idle), and far below what an initialize loop would reach.
const defaultMaxSessions = 4096

// defaultMaxSessionsPerClient is far above the few sessions one agent keeps open, and a
// sixteenth of defaultMaxSessions.
const defaultMaxSessionsPerClient = 256

// perClient is the per-token share of max sessions that opt asks for.
func perClient(opt HTTPOptions, max int) int {
	n := opt.MaxSessionsPerClient
	if n <= 0 {
		n = defaultMaxSessionsPerClient
	}
	return min(n, max)
}

// CheckBind refuses to expose the server beyond loopback without authentication:
// anyone who can reach it could run code.
func CheckBind(addr string, auth bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("http address %q: %w", addr, err)
	}
	if isLoopback(host) || auth {
		return nil
	}
	return fmt.Errorf("refusing to listen on %s without an auth token: set http.tokens_file or http.auth_token (or AIRLOCK_AUTH_TOKEN), or bind 127.0.0.1", addr)
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// State is what the operational endpoints report. A server starts unready, is made
// ready once its startup probes passed and its pool is warm, and drains at SIGTERM:
// from then on /readyz says 503 and new calls are refused with a retryable error while
// the calls already running finish.
type State struct {
	ready, draining atomic.Bool
	mu              sync.Mutex
	inflight        int
	idle            chan struct{} // closed when draining and nothing is in flight
}

// NewState returns an unready state.
func NewState() *State { return &State{idle: make(chan struct{})} }

// SetReady marks the server ready.
func (s *State) SetReady() { s.ready.Store(true) }

// Ready reports whether /readyz says 200.
func (s *State) Ready() bool { return s == nil || s.ready.Load() && !s.draining.Load() }

// Drain starts draining; the returned channel closes when no call is in flight.
func (s *State) Drain() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.draining.Swap(true) && s.inflight == 0 {
		close(s.idle)
	}
	return s.idle
}

// InFlight is the number of MCP requests being answered.
func (s *State) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight
}

// enter counts a request in, or says why it must be refused: nothing may run before
// the startup probes have passed, nor start once draining began.
func (s *State) enter() string {
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.draining.Load():
		return "server is draining (shutting down); nothing ran: retry, another replica will take the call"
	case !s.ready.Load():
		return "server is starting (startup probes, warm pool); nothing ran: retry in a moment"
	}
	s.inflight++
	return ""
}

func (s *State) leave() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight--; s.inflight == 0 && s.draining.Load() {
		close(s.idle)
	}
}

// Handler routes the listener: the MCP transport (wrapped in the Origin, token, size,
// drain and session checks), /healthz, /readyz, /metrics, and 404 for anything else at
// once. base is the server's own URL (the SSE transport tells clients where to post).
func Handler(s *server.MCPServer, base string, opt HTTPOptions) http.Handler {
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	opt.Log = opt.Log.With("component", "http")
	opt.refused = &refusalLog{log: opt.Log}
	if opt.MaxBodyBytes > 0 && opt.bodies == nil { // a test's own budget, to read
		opt.bodies = &bodyBudget{max: bodyBudgetBodies * opt.MaxBodyBytes, each: map[string]int64{}}
	}
	if opt.Clients == nil {
		var err error
		if opt.Clients, err = NewClients(opt.AuthToken, ""); err != nil {
			// Serving on without the token would serve without auth: refuse everything.
			opt.Log.Error("auth token refused; every request is refused", "err", err)
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				plain(w, http.StatusInternalServerError, "the server's auth token is misconfigured: "+err.Error())
			})
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { plain(w, http.StatusOK, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case opt.State.Ready():
			plain(w, http.StatusOK, "ready")
		case opt.State.draining.Load():
			plain(w, http.StatusServiceUnavailable, "draining")
		default:
			plain(w, http.StatusServiceUnavailable, "starting: startup probes or warm pool not done")
		}
	})
	if opt.Metrics != nil {
		// Behind any client's token when tokens are configured, as Prometheus's
		// authorization.credentials_file sends it: the counts of runs, statuses, queue and
		// pool tell whoever reads them what the other tenants are doing, and when.
		// /healthz and /readyz stay open: the kubelet's probes carry no secret, and they
		// answer only up, ready or draining.
		mux.Handle("GET /metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r, ok := authenticate(w, r, opt); ok {
				opt.Metrics.ServeHTTP(w, r)
			}
		}))
	}
	if opt.SSE {
		streams := newSSEStreams()
		streams.ended = opt.SessionEnded
		if streams.max = opt.MaxSessions; streams.max <= 0 {
			streams.max = defaultMaxSessions
		}
		streams.maxEach = perClient(opt, streams.max)
		sse := server.NewSSEServer(s, server.WithBaseURL(base), server.WithSessionIDGenerator(streams.newID))
		g := guard(gate(sse, streams, opt), opt, sse, streams)
		mux.Handle("/sse", g)
		mux.Handle("/message", g)
	} else {
		idle := opt.SessionIdle
		if idle <= 0 {
			idle = defaultSessionIdle
		}
		var sess *sessions
		mode := []server.StreamableHTTPOption{server.WithStateLess(true)}
		if !opt.Stateless {
			// mcp-go's sweeper drops its own state of a session idle this long and
			// calls sess.Terminate for it.
			sess = newSessions(idle)
			sess.ended = opt.SessionEnded
			if sess.max = opt.MaxSessions; sess.max <= 0 {
				sess.max = defaultMaxSessions
			}
			sess.maxEach = perClient(opt, sess.max)
			mode = []server.StreamableHTTPOption{server.WithSessionIdManagerResolver(sess), server.WithSessionIdleTTL(idle)}
		}
		h := server.NewStreamableHTTPServer(s, append(mode, server.WithEndpointPath("/mcp"),
			server.WithStreamableHTTPLogger(opt.Log))...)
		mux.Handle("/mcp", guard(eraCompat(calls(h, sess, opt)), opt, nil, nil))
	}
	endpoint := "/mcp"
	if opt.SSE {
		endpoint = "/sse"
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		plain(w, http.StatusNotFound, "not found: MCP is at "+endpoint+"; /healthz, /readyz and /metrics are the other paths")
	})
	return deadlines(origins(mux, opt), opt)
}

// defaultBodyTimeout is far longer than a 16 MiB body takes on any link a client would
// drive an agent over, and far shorter than a slot is worth.
const defaultBodyTimeout = 30 * time.Second

// defaultWriteTimeout bounds each writeChunk of an answer. A write blocked on a full
// socket resumes once a third of the send buffer is free, so a client must read about
// that much (≈ 1.3 MiB at loopback's 4 MiB, less on a slow link, whose buffer is smaller)
// in 30 s: one that does not is not reading.
const (
	defaultWriteTimeout = 30 * time.Second
	writeChunk          = 64 << 10
)

// deadlines bounds how long a client may take to send a request's body and to read its
// answer. The server has neither ReadTimeout nor WriteTimeout: they would end long calls
// and streams (see idleTimeout).
//
// The body's read deadline runs from the moment its head was read. Without it a body sent
// a byte at a time held its connection and goroutine for good: in guard's read for a
// client with a token, and for one without in net/http itself, which reads a refused
// request's unread body (up to 256 KiB) before it writes the refusal. net/http lifts the
// deadline itself when the body's end is read (the background read that tells a client's
// disconnect starts then), so the call that follows runs as long as it takes.
//
// The answer's write deadline is set afresh before each writeChunk of it, so a slow
// reader gets all of it (see defaultWriteTimeout) and one that stopped reading does not hold the handler: without
// it an answer of a few MiB that its client never read kept its goroutine, its bytes, its
// request in State's count (a drain waited on it) and its session busy (never idle).
func deadlines(next http.Handler, opt HTTPOptions) http.Handler {
	body, write := opt.BodyTimeout, opt.WriteTimeout
	if body <= 0 {
		body = defaultBodyTimeout
	}
	if write <= 0 {
		write = defaultWriteTimeout
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if r.ContentLength != 0 {
			// ErrNotSupported only for writers that are no connection's (tests' recorders).
			_ = rc.SetReadDeadline(time.Now().Add(body))
		}
		dw := &deadlineWriter{ResponseWriter: w, rc: rc, d: write}
		// A deadline run out during a long call must not fail what net/http writes once the
		// handler returns; it clears the deadline itself after that, before the next request.
		defer dw.extend()
		next.ServeHTTP(dw, r)
	})
}

// deadlineWriter sets the connection's write deadline before each piece it writes.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) extend() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

func (w *deadlineWriter) WriteHeader(code int) {
	w.extend()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := min(len(p), writeChunk)
		w.extend()
		m, err := w.ResponseWriter.Write(p[:c])
		n += m
		if err != nil {
			return n, err
		}
		p = p[c:]
	}
	return n, nil
}

// Flush passes on to the connection: mcp-go streams answers and events as SSE.
func (w *deadlineWriter) Flush() {
	w.extend()
	_ = w.rc.Flush()
}

func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// origins refuses (403) a request from a browser page of an Origin we do not trust, on
// every path: mcp-go checks Host but not Origin, which leaves DNS rebinding and
// cross-site requests open, and /metrics or /readyz read from a foreign page tell it
// about the host (build, load, the clients' activity). A rebound page's GET is
// same-origin to the browser, which sends no Origin with it: only its Host tells, and
// mcp-go checks that on its own paths alone.
func origins(next http.Handler, opt HTTPOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rebound(r) {
			opt.refused.warn("host refused (DNS rebinding?)", "host", r.Host, "remote", r.RemoteAddr, "path", r.URL.Path)
			http.Error(w, "host not allowed: a loopback server answers only loopback names", http.StatusForbidden)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !originAllowed(o, r.Host, opt.AllowedOrigins) {
			opt.refused.warn("origin refused", "origin", o, "remote", r.RemoteAddr, "path", r.URL.Path)
			http.Error(w, "origin not allowed", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// rebound reports a request that reached the server on a loopback address under a Host
// that is not a loopback name: a page of another site whose name now resolves to
// 127.0.0.1. A request without Host (HTTP/1.0, a load balancer's health check) is no
// browser's and passes.
func rebound(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || r.Host == "" {
		return false
	}
	if lh, _, err := net.SplitHostPort(local.String()); err != nil || !isLoopback(lh) {
		return false
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return !isLoopback(host)
}

func plain(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	fmt.Fprintln(w, msg)
}

// ServeHTTP serves h on ln until ctx ends. Calls run under run, not ctx, so that the
// end of ctx (SIGTERM) drains instead of cancelling: with a State, it waits for the
// calls in flight for up to grace, then shuts down; whatever still runs is cancelled.
func ServeHTTP(ctx context.Context, ln net.Listener, h http.Handler, st *State, grace time.Duration, log *slog.Logger) error {
	log = log.With("component", "http")
	run, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()
	srv := newServer(h, run, log)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(limitConns(ln, maxConns())) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http: %w", err)
	case <-ctx.Done():
	}
	if st != nil && grace > 0 {
		start := time.Now()
		log.Info("draining: /readyz is 503, new calls are refused", "in_flight", st.InFlight(), "grace", grace)
		t := time.NewTimer(grace)
		select {
		case <-st.Drain():
			log.Info("drained", "after", time.Since(start).Round(time.Millisecond))
		case <-t.C:
			log.Warn("drain grace over; cancelling the calls still in flight", "in_flight", st.InFlight())
		}
		t.Stop()
	}
	cancelRun()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Streams (SSE, long polls) never go idle on their own; close them.
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", err)
	}
	return nil
}

// idleTimeout closes a keep-alive connection that sends no next request. Without it (and
// without a ReadTimeout, which would also end the calls in flight: the server's
// background read of a connection times out under it and cancels the request), a
// connection that made one request, /healthz without a token will do, was kept open for
// good: a goroutine, two buffers and a descriptor each, held by a client at no cost.
const idleTimeout = 2 * time.Minute

// newServer is the http.Server of ServeHTTP. A slow client's request head is bounded by
// ReadHeaderTimeout, an idle connection by idleTimeout, its body and a stalled answer by
// deadlines; the body is read by guard after the token is checked.
func newServer(h http.Handler, base context.Context, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		// A request head carries a token, a session id and a few short headers; net/http's
		// default of 1 MiB let each connection (no token needed) make the server buffer
		// and parse a megabyte.
		MaxHeaderBytes: 64 << 10,
		IdleTimeout:    idleTimeout,
		BaseContext:    func(net.Listener) context.Context { return base },
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// bodyLimit is http.max_body_bytes, or no limit (2^62) when it is not set.
func bodyLimit(opt HTTPOptions) int64 {
	if opt.MaxBodyBytes <= 0 {
		return 1 << 62
	}
	return opt.MaxBodyBytes
}

// body is a request body the guard has read whole, kept as bytes for calls to inspect.
type body struct {
	*bytes.Reader
	raw []byte
}

func (body) Close() error { return nil }

// authenticate checks the bearer token when tokens are configured (401 otherwise) and
// puts the token's client name into the request's context.
func authenticate(w http.ResponseWriter, r *http.Request, opt HTTPOptions) (*http.Request, bool) {
	if !opt.Clients.Enabled() {
		return r, true
	}
	name, ok := opt.Clients.Authenticate(r.Header.Get("Authorization"))
	if !ok {
		opt.refused.warn("unauthorized", "remote", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="airlock"`)
		http.Error(w, "missing or invalid bearer token", http.StatusUnauthorized)
		return r, false
	}
	return r.WithContext(runner.WithPrincipal(r.Context(), name)), true
}

// guard enforces, after origins, the bearer token (401), the session's owner on the SSE
// transport (404) and the body size (413). The token's client name goes into the
// request's context, for the logs, the audit log and the per-client limit. sse, when
// set, is where an oversized request's error is delivered (see tooLarge).
func guard(next http.Handler, opt HTTPOptions, sse *server.SSEServer, streams *sseStreams) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, ok := authenticate(w, r, opt)
		if !ok {
			return
		}
		// Before the body is read: even a too-large message's error goes onto the stream.
		if sid := r.URL.Query().Get("sessionId"); streams != nil && r.Method == http.MethodPost &&
			!streams.owns(sid, runner.PrincipalFrom(r.Context())) {
			rpcError(w, http.StatusNotFound, nil, "no such session: open a stream at /sse and post to the endpoint it names")
			return
		}
		if r.Body != nil && r.Method == http.MethodPost {
			limit := bodyLimit(opt)
			if r.ContentLength > limit {
				tooLarge(w, r, limit, sse, streams, nil)
				return
			}
			// The body is held until the handler returns, or on SSE until the call's
			// answer is on the stream (see sseAnswers): counted from before its first
			// byte is read, at its length, or the limit when it has none (chunked).
			need := limit
			if r.ContentLength >= 0 {
				need = r.ContentLength
			}
			who := runner.PrincipalFrom(r.Context())
			if !opt.bodies.take(who, need) {
				w.Header().Set("Retry-After", "1")
				w.Header().Set("Connection", "close")
				rpcError(w, http.StatusServiceUnavailable, nil,
					"server busy: it holds as many request bodies as it may (yours or all clients'); nothing ran: retry in a moment")
				return
			}
			rel := &release{}
			rel.add(func() { opt.bodies.give(who, need) })
			defer rel.returned()
			r = r.WithContext(context.WithValue(r.Context(), releaseKey{}, rel))
			// Read here so a chunked body without Content-Length gets a 413 too, not
			// whatever the transport makes of a short read.
			raw, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
			if errors.Is(err, os.ErrDeadlineExceeded) {
				w.Header().Set("Connection", "close")
				http.Error(w, "request body too slow: it must arrive within the body timeout", http.StatusRequestTimeout)
				return
			}
			if err != nil {
				http.Error(w, "reading request body failed", http.StatusBadRequest)
				return
			}
			if int64(len(raw)) > limit {
				tooLarge(w, r, limit, sse, streams, raw)
				return
			}
			r.Body = body{bytes.NewReader(raw), raw}
		}
		next.ServeHTTP(w, r)
	})
}

// envelope is what calls needs of a JSON-RPC message.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	// JSONRPC and Result are for answerOf.
	JSONRPC json.RawMessage `json:"jsonrpc"`
	Result  json.RawMessage `json:"result"`
	Params  struct {
		Meta *mcp.Meta `json:"_meta"`
		// RequestID is the request a notifications/cancelled names.
		RequestID json.RawMessage `json:"requestId"`
	} `json:"params"`
	// partial: the body is JSON but did not decode whole (see message).
	partial bool
	// malformed, when set, is why the body is refused whatever it asks: it is not UTF-8,
	// or it repeats a member name (duplicateMember).
	malformed     string
	malformedCode int
}

// message decodes what calls and gate need of the request's JSON-RPC message (the guard
// has read the body whole); a body that does not decode is mcp-go's to answer.
//
// A body that is JSON but decodes only in part (a member of the wrong type, such as a
// _meta that is not an object, or the first of two "params") is marked partial, and calls
// refuses it: mcp-go reads each part of a message on its own, so it may see a method, a
// 2026-07-28 _meta or a cancellation where this decoder stopped. It keeps no _meta
// either, for gate: mcp-go takes the era from the body only when it decodes whole.
func message(r *http.Request) envelope {
	var msg envelope
	b, ok := r.Body.(body)
	if !ok {
		return msg
	}
	if json.Unmarshal(b.raw, &msg) != nil {
		msg.Params.Meta = nil
		msg.partial = json.Valid(b.raw)
	}
	bad, text := badEnvelope(b.raw, msg.ID, msg.Method), textError(b.raw)
	switch name, first, dup := duplicateMember(b.raw); {
	case bad != "":
		msg.malformed, msg.malformedCode = bad, mcp.INVALID_REQUEST
		msg.ID = nil // not an id a response can carry
	case text != "":
		msg.malformed, msg.malformedCode = text, mcp.PARSE_ERROR
	case dup:
		msg.malformed, msg.malformedCode = duplicateError(name, first), mcp.INVALID_REQUEST
	case msg.Params.Meta != nil && msg.Params.Meta.ProgressToken != nil:
		if t, err := json.Marshal(msg.Params.Meta.ProgressToken); err == nil && tokenError(len(t)) != "" {
			msg.malformed, msg.malformedCode = tokenError(len(t)), mcp.INVALID_PARAMS
		}
	}
	return msg
}

// refuseMalformed answers a message whose body is malformed (see envelope.malformed).
func refuseMalformed(w http.ResponseWriter, msg envelope) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(errorResponse(msg.ID, msg.malformedCode, msg.malformed))
}

// admit counts a JSON-RPC request in, or refuses it (503, retryable) while the server
// starts or drains; the returned func counts it out. Notifications always pass, so that
// a cancellation still reaches a call in flight during the drain.
func admit(w http.ResponseWriter, r *http.Request, msg envelope, st *State) (func(), bool) {
	if r.Method != http.MethodPost || msg.Method == "" || len(msg.ID) == 0 {
		return func() {}, true
	}
	if why := st.enter(); why != "" {
		// Nothing ran, so a retry elsewhere cannot run the call twice.
		w.Header().Set("Retry-After", "1")
		rpcError(w, http.StatusServiceUnavailable, msg.ID, why)
		return nil, false
	}
	return st.leave, true
}

// gate applies admit to the legacy SSE transport's posted messages, and tracks its
// streams' owners. What a posted request holds (admit's place, guard's body bytes) is
// held until its answer is on its stream (see sseAnswers), not only until the 202. Its
// cancellations are applied here, as on Streamable HTTP (see ownCalls).
func gate(next http.Handler, streams *sseStreams, opt HTTPOptions) http.Handler {
	own := newOwnCalls()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			streams.stream(next, w, r)
			return
		}
		msg := message(r)
		if msg.malformed != "" {
			refuseMalformed(w, msg)
			return
		}
		var key, refuse string
		if b, ok := r.Body.(body); ok {
			key, refuse = answerOf(msg, b.raw)
		}
		if refuse != "" {
			rpcError(w, http.StatusBadRequest, nil, "invalid request: "+refuse+"; nothing ran")
			return
		}
		rel, _ := r.Context().Value(releaseKey{}).(*release)
		if rel == nil {
			rel = &release{}
			defer rel.returned()
		}
		leave, ok := admit(w, r, msg, opt.State)
		if !ok {
			return
		}
		rel.add(leave)
		sid := r.URL.Query().Get("sessionId")
		who := runner.PrincipalFrom(r.Context())
		if msg.Method == string(mcp.MethodNotificationCancelled) && len(msg.ID) == 0 {
			own.cancel(callKey{who, sid, idKey(msg.Params.RequestID)})
			w.WriteHeader(http.StatusAccepted)
			return
		}
		end := streams.end(sid)
		answers := streams.answersOf(sid)
		if key == "" || answers == nil {
			if end != nil {
				r = r.WithContext(context.WithValue(r.Context(), streamEndKey{}, end))
			}
			next.ServeHTTP(w, r)
			return
		}
		// The call's context, which endWithStream applies, ends with the stream or with
		// the client's cancellation of it; it is the client's to cancel until its answer
		// is on the stream.
		if end == nil {
			end = context.Background()
		}
		call, cancel := context.WithCancel(end)
		done, _ := own.add(callKey{who, sid, key}, cancel, false)
		rel.add(done)
		rel.add(cancel)
		r = r.WithContext(context.WithValue(r.Context(), streamEndKey{}, context.Context(call)))
		// Kept before mcp-go sees the message: its answer may be on the stream before
		// the 202 is.
		if !answers.hold(key, rel) {
			rpcError(w, http.StatusConflict, msg.ID,
				"a request with this id is in flight on this stream: an id must not be reused while its request runs; nothing ran")
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.code != http.StatusAccepted {
			answers.drop(key, rel) // answered in the POST's own response
		}
	})
}

// streamEndKey carries, in a message posted to an SSE stream, the stream's context (for
// a request with an id, one that its cancellation ends too).
type streamEndKey struct{}

// endWithStream ends a tool call posted to an SSE stream when the stream ends. mcp-go
// runs each posted message detached from every context that could end (the POST's
// answer is a 202 before the call starts), so a client that closed its stream, or was
// cut off, left its calls running to their time limit with nobody to answer, where
// Streamable HTTP and stdio end them at once (TestFaultSSEStreamCloseKillsSandbox: a
// sleeper ran on for 20 s). The context's values survive the detachment, so the
// stream's own context is found there.
func endWithStream(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		end, ok := ctx.Value(streamEndKey{}).(context.Context)
		if !ok {
			return next(ctx, req)
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(end, cancel)()
		return next(ctx, req)
	}
}

// calls applies admit and the sessions to the Streamable HTTP transport. A message on
// the 2026-07-28 protocol has no session (SEP-2567) and is left to mcp-go, as is every
// message of a stateless server; cancellations and, in a session, ids in flight are
// applied here on every path (see ownCalls).
func calls(next http.Handler, sess *sessions, opt HTTPOptions) http.Handler {
	own := newOwnCalls()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		msg := message(r)
		if msg.malformed != "" {
			refuseMalformed(w, msg)
			return
		}
		if msg.partial {
			// mcp-go reads such a message otherwise than message did: as an initialize
			// past the cap and the claim, or a cancellation of another client's call.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(errorResponse(msg.ID, mcp.INVALID_REQUEST,
				"malformed JSON-RPC message: a member has the wrong type (method must be a string, params and _meta objects)"))
			return
		}
		modern := mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) || mcp.IsModernProtocol(msg.Params.Meta.ProtocolVersion())
		id := r.Header.Get(server.HeaderKeySessionID)
		leave, ok := admit(w, r, msg, opt.State)
		if !ok {
			return
		}
		defer leave()
		switch {
		case modern:
			own.serve(w, r, next, msg, "")
		case sess == nil && (r.Method == http.MethodGet || r.Method == http.MethodDelete):
			w.Header().Set("Allow", "POST")
			http.Error(w, "this server is stateless: it has no sessions and no server-to-client stream; POST each request", http.StatusMethodNotAllowed)
		case sess == nil:
			own.serve(w, r, next, msg, "")
		case r.Method == http.MethodPost && msg.Method == string(mcp.MethodInitialize):
			initialize(w, r, next, sess, msg)
		case r.Method != http.MethodPost && r.Method != http.MethodGet && r.Method != http.MethodDelete:
			next.ServeHTTP(w, r)
		case id == "":
			rpcError(w, http.StatusBadRequest, msg.ID, "missing Mcp-Session-Id header: send the id the initialize response gave, or initialize first")
		case r.Method == http.MethodDelete && !sess.ending(id, runner.PrincipalFrom(r.Context())):
			rpcError(w, http.StatusNotFound, nil, "no such session: it ended, expired or was never issued")
		case r.Method == http.MethodDelete:
			next.ServeHTTP(w, r) // mcp-go calls Terminate, which cancels the session's calls
		default:
			inSession(w, r, next, sess, own, id, msg)
		}
	})
}

// initialize serves an initialize in a place reserved under the session caps, and gives
// the session it issues to the client that sent it.
func initialize(w http.ResponseWriter, r *http.Request, next http.Handler, sess *sessions, msg envelope) {
	who := runner.PrincipalFrom(r.Context())
	res, why := sess.reserve(who)
	if res == nil {
		w.Header().Set("Retry-After", "5")
		rpcError(w, http.StatusServiceUnavailable, msg.ID, why+
			": end unused ones with DELETE, wait for idle ones to expire, or use a stateless server")
		return
	}
	defer sess.release(res)
	next.ServeHTTP(&claimer{ResponseWriter: w, sess: sess, who: who}, r.WithContext(context.WithValue(r.Context(), reservationKey{}, res)))
}

// inSession serves a request of session id under a context that ends when the session
// does (DELETE, expiry), so that ending a session cancels its calls in flight, and
// through own (see ownCalls) its cancellations and ids.
func inSession(w http.ResponseWriter, r *http.Request, next http.Handler, sess *sessions, own *ownCalls, id string, msg envelope) {
	sctx := sess.begin(id, runner.PrincipalFrom(r.Context()))
	if sctx == nil {
		rpcError(w, http.StatusNotFound, msg.ID, "no such session: it ended, expired or was never issued; initialize again")
		return
	}
	defer sess.done(id)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(sctx, cancel)
	defer stop()
	if r.Method == http.MethodGet {
		defer sess.stream(id, cancel)()
	}
	own.serve(w, r.WithContext(ctx), next, msg, id)
}

// claimer gives the session an initialize issues to the client that sent it, as the
// response's header goes out: before the client can read the id.
type claimer struct {
	http.ResponseWriter
	sess  *sessions
	who   string
	wrote bool
}

func (c *claimer) WriteHeader(code int) {
	if !c.wrote {
		c.wrote = true
		if id := c.Header().Get(server.HeaderKeySessionID); id != "" {
			c.sess.claim(id, c.who)
		}
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *claimer) Write(b []byte) (int, error) {
	if !c.wrote {
		c.WriteHeader(http.StatusOK)
	}
	return c.ResponseWriter.Write(b)
}

// Flush passes on to the connection: mcp-go streams an initialize's answer as SSE.
func (c *claimer) Flush() {
	if !c.wrote {
		c.WriteHeader(http.StatusOK)
	}
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *claimer) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// rpcError answers with HTTP status code and a JSON-RPC error, so that both an HTTP
// client and an MCP client read why.
func rpcError(w http.ResponseWriter, code int, id json.RawMessage, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": -32000, "message": msg}})
}

// originAllowed accepts the configured origins and loopback pages served from the same
// port as the server itself (which is what a local client's own UI looks like).
func originAllowed(origin, host string, allowed []string) bool {
	o := strings.TrimSuffix(origin, "/")
	for _, a := range allowed {
		if strings.EqualFold(o, strings.TrimSuffix(a, "/")) {
			return true
		}
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	reqHost, reqPort, err := net.SplitHostPort(host)
	if err != nil {
		return false
	}
	return isLoopback(u.Hostname()) && isLoopback(reqHost) && u.Port() == reqPort
}
