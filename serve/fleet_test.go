package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/airlock-mcp/airlock/metrics"
	"github.com/airlock-mcp/airlock/probe"
	"github.com/airlock-mcp/airlock/runner"
	"github.com/airlock-mcp/airlock/runner/runnertest"
	"github.com/airlock-mcp/airlock/sandbox"
	runsession "github.com/airlock-mcp/airlock/session"
)

const callBody = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"CODE"}}}`

// fastClient fails a request that does not answer at once: nothing here may hang.
var fastClient = &http.Client{Timeout: 3 * time.Second}

type reply struct {
	code   int
	header http.Header
	body   string
}

func do(t *testing.T, method, url, body string, hdr map[string]string) reply {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := fastClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, url, err) // not Fatal: goroutines call do too
		return reply{code: -1}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

func call(code string) string { return strings.Replace(callBody, "CODE", code, 1) }

// initSession initializes and returns the session id the server issued.
func initSession(t *testing.T, url string, hdr map[string]string) string {
	t.Helper()
	r := do(t, http.MethodPost, url, initBody, hdr)
	id := r.header.Get("Mcp-Session-Id")
	if r.code != 200 || id == "" {
		t.Fatalf("initialize: %d %q session %q", r.code, r.body, id)
	}
	return id
}

func TestSessionLifecycle(t *testing.T) {
	d := fakeDeps(runnertest.Echo, 1)
	ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20})
	url := ts.URL + "/mcp"
	id := initSession(t, url, nil)
	sid := map[string]string{"Mcp-Session-Id": id}
	if r := do(t, http.MethodPost, url, call("hi"), sid); r.code != 200 || !strings.Contains(r.body, `"status":"ok"`) {
		t.Fatalf("call in the session: %d %s", r.code, r.body)
	}
	runs := d.Runner.Sandbox.(*runnertest.Sandbox).Runs.Load()
	for name, tt := range map[string]struct {
		hdr  map[string]string
		want int
	}{
		"missing id":             {nil, 400},
		"never issued":           {map[string]string{"Mcp-Session-Id": "mcp-session-0b2f6c1e-3f4e-4a8e-9a43-5d6f7e8a9b0c"}, 404},
		"never issued, our form": {map[string]string{"Mcp-Session-Id": strings.Repeat("ab", 16)}, 404},
	} {
		if r := do(t, http.MethodPost, url, call("x"), tt.hdr); r.code != tt.want {
			t.Errorf("%s: %d %s, want %d", name, r.code, r.body, tt.want)
		}
	}
	if got := d.Runner.Sandbox.(*runnertest.Sandbox).Runs.Load(); got != runs {
		t.Errorf("%d runs from calls without a valid session", got-runs)
	}
	if r := do(t, http.MethodDelete, url, "", nil); r.code != 400 {
		t.Errorf("DELETE without a session id: %d, want 400", r.code)
	}
	if r := do(t, http.MethodDelete, url, "", sid); r.code != 200 {
		t.Fatalf("DELETE: %d %s", r.code, r.body)
	}
	if r := do(t, http.MethodPost, url, call("after"), sid); r.code != 404 {
		t.Errorf("call in a deleted session: %d %s, want 404", r.code, r.body)
	}
	if r := do(t, http.MethodDelete, url, "", sid); r.code != 404 {
		t.Errorf("second DELETE: %d, want 404", r.code)
	}
	if r := do(t, http.MethodGet, url, "", nil); r.code != 400 {
		t.Errorf("GET /mcp without a session: %d, want 400 at once", r.code)
	}
	if r := do(t, http.MethodGet, url, "", sid); r.code != 404 {
		t.Errorf("GET /mcp with a deleted session: %d, want 404", r.code)
	}
}

func TestDeleteCancelsTheSessionsCalls(t *testing.T) {
	var cancelled atomic.Bool
	d := fakeDeps(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
		r, err := runnertest.Block(ctx, s)
		cancelled.Store(true)
		return r, err
	}, 1)
	ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20})
	url := ts.URL + "/mcp"
	sid := map[string]string{"Mcp-Session-Id": initSession(t, url, nil)}
	done := make(chan reply, 1)
	go func() { done <- do(t, http.MethodPost, url, call("block"), sid) }()
	for deadline := time.Now().Add(3 * time.Second); d.Runner.Limiter.Running() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the call never started")
		}
		time.Sleep(time.Millisecond)
	}
	if r := do(t, http.MethodDelete, url, "", sid); r.code != 200 {
		t.Fatalf("DELETE: %d", r.code)
	}
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("the session's call still runs after DELETE")
	}
	if !cancelled.Load() {
		t.Error("DELETE did not cancel the sandbox run")
	}
}

func TestSessionIdleExpiry(t *testing.T) {
	now := time.Unix(1000, 0)
	s := newSessions(time.Minute)
	s.now = func() time.Time { return now }
	idle, busy := s.Generate(), s.Generate()
	s.claim(busy, "")
	ctx := s.begin(busy, "")
	now = now.Add(2 * time.Minute)
	if _, err := s.Validate(idle); err == nil {
		t.Error("a session idle past http.session_idle is still valid")
	}
	if _, err := s.Validate(busy); err != nil {
		t.Errorf("a session with a call in flight expired: %v", err)
	}
	// mcp-go's sweeper calls Terminate; a busy session is not idle.
	_, _ = s.Terminate(busy)
	if ctx.Err() != nil {
		t.Error("the idle sweeper cancelled a call in flight")
	}
	s.done(busy)
	now = now.Add(2 * time.Minute)
	_, _ = s.Terminate(busy)
	if ctx.Err() == nil || s.count() != 0 {
		t.Errorf("expired sessions left: %d", s.count())
	}
}

// TestSessionBelongsToItsClient: with a tokens file, bob holding alice's session id (from
// a log, a proxy, a shared trace) can neither run code in her session, nor stream from it,
// nor end it; to him it does not exist. alice's own calls go on working.
func TestSessionBelongsToItsClient(t *testing.T) {
	clients := aliceAndBob(t)
	d := fakeDeps(runnertest.Echo, 2)
	ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20, Clients: clients})
	url := ts.URL + "/mcp"
	alice := map[string]string{"Authorization": "Bearer aaaaaaaaaaaaaaaaaaaa"}
	id := initSession(t, url, alice)
	alice["Mcp-Session-Id"] = id
	bob := map[string]string{"Authorization": "Bearer bbbbbbbbbbbbbbbbbbbb", "Mcp-Session-Id": id}
	runs := d.Runner.Sandbox.(*runnertest.Sandbox).Runs.Load()
	if r := do(t, http.MethodPost, url, call("bob"), bob); r.code != 404 {
		t.Errorf("bob's call in alice's session: %d %s, want 404", r.code, r.body)
	}
	if got := d.Runner.Sandbox.(*runnertest.Sandbox).Runs.Load(); got != runs {
		t.Error("bob ran code in alice's session")
	}
	// A body that decodes only in part keeps mcp-go on the handshake era (its _meta is
	// not looked at): it would run in the header's session, and is refused (400) or
	// taken as what it is, a message in a session bob does not have (404).
	halfModern := `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":5,"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	if r := do(t, http.MethodPost, url, halfModern, bob); r.code != 400 && r.code != 404 {
		t.Errorf("bob's message in alice's session, 2026-07-28 only in a second params: %d %s, want 400 or 404", r.code, r.body)
	}
	if r := do(t, http.MethodGet, url, "", bob); r.code != 404 {
		t.Errorf("bob's GET stream of alice's session: %d, want 404", r.code)
	}
	if r := do(t, http.MethodDelete, url, "", bob); r.code != 404 {
		t.Errorf("bob's DELETE of alice's session: %d, want 404", r.code)
	}
	if r := do(t, http.MethodPost, url, call("alice"), alice); r.code != 200 || !strings.Contains(r.body, `"status":"ok"`) {
		t.Errorf("alice's call after bob's attempts: %d %s", r.code, r.body)
	}
	if r := do(t, http.MethodDelete, url, "", alice); r.code != 200 {
		t.Errorf("alice's DELETE: %d %s", r.code, r.body)
	}
}

func TestStatelessAnyReplicaAnswers(t *testing.T) {
	a := httpServer(t, fakeDeps(runnertest.Echo, 1), HTTPOptions{MaxBodyBytes: 1 << 20, Stateless: true})
	b := httpServer(t, fakeDeps(runnertest.Echo, 1), HTTPOptions{MaxBodyBytes: 1 << 20, Stateless: true})
	if r := do(t, http.MethodPost, a.URL+"/mcp", initBody, nil); r.code != 200 || r.header.Get("Mcp-Session-Id") != "" {
		t.Errorf("stateless initialize: %d, session %q", r.code, r.header.Get("Mcp-Session-Id"))
	}
	// Replica b never saw an initialize.
	r := do(t, http.MethodPost, b.URL+"/mcp", call("hello"), nil)
	if r.code != 200 || !strings.Contains(r.body, `"status":"ok"`) || !strings.Contains(r.body, "hello") {
		t.Errorf("stateless call on another replica: %d %s", r.code, r.body)
	}
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		if r := do(t, m, b.URL+"/mcp", "", nil); r.code != 405 || !strings.Contains(r.body, "stateless") {
			t.Errorf("stateless %s: %d %q, want 405 saying why", m, r.code, r.body)
		}
	}
}

func TestOperationalEndpoints(t *testing.T) {
	d := fakeDeps(runnertest.Echo, 1)
	m := metrics.New(metrics.Sources{Version: "v-test", Queued: d.Runner.Limiter.Waiting, Running: d.Runner.Limiter.Running,
		Pool: func() sandbox.PoolStats { return sandbox.PoolStats{Hits: 7, Misses: 3} }})
	d.Runner.Observer = m
	st := NewState()
	ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20, Stateless: true, State: st, Metrics: m.Handler(), AuthToken: "0123456789abcdef"})
	auth := map[string]string{"Authorization": "Bearer 0123456789abcdef"}
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 503, "/": 404, "/favicon.ico": 404, "/mcp/x": 404} {
		if r := do(t, http.MethodGet, ts.URL+path, "", nil); r.code != want {
			t.Errorf("GET %s before ready: %d, want %d", path, r.code, want)
		}
	}
	if r := do(t, http.MethodPost, ts.URL+"/mcp", call("early"), auth); r.code != 503 || r.header.Get("Retry-After") == "" {
		t.Errorf("call before the startup probes passed: %d %s, want 503 with Retry-After", r.code, r.body)
	}
	st.SetReady()
	if r := do(t, http.MethodGet, ts.URL+"/readyz", "", nil); r.code != 200 {
		t.Errorf("/readyz when ready: %d", r.code)
	}
	if r := do(t, http.MethodPost, ts.URL+"/mcp", call("x"), auth); r.code != 200 {
		t.Fatalf("call: %d %s", r.code, r.body)
	}
	if r := do(t, http.MethodPost, ts.URL+"/mcp", strings.Replace(call("x"), `"code":"x"`, `"code":"x","language":"nope"`, 1), auth); r.code != 200 {
		t.Fatalf("refused call: %d %s", r.code, r.body)
	}
	// A foreign page reads none of them: a cross-site fetch carries its Origin (the
	// server sends no CORS headers, but a POST is sent before the browser reads them).
	for _, path := range []string{"/metrics", "/readyz", "/healthz", "/"} {
		if r := do(t, http.MethodGet, ts.URL+path, "", map[string]string{"Origin": "http://evil.example.com"}); r.code != 403 {
			t.Errorf("GET %s from a foreign Origin: %d, want 403", path, r.code)
		}
	}
	// Nor does a rebound page's same-origin GET, which carries no Origin: its Host is
	// the foreign name. A request without Host (a load balancer's HTTP/1.0 health
	// check) is no browser's.
	for _, path := range []string{"/metrics", "/readyz", "/healthz", "/"} {
		for host, want := range map[string]int{"evil.example.com" + ts.URL[strings.LastIndex(ts.URL, ":"):]: 403, "evil.example.com": 403, "LocalHost": 200} {
			req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
			req.Host = host
			resp, err := fastClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.StatusCode; (got == 403) != (want == 403) {
				t.Errorf("GET %s with Host %q: %d, want %s", path, host, got, map[bool]string{true: "403", false: "not 403"}[want == 403])
			}
		}
	}
	c, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(c, "GET /readyz HTTP/1.0\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.Contains(line, " 200 ") {
		t.Errorf("HTTP/1.0 health check without Host: %q %v, want 200", line, err)
	}
	c.Close()
	// The counts tell a reader what the other tenants run and when: a scrape carries a
	// token when the server asks one (Prometheus's authorization.credentials_file).
	if r := do(t, http.MethodGet, ts.URL+"/metrics", "", nil); r.code != 401 || strings.Contains(r.body, "airlock_") {
		t.Errorf("/metrics without a token: %d %q, want 401 and no metrics", r.code, r.body)
	}
	if r := do(t, http.MethodGet, ts.URL+"/metrics", "", map[string]string{"Authorization": "Bearer wrong-token-wrong-token"}); r.code != 401 {
		t.Errorf("/metrics with a wrong token: %d, want 401", r.code)
	}
	r := do(t, http.MethodGet, ts.URL+"/metrics", "", auth)
	for _, want := range []string{`airlock_runs_total{language="python",status="ok"} 1`,
		`airlock_runs_total{language="unknown",status="refused"} 1`, "airlock_run_duration_seconds_bucket",
		"airlock_queue_depth 0", "airlock_busy_refusals_total 0", "airlock_pool_hits_total 7", "airlock_pool_misses_total 3",
		"airlock_sandbox_setup_failures_total 0", `airlock_build_info{goversion=`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	st.Drain()
	if r := do(t, http.MethodGet, ts.URL+"/readyz", "", nil); r.code != 503 || !strings.Contains(r.body, "draining") {
		t.Errorf("/readyz while draining: %d %q", r.code, r.body)
	}
}

// SIGTERM's part: ServeHTTP's context ends. /readyz turns 503 at once, a new call gets a
// retryable 503, the call in flight finishes with its result, and ServeHTTP returns.
func TestDrainLetsCallsFinish(t *testing.T) {
	release := make(chan struct{})
	d := fakeDeps(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
		if string(s.Code) == "slow" {
			select {
			case <-release:
			case <-ctx.Done():
				return runnertest.Block(ctx, s)
			}
		}
		return runnertest.Echo(ctx, s)
	}, 2)
	st, url, sigterm, served := serveDraining(t, d, HTTPOptions{Stateless: true})
	slow := make(chan reply, 1)
	go func() { slow <- do(t, http.MethodPost, url+"/mcp", call("slow"), nil) }()
	for deadline := time.Now().Add(3 * time.Second); d.Runner.Limiter.Running() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the slow call never started")
		}
		time.Sleep(time.Millisecond)
	}
	sigterm()
	for deadline := time.Now().Add(3 * time.Second); st.Ready(); {
		if time.Now().After(deadline) {
			t.Fatal("not draining")
		}
		time.Sleep(time.Millisecond)
	}
	if r := do(t, http.MethodGet, url+"/readyz", "", nil); r.code != 503 {
		t.Errorf("/readyz while draining: %d", r.code)
	}
	r := do(t, http.MethodPost, url+"/mcp", call("new"), nil)
	if r.code != 503 || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, "nothing ran") {
		t.Errorf("new call while draining: %d %s", r.code, r.body)
	}
	close(release)
	if r := <-slow; r.code != 200 || !strings.Contains(r.body, `"status":"ok"`) {
		t.Errorf("the call in flight did not finish: %d %s", r.code, r.body)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("ServeHTTP: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeHTTP did not return after the drain")
	}
	if n := d.Runner.Sandbox.(*runnertest.Sandbox).Runs.Load(); n != 1 {
		t.Errorf("%d runs, want 1: the call refused while draining ran", n)
	}
}

// A call that outlives the grace is cancelled, and the server still stops.
func TestDrainGraceCancels(t *testing.T) {
	d := fakeDeps(runnertest.Block, 1)
	st := NewState()
	st.SetReady()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ctx, sigterm := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- ServeHTTP(ctx, ln, Handler(New(d), url, HTTPOptions{Stateless: true, State: st, Log: quiet}), st, 200*time.Millisecond, quiet)
	}()
	go func() {
		req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(call("block")))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if resp, err := fastClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	for deadline := time.Now().Add(3 * time.Second); d.Runner.Limiter.Running() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the call never started")
		}
		time.Sleep(time.Millisecond)
	}
	sigterm()
	select {
	case <-served:
	case <-time.After(8 * time.Second):
		t.Fatal("ServeHTTP did not stop after the grace")
	}
	for deadline := time.Now().Add(3 * time.Second); d.Runner.Limiter.Running() != 0; {
		if time.Now().After(deadline) {
			t.Fatal("the call outlived the grace")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestTokensFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("# fleet\nalice aaaaaaaaaaaaaaaaaaaa\n\nbob   bbbbbbbbbbbbbbbbbbbb\n")
	c, err := NewClients("", path)
	if err != nil {
		t.Fatal(err)
	}
	for header, want := range map[string]string{
		"Bearer aaaaaaaaaaaaaaaaaaaa": "alice", "bearer bbbbbbbbbbbbbbbbbbbb": "bob", "BEARER aaaaaaaaaaaaaaaaaaaa": "alice",
		"Bearer aaaaaaaaaaaaaaaaaaa": "", "Basic aaaaaaaaaaaaaaaaaaaa": "", "aaaaaaaaaaaaaaaaaaaa": "", "": "", "Bearer ": "",
	} {
		if got, ok := c.Authenticate(header); got != want || ok != (want != "") {
			t.Errorf("Authenticate(%q) = %q %t, want %q", header, got, ok, want)
		}
	}
	write("carol cccccccccccccccccccc\n")
	if err := c.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Authenticate("Bearer aaaaaaaaaaaaaaaaaaaa"); ok {
		t.Error("a token removed from the file still works after reload")
	}
	if got, _ := c.Authenticate("Bearer cccccccccccccccccccc"); got != "carol" {
		t.Error("a token added to the file does not work after reload")
	}
	write("carol short\n")
	if err := c.Reload(); err == nil {
		t.Error("a short token was accepted")
	}
	if got, _ := c.Authenticate("Bearer cccccccccccccccccccc"); got != "carol" {
		t.Error("a failed reload dropped the previous tokens")
	}
	// Only its owner may change it (a reader is warned of, not refused: see private).
	write("carol cccccccccccccccccccc\n")
	for _, mode := range []os.FileMode{0o620, 0o666, 0o602, 0o622} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := NewClients("", path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("a tokens file of mode %04o: %v, want it refused", mode, err)
		}
		if err := c.Reload(); err == nil {
			t.Errorf("a tokens file of mode %04o reloaded", mode)
		}
	}
	for _, mode := range []os.FileMode{0o600, 0o400, 0o640, 0o440, 0o644} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := NewClients("", path); err != nil {
			t.Errorf("a tokens file of mode %04o: %v", mode, err)
		}
	}
	// Another user's file may say 0600: they may still chmod it and write.
	if os.Geteuid() != 0 {
		t.Log("not root: the other owner's tokens file is not tried (the root run tries it)")
	} else {
		if err := os.Chown(path, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := NewClients("", path); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
			t.Errorf("a tokens file of another user's: %v, want it refused", err)
		}
		if err := c.Reload(); err == nil {
			t.Error("a tokens file of another user's reloaded")
		}
	}
	for name, bad := range map[string]string{
		"two fields": "alice\n", "bad name": "al/ice aaaaaaaaaaaaaaaaaaaa\n", "empty": "# nothing\n",
		"duplicate name":  "a aaaaaaaaaaaaaaaaaaaa\na bbbbbbbbbbbbbbbbbbbb\n",
		"duplicate token": "a aaaaaaaaaaaaaaaaaaaa\nb aaaaaaaaaaaaaaaaaaaa\n",
	} {
		if _, err := parseTokens(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The token's name is the client in the audit log, and the per-client limit counts it.
func TestClientNameInAuditAndLimit(t *testing.T) {
	release := make(chan struct{})
	d := fakeDeps(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
		if string(s.Code) == "slow" {
			<-release
		}
		return runnertest.Echo(ctx, s)
	}, 4)
	audit, err := runner.OpenAudit(filepath.Join(t.TempDir(), "audit.jsonl"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	d.Runner.Audit = audit
	d.Runner.PerClient = runner.NewClientLimit(1)
	clients := aliceAndBob(t)
	ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20, Stateless: true, Clients: clients})
	alice := map[string]string{"Authorization": "Bearer aaaaaaaaaaaaaaaaaaaa"}
	bob := map[string]string{"Authorization": "bearer bbbbbbbbbbbbbbbbbbbb"}
	slow := make(chan reply, 1)
	go func() { slow <- do(t, http.MethodPost, ts.URL+"/mcp", call("slow"), alice) }()
	for deadline := time.Now().Add(3 * time.Second); d.Runner.Limiter.Running() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the slow call never started")
		}
		time.Sleep(time.Millisecond)
	}
	if r := do(t, http.MethodPost, ts.URL+"/mcp", call("second"), alice); !strings.Contains(r.body, "server busy") || !strings.Contains(r.body, "alice") {
		t.Errorf("alice's second parallel call: %s, want busy (her limit)", r.body)
	}
	if r := do(t, http.MethodPost, ts.URL+"/mcp", call("bobs"), bob); !strings.Contains(r.body, `"status":"ok"`) {
		t.Errorf("bob's call was held by alice's limit: %s", r.body)
	}
	close(release)
	<-slow
	b, err := os.ReadFile(audit.Path())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec runner.AuditRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		got[rec.Principal+":"+rec.Status]++
	}
	if got["alice:ok"] != 1 || got["alice:refused"] != 1 || got["bob:ok"] != 1 {
		t.Errorf("audit by client: %v", got)
	}
}

// The legacy SSE transport runs nothing before the startup probes passed either.
func TestSSERefusedUntilReady(t *testing.T) {
	d := fakeDeps(runnertest.Echo, 1)
	st := NewState()
	ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20, SSE: true, State: st})
	endpoint := openStream(t, ts.URL, nil)
	if r := do(t, http.MethodPost, endpoint, call("early"), nil); r.code != 503 {
		t.Errorf("SSE message before ready: %d %s, want 503", r.code, r.body)
	}
	st.SetReady()
	if r := do(t, http.MethodPost, endpoint, call("x"), nil); r.code == 503 {
		t.Errorf("SSE message when ready: %d %s", r.code, r.body)
	}
}

// http.session_idle reaches the transport: a session unused past it is gone.
func TestSessionIdleOverHTTP(t *testing.T) {
	ts := httpServer(t, fakeDeps(runnertest.Echo, 1), HTTPOptions{MaxBodyBytes: 1 << 20, SessionIdle: 100 * time.Millisecond})
	sid := map[string]string{"Mcp-Session-Id": initSession(t, ts.URL+"/mcp", nil)}
	time.Sleep(300 * time.Millisecond)
	if r := do(t, http.MethodPost, ts.URL+"/mcp", call("late"), sid); r.code != 404 {
		t.Errorf("call in an expired session: %d %s, want 404", r.code, r.body)
	}
}

// mcp-go's own client, on both protocol eras, works against a stateless server.
func TestStatelessWithMCPClient(t *testing.T) {
	ts := httpServer(t, fakeDeps(runnertest.Echo, 1), HTTPOptions{MaxBodyBytes: 1 << 20, Stateless: true})
	for _, opts := range [][]client.ClientOption{nil, {client.WithProtocolVersion("2025-06-18")}} {
		tr, err := transport.NewStreamableHTTP(ts.URL + "/mcp")
		if err != nil {
			t.Fatal(err)
		}
		c := client.NewClient(tr, opts...)
		ctx := context.Background()
		startClient(t, ctx, c)
		r, err := runCode(ctx, c, "stateless")
		if err != nil || r.IsError {
			t.Errorf("run_code on a stateless server: %v %+v", err, r)
		}
		c.Close()
	}
}

// openStream opens a legacy SSE stream, closed at the test's end, and returns the
// message endpoint its first event names.
func openStream(t *testing.T, base string, hdr map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/sse", nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(data, "sessionId=") {
			return data
		}
	}
	t.Fatalf("GET /sse: %d, no endpoint event", resp.StatusCode)
	return ""
}

// TestSSEStreamBelongsToItsClient: bob, holding alice's SSE session id, can neither run a
// call in her session nor put an answer of his choosing on her stream (an oversized
// message's error carries the id he picks); alice's own posts still go through.
func TestSSEStreamBelongsToItsClient(t *testing.T) {
	clients := aliceAndBob(t)
	d := fakeDeps(runnertest.Echo, 1)
	ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 12, SSE: true, Clients: clients})
	alice := map[string]string{"Authorization": "Bearer aaaaaaaaaaaaaaaaaaaa"}
	bob := map[string]string{"Authorization": "Bearer bbbbbbbbbbbbbbbbbbbb"}
	endpoint := openStream(t, ts.URL, alice)
	if r := do(t, http.MethodPost, endpoint, call("bob"), bob); r.code != 404 {
		t.Errorf("bob's call in alice's SSE session: %d %s, want 404", r.code, r.body)
	}
	forged := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"pad":"` + strings.Repeat("x", 1<<13) + `"}}`
	if r := do(t, http.MethodPost, endpoint, forged, bob); r.code == http.StatusAccepted {
		t.Errorf("bob's oversized message was answered on alice's stream: %d", r.code)
	}
	if r := do(t, http.MethodPost, endpoint, initBody, alice); r.code != http.StatusAccepted {
		t.Errorf("alice's own message: %d %s, want 202", r.code, r.body)
	}
	if got := d.Runner.Sandbox.(*runnertest.Sandbox).Runs.Load(); got != 0 {
		t.Errorf("%d runs from bob's posts", got)
	}
}

// TestSingleTokenRules: http.auth_token obeys the tokens file's rules. A short one is
// guessable on a public bind; one with spaces around it turns auth on while matching no
// header (Authenticate trims), so neither is accepted.
func TestSingleTokenRules(t *testing.T) {
	for _, bad := range []string{"a", "s3cret", " ", "                    ", "aaaaaaaaaaaaaaaaaaaa ", "aaaaaaaaaa aaaaaaaaaa", "aaaaaaaaaa\taaaaaaaaaa"} {
		if _, err := NewClients(bad, ""); err == nil {
			t.Errorf("http.auth_token %q accepted", bad)
		}
	}
	c, err := NewClients("aaaaaaaaaaaaaaaaaaaa", "")
	if err != nil {
		t.Fatal(err)
	}
	if who, ok := c.Authenticate("Bearer  aaaaaaaaaaaaaaaaaaaa "); !ok || who != "default" {
		t.Errorf("a good token: %q %t", who, ok)
	}
}

// A Handler given a token it refuses fails closed: every path answers 500, none serves
// without auth.
func TestRefusedTokenRefusesEverything(t *testing.T) {
	h := Handler(nil, "http://127.0.0.1:1", HTTPOptions{AuthToken: "short", Log: quiet})
	for _, path := range []string{"/mcp", "/healthz", "/metrics", "/sse"} {
		req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1"+path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusInternalServerError {
			t.Errorf("%s with a refused token: %d, want 500", path, rec.Code)
		}
	}
}

// An initialize loop cannot grow the server without bound: past MaxSessions live
// sessions, initialize is refused (503, retryable) until one ends.
func TestSessionCap(t *testing.T) {
	d := fakeDeps(runnertest.Echo, 1)
	ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20, MaxSessions: 2})
	url := ts.URL + "/mcp"
	first := initSession(t, url, nil)
	initSession(t, url, nil)
	if r := do(t, http.MethodPost, url, initBody, nil); r.code != http.StatusServiceUnavailable || r.header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("a third initialize with a cap of 2: %d %q, want 503 and no session", r.code, r.body)
	}
	if r := do(t, http.MethodDelete, url, "", map[string]string{"Mcp-Session-Id": first}); r.code != 200 {
		t.Fatalf("DELETE: %d", r.code)
	}
	initSession(t, url, nil)
}

// An initialize under a 2026-07-28 MCP-Protocol-Version header is answered as a
// handshake (see eraCompat), so the session it issues is its client's like any other:
// usable by that client, not by another, and counted against the cap (else a loop of
// them filled the server with sessions nobody could use or end, and the cap refused
// every other client's initialize until they expired).
func TestModernHeaderInitializeIsASession(t *testing.T) {
	d := fakeDeps(runnertest.Echo, 1)
	ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20, MaxSessions: 2, Clients: aliceAndBob(t)})
	url := ts.URL + "/mcp"
	modernInit := strings.Replace(initBody, "2025-06-18", "2026-07-28", 1)
	alice := map[string]string{"Authorization": "Bearer aaaaaaaaaaaaaaaaaaaa", "MCP-Protocol-Version": "2026-07-28"}
	var ids []string
	for range 2 {
		r := do(t, http.MethodPost, url, modernInit, alice)
		if r.code != 200 || r.header.Get("Mcp-Session-Id") == "" {
			t.Fatalf("initialize under a modern header: %d %q", r.code, r.body)
		}
		ids = append(ids, r.header.Get("Mcp-Session-Id"))
	}
	if r := do(t, http.MethodPost, url, modernInit, alice); r.code != http.StatusServiceUnavailable || r.header.Get("Mcp-Session-Id") != "" {
		t.Errorf("a third initialize under a modern header with a cap of 2: %d %q, want 503 and no session", r.code, r.body)
	}
	in := map[string]string{"Authorization": alice["Authorization"], "MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": ids[0]}
	if r := do(t, http.MethodPost, url, call("hi"), in); r.code != 200 || !strings.Contains(r.body, `"status":"ok"`) {
		t.Errorf("alice's call in the session it issued her: %d %s", r.code, r.body)
	}
	in["Authorization"] = "Bearer bbbbbbbbbbbbbbbbbbbb"
	if r := do(t, http.MethodPost, url, call("bob"), in); r.code != 404 {
		t.Errorf("bob's call in alice's session: %d %s, want 404", r.code, r.body)
	}
}

// With client tokens, one client's initialize loop (or GET /sse loop) fills only its
// share of the cap: the other clients still open sessions.
func TestSessionShareOfAClient(t *testing.T) {
	alice := map[string]string{"Authorization": "Bearer aaaaaaaaaaaaaaaaaaaa"}
	bob := map[string]string{"Authorization": "Bearer bbbbbbbbbbbbbbbbbbbb"}
	ts := httpServer(t, fakeDeps(runnertest.Echo, 1), HTTPOptions{MaxBodyBytes: 1 << 20, MaxSessions: 8, MaxSessionsPerClient: 2, Clients: aliceAndBob(t)})
	url := ts.URL + "/mcp"
	initSession(t, url, alice)
	initSession(t, url, alice)
	if r := do(t, http.MethodPost, url, initBody, alice); r.code != http.StatusServiceUnavailable || !strings.Contains(r.body, "alice") {
		t.Errorf("alice's third initialize with a share of 2: %d %q, want 503 naming her", r.code, r.body)
	}
	initSession(t, url, bob)

	sse := httpServer(t, fakeDeps(runnertest.Echo, 1), HTTPOptions{SSE: true, MaxBodyBytes: 1 << 20, MaxSessions: 8, MaxSessionsPerClient: 1, Clients: aliceAndBob(t)})
	openStream(t, sse.URL, alice)
	if r := do(t, http.MethodGet, sse.URL+"/sse", "", alice); r.code != http.StatusServiceUnavailable {
		t.Errorf("alice's second SSE stream with a share of 1: %d %q, want 503", r.code, r.body)
	}
	openStream(t, sse.URL, bob)
}

// Each legacy SSE stream is an MCP session: past MaxSessions open streams, GET /sse is
// refused (503, retryable) until one closes, as initialize is on Streamable HTTP.
func TestSSEStreamCap(t *testing.T) {
	ts := httpServer(t, fakeDeps(runnertest.Echo, 1), HTTPOptions{SSE: true, MaxBodyBytes: 1 << 20, MaxSessions: 2})
	openStream(t, ts.URL, nil)
	ctx, closeSecond := context.WithCancel(context.Background())
	defer closeSecond()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/sse", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("second stream: %v %v", resp, err)
	}
	if r := do(t, http.MethodGet, ts.URL+"/sse", "", nil); r.code != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("a third stream with a cap of 2: %d %q, want 503 with Retry-After", r.code, r.body)
	}
	closeSecond()
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/sse", nil)
		resp, err := http.DefaultClient.Do(req)
		code := 0
		if err == nil {
			code = resp.StatusCode
			resp.Body.Close()
		}
		cancel()
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a stream after one closed: %d %v", code, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A message that is JSON but whose members do not all have their types is refused
// before mcp-go reads it its own way: an initialize with a _meta that is not an object,
// sent within a session, was no initialize to the cap and the claim, and mcp-go issued
// a session for each, unowned and past the cap, until no client could initialize.
func TestPartlyDecodedMessageRefused(t *testing.T) {
	ts := httpServer(t, fakeDeps(runnertest.Echo, 1), HTTPOptions{MaxBodyBytes: 1 << 20, MaxSessions: 2})
	url := ts.URL + "/mcp"
	sid := map[string]string{"Mcp-Session-Id": initSession(t, url, nil)}
	odd := `{"jsonrpc":"2.0","params":{"_meta":5,"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}},"id":1,"method":"initialize"}`
	for range 3 {
		if r := do(t, http.MethodPost, url, odd, sid); r.code != http.StatusBadRequest || r.header.Get("Mcp-Session-Id") != "" {
			t.Fatalf("initialize with a _meta of the wrong type: %d %q session %q, want 400 and none", r.code, r.body, r.header.Get("Mcp-Session-Id"))
		}
	}
	initSession(t, url, nil)
}

// An MCP session that ends tells SessionEnded who owned it, so its run_code sessions go
// with it.
func TestSessionEndedHook(t *testing.T) {
	s := newSessions(time.Minute)
	var got []string
	s.ended = func(id, owner string) { got = append(got, id+" "+owner) }
	id := s.Generate()
	s.claim(id, "alice")
	if _, err := s.Terminate(id); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != id+" alice" {
		t.Fatalf("SessionEnded saw %q", got)
	}
}

// openSessions is a backend whose sessions only count calls: enough to see who may open
// one, without a sandbox.
type openSessions struct{ *runnertest.Sandbox }

func (openSessions) OpenSession(context.Context, sandbox.Spec) (sandbox.Session, error) {
	return &countSession{done: make(chan struct{})}, nil
}

type countSession struct {
	once sync.Once
	done chan struct{}
}

func (c *countSession) Call(_ context.Context, sc sandbox.SessionCall) (sandbox.Result, error) {
	return sandbox.Result{ID: sc.ID, Status: sandbox.StatusOK}, nil
}
func (c *countSession) Close()                { c.once.Do(func() { close(c.done) }) }
func (c *countSession) Done() <-chan struct{} { return c.done }
func (c *countSession) Gone() <-chan struct{} { return c.done }

// A stateless server takes Mcp-Session-Id as the client sends it; "stdio", the id of
// the stdio transport's session, must not make an HTTP client the stdio client: without
// tokens it has no identity and so no sessions (else every such client shared one
// owner, and the cap's answer listed the others' session ids).
func TestStatelessClientCannotClaimStdio(t *testing.T) {
	d := fakeDeps(runnertest.Echo, 1)
	d.Runner.Sandbox = openSessions{d.Runner.Sandbox.(*runnertest.Sandbox)}
	d.Runner.Sessions = runsession.New(runsession.Limits{IdleTTL: time.Minute, MaxLifetime: time.Hour, MaxPerClient: 4, MaxTotal: 16}, quiet)
	t.Cleanup(d.Runner.Sessions.Close)
	d.Config.HTTP.Stateless = true
	ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20, Stateless: true})
	body := strings.Replace(callBody, `"code":"CODE"`, `"code":"x = 1","session":"new"`, 1)
	r := do(t, http.MethodPost, ts.URL+"/mcp", body, map[string]string{"Mcp-Session-Id": "stdio"})
	if r.code != 200 || !strings.Contains(r.body, "sessions need a client identity") {
		t.Fatalf("a stateless client without a token claiming the stdio session: %d %s", r.code, r.body)
	}
	if n := d.Runner.Sessions.Stats().Open; n != 0 {
		t.Fatalf("%d sessions opened", n)
	}

	// The stdio client, known by its session's type, keeps its sessions.
	p := startStdio(t, d, StdioOptions{})
	p.send(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"x = 1","session":"new"}}}`)
	if m := p.recv(t); !strings.Contains(fmt.Sprint(m["result"]), "session_id:") {
		t.Fatalf("a session over stdio: %v", m)
	}
	if n := d.Runner.Sessions.Stats().Open; n != 1 {
		t.Fatalf("over stdio, %d sessions open, want 1", n)
	}
}

// A token's run_code sessions count against one max_per_client, whichever of its MCP
// sessions started them: a new MCP session (an initialize away) is no new client.
func TestSessionCapIsTheTokens(t *testing.T) {
	d := fakeDeps(runnertest.Echo, 1)
	d.Runner.Sandbox = openSessions{d.Runner.Sandbox.(*runnertest.Sandbox)}
	d.Runner.Sessions = runsession.New(runsession.Limits{IdleTTL: time.Minute, MaxLifetime: time.Hour, MaxPerClient: 1, MaxTotal: 16}, quiet)
	t.Cleanup(d.Runner.Sessions.Close)
	ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20, Clients: aliceAndBob(t)})
	url := ts.URL + "/mcp"
	body := strings.Replace(callBody, `"code":"CODE"`, `"code":"x = 1","session":"new"`, 1)
	for i, want := range []string{"session_id", "max_per_client"} {
		alice := map[string]string{"Authorization": "Bearer aaaaaaaaaaaaaaaaaaaa"}
		alice["Mcp-Session-Id"] = initSession(t, url, alice)
		if r := do(t, http.MethodPost, url, body, alice); !strings.Contains(r.body, want) {
			t.Errorf("alice's session from her MCP session %d: %d %s, want %q", i+1, r.code, r.body, want)
		}
	}
	bob := map[string]string{"Authorization": "Bearer bbbbbbbbbbbbbbbbbbbb"}
	bob["Mcp-Session-Id"] = initSession(t, url, bob)
	if r := do(t, http.MethodPost, url, body, bob); !strings.Contains(r.body, "session_id") {
		t.Errorf("bob's session beside alice's: %d %s", r.code, r.body)
	}
}

// aliceAndBob are two clients from a tokens file: alice (token a×20) and bob (b×20).
func aliceAndBob(t *testing.T) *Clients {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("alice aaaaaaaaaaaaaaaaaaaa\nbob bbbbbbbbbbbbbbbbbbbb\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clients, err := NewClients("", path)
	if err != nil {
		t.Fatal(err)
	}
	return clients
}

// A burst of simultaneous initializes (or GET /sse) gets no more sessions than the cap
// and a client's share allow: each is counted from the moment it is admitted, not from
// when its answer goes out.
func TestSessionCapHoldsUnderABurst(t *testing.T) {
	const burst = 24
	alice := map[string]string{"Authorization": "Bearer aaaaaaaaaaaaaaaaaaaa"}
	for _, tc := range []struct {
		name string
		opt  HTTPOptions
		hdr  map[string]string
		want int
	}{
		{"server cap", HTTPOptions{MaxSessions: 3}, nil, 3},
		{"client share", HTTPOptions{MaxSessions: 64, MaxSessionsPerClient: 2, Clients: aliceAndBob(t)}, alice, 2},
	} {
		for _, sse := range []bool{false, true} {
			tc.opt.MaxBodyBytes, tc.opt.SSE = 1<<20, sse
			ts := httpServer(t, fakeDeps(runnertest.Echo, 1), tc.opt)
			ctx, cancel := context.WithCancel(context.Background())
			var opened atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range burst {
				wg.Add(1)
				go func() {
					defer wg.Done()
					method, url, body := http.MethodPost, ts.URL+"/mcp", initBody
					if sse {
						method, url, body = http.MethodGet, ts.URL+"/sse", ""
					}
					req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Accept", "application/json, text/event-stream")
					for k, v := range tc.hdr {
						req.Header.Set(k, v)
					}
					<-start
					resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
					if err != nil {
						t.Errorf("%s: %v", method, err)
						return
					}
					if resp.StatusCode == 200 {
						opened.Add(1)
					} else if resp.StatusCode != http.StatusServiceUnavailable {
						t.Errorf("%s: %d", method, resp.StatusCode)
					}
					if !sse {
						resp.Body.Close() // a stream stays open until cancel
					}
				}()
			}
			close(start)
			wg.Wait()
			if got := opened.Load(); got != int64(tc.want) {
				t.Errorf("%s, sse=%t: %d of %d simultaneous opens got a session, want %d", tc.name, sse, got, burst, tc.want)
			}
			cancel()
		}
	}
}

// probe_sandbox's sandboxes are a client's runs like run_code's: their audit lines name
// the client whose token asked for them.
func TestProbeRunsAuditedUnderTheirClient(t *testing.T) {
	d := fakeDeps(runnertest.Echo, 4)
	audit, err := runner.OpenAudit(filepath.Join(t.TempDir(), "audit.jsonl"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	d.Runner.Audit = audit
	// The probe call as a whole is alice's one call in flight; its probes take no more.
	d.Runner.PerClient = runner.NewClientLimit(1)
	d.Prober = probe.NewSuite(d.Runner)
	ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20, Stateless: true, Clients: aliceAndBob(t)})
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"probe_sandbox","arguments":{"probes":["read-shadow","fd-leak"]}}}`
	if r := do(t, http.MethodPost, ts.URL+"/mcp", body, map[string]string{"Authorization": "Bearer aaaaaaaaaaaaaaaaaaaa"}); r.code != 200 || !strings.Contains(r.body, "read-shadow") || strings.Contains(r.body, "slot") {
		t.Fatalf("probe_sandbox: %d %s", r.code, r.body)
	}
	b, err := os.ReadFile(audit.Path())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d audit lines for two probes: %s", len(lines), b)
	}
	for _, line := range lines {
		var rec runner.AuditRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Principal != "alice" || rec.Transport != "http" {
			t.Errorf("a probe's audit line: principal %q transport %q, want alice over http", rec.Principal, rec.Transport)
		}
	}
}

// A session's server-to-client streams (GET /mcp) are bounded: each held a connection and
// goroutines for as long as the session lived, so one client with one session could open
// them without end. A new stream past the bound closes the session's oldest, so a client
// whose old stream died unseen (a NAT dropping it) can always open a new one.
func TestSessionStreamsBounded(t *testing.T) {
	ts := httpServer(t, fakeDeps(runnertest.Echo, 1), HTTPOptions{MaxBodyBytes: 1 << 20})
	url := ts.URL + "/mcp"
	sid := initSession(t, url, nil)
	const opened = 3 * maxStreamsPerSession
	closed := make([]chan struct{}, opened)
	for i := range opened {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("stream %d: %v %v", i, resp, err)
		}
		closed[i] = make(chan struct{})
		go func() {
			defer close(closed[i])
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
	for i, c := range closed {
		select {
		case <-c:
			if i >= opened-maxStreamsPerSession {
				t.Errorf("stream %d of %d, one of the newest %d, was closed", i, opened, maxStreamsPerSession)
			}
		case <-time.After(2 * time.Second):
			if i < opened-maxStreamsPerSession {
				t.Errorf("stream %d of %d still open: a session holds at most %d", i, opened, maxStreamsPerSession)
			}
		}
	}
	if r := do(t, http.MethodPost, url, call("still"), map[string]string{"Mcp-Session-Id": sid}); r.code != 200 || !strings.Contains(r.body, `"status":"ok"`) {
		t.Errorf("a call in the session after: %d %s", r.code, r.body)
	}
}
