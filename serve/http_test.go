package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/airlock-mcp/airlock/runner/runnertest"
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/tools"
)

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func httpServer(t *testing.T, d tools.Deps, opt HTTPOptions) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opt.Log = quiet
	ts := httptest.NewUnstartedServer(Handler(New(d), "http://"+ln.Addr().String(), opt))
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

// mcpPost is a client's POST of body to url with the headers every MCP client sends, and hdr.
func mcpPost(url, body string, hdr map[string]string) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return req
}

func post(t *testing.T, url, body string, hdr map[string]string) int {
	t.Helper()
	resp, err := http.DefaultClient.Do(mcpPost(url, body, hdr))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestHTTPGuards(t *testing.T) {
	ts := httpServer(t, fakeDeps(runnertest.Echo, 1), HTTPOptions{AuthToken: "s3cret-s3cret-s3cret", MaxBodyBytes: 4096,
		AllowedOrigins: []string{"https://app.example.com"}})
	url := ts.URL + "/mcp"
	port := ts.URL[strings.LastIndex(ts.URL, ":")+1:]
	auth := "Bearer s3cret-s3cret-s3cret"
	tests := []struct {
		name string
		body string
		hdr  map[string]string
		want int
	}{
		{"ok", initBody, map[string]string{"Authorization": auth}, 200},
		{"evil origin", initBody, map[string]string{"Authorization": auth, "Origin": "http://evil.example.com"}, 403},
		{"loopback origin, other port", initBody, map[string]string{"Authorization": auth, "Origin": "http://localhost:1"}, 403},
		{"loopback origin, same port", initBody, map[string]string{"Authorization": auth, "Origin": "http://localhost:" + port}, 200},
		{"configured origin", initBody, map[string]string{"Authorization": auth, "Origin": "https://app.example.com"}, 200},
		{"no token", initBody, nil, 401},
		{"bad token", initBody, map[string]string{"Authorization": "Bearer s3cre"}, 401},
		{"not bearer", initBody, map[string]string{"Authorization": "s3cret-s3cret-s3cret"}, 401},
		// RFC 7235 §2.1: the scheme is case-insensitive; the token is not.
		{"lowercase scheme", initBody, map[string]string{"Authorization": "bearer s3cret-s3cret-s3cret"}, 200},
		{"uppercase scheme", initBody, map[string]string{"Authorization": "BEARER s3cret-s3cret-s3cret"}, 200},
		{"token case matters", initBody, map[string]string{"Authorization": "Bearer S3CRET-S3CRET-S3CRET"}, 401},
		{"other scheme", initBody, map[string]string{"Authorization": "Basic s3cret-s3cret-s3cret"}, 401},
		{"scheme only", initBody, map[string]string{"Authorization": "Bearer"}, 401},
		{"body too large", strings.Repeat(" ", 5000) + initBody, map[string]string{"Authorization": auth}, 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := post(t, url, tt.body, tt.hdr); got != tt.want {
				t.Errorf("status %d, want %d", got, tt.want)
			}
		})
	}
	// Chunked (no Content-Length) must be refused the same way.
	req, _ := http.NewRequest(http.MethodPost, url, struct{ *strings.Reader }{strings.NewReader(strings.Repeat(" ", 5000) + initBody)})
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 || req.ContentLength > 0 {
		t.Errorf("chunked oversize body: status %d (content-length %d)", resp.StatusCode, req.ContentLength)
	}
}

// The listener bounds what a client can hold without sending anything: a slow request
// head and an idle keep-alive connection (one request to /healthz needs no token).
func TestServerBoundsIdleConnections(t *testing.T) {
	s := newServer(http.NotFoundHandler(), context.Background(), quiet)
	if s.ReadHeaderTimeout <= 0 || s.IdleTimeout <= 0 {
		t.Errorf("ReadHeaderTimeout %v, IdleTimeout %v: a connection can be held without end", s.ReadHeaderTimeout, s.IdleTimeout)
	}
	if s.MaxHeaderBytes <= 0 || s.MaxHeaderBytes > 64<<10 {
		t.Errorf("MaxHeaderBytes %d: a tokenless request head may be up to 1 MiB", s.MaxHeaderBytes)
	}
	if s.ReadTimeout != 0 || s.WriteTimeout != 0 {
		t.Errorf("ReadTimeout %v, WriteTimeout %v: they would cut long calls and SSE streams", s.ReadTimeout, s.WriteTimeout)
	}
}

// Refused requests cost their client nothing, so they are not logged one line each: a
// flood of requests without a token writes a line a second, counting the rest.
func TestRefusalsLogAtMostOnceASecond(t *testing.T) {
	var lines atomic.Int64
	h := Handler(New(fakeDeps(runnertest.Echo, 1)), "http://127.0.0.1:1",
		HTTPOptions{AuthToken: "s3cret-s3cret-s3cret", Log: slog.New(countHandler{&lines})})
	start := time.Now()
	for range 50 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "http://127.0.0.1:1/mcp", strings.NewReader(initBody)))
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("without a token: %d", rec.Code)
		}
	}
	if n, most := lines.Load(), 1+int64(time.Since(start)/time.Second); n < 1 || n > most {
		t.Errorf("50 refused requests in %v wrote %d log lines, want 1 to %d", time.Since(start), n, most)
	}
}

// countHandler counts the records logged through it.
type countHandler struct{ n *atomic.Int64 }

func (countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (c countHandler) Handle(context.Context, slog.Record) error {
	c.n.Add(1)
	return nil
}
func (c countHandler) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c countHandler) WithGroup(string) slog.Handler      { return c }

func TestCheckBind(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:8765": true, "localhost:1": true, "[::1]:2": true,
		"0.0.0.0:8765": false, ":8765": false, "192.168.1.5:80": false} {
		if err := CheckBind(addr, false); (err == nil) != ok {
			t.Errorf("CheckBind(%q, no token) = %v", addr, err)
		}
		if err := CheckBind(addr, true); err != nil {
			t.Errorf("CheckBind(%q, token) = %v", addr, err)
		}
	}
}

func TestHTTPDisconnectCancelsRun(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		var cancelled atomic.Bool
		d := fakeDeps(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
			r, err := runnertest.Block(ctx, s)
			cancelled.Store(true)
			return r, err
		}, 1)
		ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20})
		var opts []client.ClientOption
		if legacy {
			opts = append(opts, client.WithProtocolVersion("2025-06-18"))
		}
		tr, err := transport.NewStreamableHTTP(ts.URL + "/mcp")
		if err != nil {
			t.Fatal(err)
		}
		c := client.NewClient(tr, opts...)
		ctx := context.Background()
		startClient(t, ctx, c)
		cctx, cancel := context.WithCancel(ctx)
		go func() {
			for d.Runner.Limiter.Running() == 0 {
				time.Sleep(time.Millisecond)
			}
			cancel()
		}()
		req := mcp.CallToolRequest{}
		req.Params.Name = "run_code"
		req.Params.Arguments = map[string]any{"code": "block"}
		_, _ = c.CallTool(cctx, req)
		deadline := time.Now().Add(3 * time.Second)
		for !cancelled.Load() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if !cancelled.Load() {
			t.Errorf("legacy=%t: client disconnect did not cancel the sandbox run", legacy)
		}
		c.Close()
	}
}

func TestSSETransport(t *testing.T) {
	ts := httpServer(t, fakeDeps(runnertest.Echo, 1), HTTPOptions{SSE: true, MaxBodyBytes: 1 << 20})
	c, err := client.NewSSEMCPClient(ts.URL + "/sse")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	startClient(t, ctx, c)
	r, err := runCode(ctx, c, "over sse")
	if err != nil || r.IsError {
		t.Fatalf("run_code over SSE: %v %+v", err, r)
	}
	if post(t, ts.URL+"/message", initBody, map[string]string{"Origin": "http://evil.example.com"}) != 403 {
		t.Error("SSE message endpoint accepted an evil Origin")
	}
}

// postJSON posts body and returns the status and the decoded JSON answer, if any.
func postJSON(t *testing.T, url, body string, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// The Go SDK at 2026-07-28 sends notifications with the MCP-Protocol-Version header but
// without _meta; a 400 there made it close its session. initialize under that header is
// answered as the handshake it is (2025-11-25), not refused.
func TestHTTPModernHeaderNotificationsAndInitialize(t *testing.T) {
	ts := httpServer(t, fakeDeps(runnertest.Echo, 1), HTTPOptions{MaxBodyBytes: 1 << 20})
	url := ts.URL + "/mcp"
	modern := map[string]string{"MCP-Protocol-Version": "2026-07-28"}
	for _, n := range []string{
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"user"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"_meta":{"x":1}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	} {
		if got, m := postJSON(t, url, n, modern); got != http.StatusAccepted {
			t.Errorf("%s: status %d %v, want 202", n, got, m)
		}
	}
	got, m := postJSON(t, url, strings.Replace(initBody, "2025-06-18", "2026-07-28", 1), modern)
	res, _ := m["result"].(map[string]any)
	if got != http.StatusOK || res == nil || res["protocolVersion"] != "2025-11-25" {
		t.Errorf("initialize asking 2026-07-28 under a modern header: %d %v", got, m)
	}
	// A modern request still has to carry its _meta.
	if got, _ := postJSON(t, url, `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`, modern); got != http.StatusBadRequest {
		t.Errorf("modern tools/list without _meta: status %d, want 400", got)
	}
}

// An oversized body is refused with a JSON-RPC error carrying the request's id, found
// first or last in the body, so that clients can match it (the Go SDK keeps its session
// on a 413 only when its body is a JSON-RPC error).
func TestHTTPTooLargeCarriesTheID(t *testing.T) {
	ts := httpServer(t, fakeDeps(runnertest.Echo, 1), HTTPOptions{MaxBodyBytes: 1 << 16})
	big := strings.Repeat("a", 1<<17) // within the 4x the limit that is scanned for an id
	for _, tc := range []struct {
		name, body string
		id         any
	}{
		{"id first", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"` + big + `"}}}`, float64(7)},
		{"id last", `{"method":"tools/call","params":{"name":"run_code","arguments":{"code":"` + big + `"}},"jsonrpc":"2.0","id":"z"}`, "z"},
	} {
		got, m := postJSON(t, ts.URL+"/mcp", tc.body, nil)
		e, _ := m["error"].(map[string]any)
		if got != http.StatusRequestEntityTooLarge || m["id"] != tc.id || e == nil || !strings.Contains(fmt.Sprint(e["message"]), "message too large") {
			t.Errorf("%s: status %d %v", tc.name, got, m)
		}
	}
	if got, _ := postJSON(t, ts.URL+"/mcp", `{"jsonrpc":"2.0","method":"notifications/x","params":{"a":"`+big+`"}}`, nil); got != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized notification: status %d", got)
	}
}

// On SSE every answer travels on the event stream and a failed POST ends some clients'
// sessions: the oversized request's error comes on the stream, with its id.
func TestSSETooLargeAnsweredOnTheStream(t *testing.T) {
	ts := httpServer(t, fakeDeps(runnertest.Echo, 1), HTTPOptions{SSE: true, MaxBodyBytes: 1 << 16})
	c, err := client.NewSSEMCPClient(ts.URL + "/sse")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	startClient(t, ctx, c)
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_code"
	req.Params.Arguments = map[string]any{"code": strings.Repeat("a", 1<<18)}
	if _, err := c.CallTool(ctx, req); err == nil || !strings.Contains(err.Error(), "message too large") {
		t.Fatalf("oversized call over SSE: %v", err)
	}
	req.Params.Arguments = map[string]any{"code": "still here"}
	if r, err := c.CallTool(ctx, req); err != nil || r.IsError {
		t.Fatalf("after the oversized call: %v %+v", err, r)
	}
}

// A legacy SSE stream that closes ends its MCP session: SessionEnded is told, so the
// run_code sessions it started go with it instead of holding the server's slots until
// they idle out.
func TestSSEStreamEndTellsSessionEnded(t *testing.T) {
	ended := make(chan string, 1)
	ts := httpServer(t, fakeDeps(runnertest.Echo, 1), HTTPOptions{SSE: true, MaxBodyBytes: 1 << 20,
		SessionEnded: func(id, owner string) { ended <- id }})
	c, err := client.NewSSEMCPClient(ts.URL + "/sse")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	startClient(t, ctx, c)
	c.Close()
	select {
	case got := <-ended:
		if len(got) != 32 {
			t.Fatalf("SessionEnded for %q, want the stream's id", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a closed SSE stream did not end its session")
	}
}

// slowBody sends a request head with a Content-Length of 4096 and then its body a byte
// every 50 ms, and returns what the server answered by the time it closed the
// connection, or "" if it was still open after 5 s.
func slowBody(t *testing.T, addr, path, auth string) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	head := "POST " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\n" +
		"Accept: application/json, text/event-stream\r\nContent-Length: 4096\r\n"
	if auth != "" {
		head += "Authorization: " + auth + "\r\n"
	}
	if _, err := conn.Write([]byte(head + "\r\n")); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var got strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := conn.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return ""
			}
			return got.String()
		}
	}
}

// A body sent a byte at a time cannot hold a connection past the body timeout, with a
// token (guard is reading it: 408) or without one (net/http reads a refused request's
// unread body before it writes the 401), on both transports' POST paths. A call that
// runs longer than the body timeout is not cut by it once its body has arrived.
func TestSlowBodyTimesOut(t *testing.T) {
	slow := func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
		select {
		case <-time.After(1500 * time.Millisecond):
			return runnertest.Echo(ctx, s)
		case <-ctx.Done():
			return runnertest.Block(ctx, s)
		}
	}
	for _, sse := range []bool{false, true} {
		ts := httpServer(t, fakeDeps(slow, 1), HTTPOptions{AuthToken: "s3cret-s3cret-s3cret", MaxBodyBytes: 1 << 20,
			BodyTimeout: 500 * time.Millisecond, SSE: sse})
		addr := ts.Listener.Addr().String()
		path := "/mcp"
		if sse {
			path = strings.TrimPrefix(openStream(t, ts.URL, map[string]string{"Authorization": "Bearer s3cret-s3cret-s3cret"}), ts.URL)
		}
		if got := slowBody(t, addr, path, "Bearer s3cret-s3cret-s3cret"); !strings.HasPrefix(got, "HTTP/1.1 408") {
			t.Errorf("sse=%t: a slow body with a token: %q, want a 408 and the connection closed", sse, got)
		}
		if got := slowBody(t, addr, path, ""); !strings.HasPrefix(got, "HTTP/1.1 401") {
			t.Errorf("sse=%t: a slow body without a token: %q, want a 401 and the connection closed", sse, got)
		}
	}
	ts := httpServer(t, fakeDeps(slow, 1), HTTPOptions{MaxBodyBytes: 1 << 20, BodyTimeout: 500 * time.Millisecond})
	hdr := map[string]string{"Mcp-Session-Id": initSession(t, ts.URL+"/mcp", nil)}
	if r := do(t, http.MethodPost, ts.URL+"/mcp", call("slow"), hdr); r.code != 200 || !strings.Contains(r.body, `"status":"ok"`) {
		t.Errorf("a 1.5 s call with a 0.5 s body timeout: %d %s", r.code, r.body)
	}
}

// A client that stops reading its answer does not hold the handler: the answer's write
// times out, the request leaves State's count (a drain would wait on it) and its
// connection is closed. A client that reads it, however slowly, gets all of it.
func TestUnreadAnswerTimesOut(t *testing.T) {
	d := fakeDeps(runnertest.Echo, 1)
	d.Runner.MaxCodeBytes = 8 << 20
	st := NewState()
	st.SetReady()
	ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 16 << 20, Stateless: true, State: st, WriteTimeout: time.Second})
	// Each '"' is two bytes in the JSON answer, which carries stdout twice: ≈ 8 MiB, more
	// than the server's socket send buffer (at most 4 MiB) and this client's small
	// receive buffer hold.
	body := call(strings.Repeat(`\"`, 2<<20))
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s",
		ts.Listener.Addr(), len(body), body)
	// Building the answer takes seconds under the race detector on a loaded host.
	deadline := time.Now().Add(30 * time.Second)
	for st.InFlight() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	for st.InFlight() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := st.InFlight(); n != 0 {
		t.Fatalf("an answer its client does not read still holds %d request(s) in flight after 30 s", n)
	}
	// The server gave up on the connection: what was sent ends short of the answer.
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, _ := io.Copy(io.Discard, conn)
	if got >= 8<<20 {
		t.Errorf("the whole answer (%d bytes) came after its write timed out", got)
	}

	// A slow reader gets the whole answer: 64 KiB every 20 ms. A blocked write resumes
	// only once a third of the socket's send buffer is free (up to 4 MiB on loopback),
	// ≈ 0.45 s of this reading, within the 1 s.
	small := call(strings.Repeat("x", 2<<20))
	conn2, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	fmt.Fprintf(conn2, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		ts.Listener.Addr(), len(small), small)
	var all strings.Builder
	buf := make([]byte, 64<<10)
	_ = conn2.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		n, err := conn2.Read(buf)
		all.Write(buf[:n])
		if err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.HasPrefix(all.String(), "HTTP/1.1 200") || !strings.Contains(all.String(), `"status":"ok"`) || !strings.Contains(all.String(), `"language_version":"3.11.2"}}}`) {
		t.Errorf("a slow reader's answer: %d bytes, %.60q ... %.60q", all.Len(), all.String(), all.String()[max(0, all.Len()-60):])
	}
}

// A refused request's Host, Origin and path are the client's text, up to the server's
// header limit (1 MiB by default): the refusal log line carries each clipped, so a
// tokenless client cannot write a megabyte a second to the log's disk.
func TestRefusalLogClipsClientText(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))
	ts := httpServer(t, fakeDeps(runnertest.Echo, 1), HTTPOptions{AuthToken: "s3cret-s3cret-s3cret", MaxBodyBytes: 1 << 20})
	h := Handler(New(fakeDeps(runnertest.Echo, 1)), ts.URL, HTTPOptions{AuthToken: "s3cret-s3cret-s3cret", MaxBodyBytes: 1 << 20, Log: log})
	ts.Config.Handler = h
	long := strings.Repeat("a", 200<<10)
	for _, hdr := range []map[string]string{{"Host": long + ".example"}, {"Origin": "http://" + long}} {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/"+long, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
			if k == "Host" {
				req.Host = v
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("%v: %d, want 403", hdr, resp.StatusCode)
		}
		time.Sleep(1100 * time.Millisecond) // one line a second
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(buf.String(), "\n"); n != 2 || buf.Len() > 2048 {
		t.Errorf("two refusals of 200 KiB names wrote %d lines, %d bytes", n, buf.Len())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// One client cannot make the server hold more than bodyBudgetBodies bodies of the largest
// size at once: a ninth large body, sent while eight are held by calls in flight, is
// answered 503 (retryable, nothing ran) instead of buffered, and is taken once they end.
func TestBodyBudget(t *testing.T) {
	release := make(chan struct{})
	d := fakeDeps(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return runnertest.Echo(ctx, s)
	}, bodyBudgetBodies+1)
	const limit = 64 << 10
	ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: limit, Stateless: true})
	big := call(strings.Repeat("x", limit-200))
	answers := make(chan int, bodyBudgetBodies)
	for range bodyBudgetBodies {
		go func() {
			code, _ := postJSON(t, ts.URL+"/mcp", big, nil)
			answers <- code
		}()
	}
	for deadline := time.Now().Add(5 * time.Second); d.Runner.Limiter.Running() < bodyBudgetBodies; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d calls started", d.Runner.Limiter.Running(), bodyBudgetBodies)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// fastClient: a ninth body taken in would wait with the others, and fail the test.
	if r := do(t, http.MethodPost, ts.URL+"/mcp", big, nil); r.code != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Errorf("a ninth large body while eight are held: %d %.200s, want 503", r.code, r.body)
	}
	close(release)
	for range bodyBudgetBodies {
		if code := <-answers; code != 200 {
			t.Errorf("a held call: %d", code)
		}
	}
	if code, m := postJSON(t, ts.URL+"/mcp", big, nil); code != 200 {
		t.Errorf("a large body once the others ended: %d %v", code, m)
	}
	// With client tokens, one client holds a quarter of the budget: alice's third large
	// body waits for her own, while bob's goes through.
	release = make(chan struct{})
	ts = httpServer(t, d, HTTPOptions{MaxBodyBytes: limit, Stateless: true, Clients: aliceAndBob(t)})
	alice := map[string]string{"Authorization": "Bearer aaaaaaaaaaaaaaaaaaaa"}
	for range bodyBudgetBodies / 4 {
		go func() { answers <- do(t, http.MethodPost, ts.URL+"/mcp", big, alice).code }()
	}
	for deadline := time.Now().Add(5 * time.Second); d.Runner.Limiter.Running() < bodyBudgetBodies/4; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d calls started", d.Runner.Limiter.Running(), bodyBudgetBodies/4)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r := do(t, http.MethodPost, ts.URL+"/mcp", big, alice); r.code != http.StatusServiceUnavailable {
		t.Errorf("alice's third large body: %d, want 503", r.code)
	}
	go func() {
		answers <- do(t, http.MethodPost, ts.URL+"/mcp", big, map[string]string{"Authorization": "Bearer bbbbbbbbbbbbbbbbbbbb"}).code
	}()
	for deadline := time.Now().Add(5 * time.Second); d.Runner.Limiter.Running() < bodyBudgetBodies/4+1; {
		if time.Now().After(deadline) {
			t.Fatal("bob's call did not start beside alice's")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	for range bodyBudgetBodies/4 + 1 {
		if code := <-answers; code != 200 {
			t.Errorf("a held call: %d", code)
		}
	}
}

// A call posted to an SSE stream ends when the stream does: mcp-go runs it detached
// from its POST, and it ran on to its time limit after its client had gone.
func TestSSEStreamEndCancelsItsCalls(t *testing.T) {
	cancelled := make(chan struct{})
	d := fakeDeps(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
		r, err := runnertest.Block(ctx, s)
		close(cancelled)
		return r, err
	}, 1)
	ts := httpServer(t, d, HTTPOptions{SSE: true, MaxBodyBytes: 1 << 20})
	c, err := client.NewSSEMCPClient(ts.URL + "/sse")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	startClient(t, ctx, c)
	go func() { _, _ = runCode(ctx, c, "block") }()
	for d.Runner.Limiter.Running() == 0 {
		time.Sleep(time.Millisecond)
	}
	c.Close()
	select {
	case <-cancelled:
	case <-time.After(3 * time.Second):
		t.Fatal("the SSE stream closed, its call still runs")
	}
}
