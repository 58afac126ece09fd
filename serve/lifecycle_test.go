package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/runner/runnertest"
	"github.com/airlock-mcp/airlock/tools"
)

// sseStream is a GET /sse kept open: the endpoint to post to and the messages the
// stream carries.
type sseStream struct {
	endpoint string
	msgs     chan map[string]any
}

func openSSE(t *testing.T, base string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/sse", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	s := &sseStream{msgs: make(chan map[string]any, 16)}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(data, "sessionId=") {
			s.endpoint = data
			break
		}
	}
	if s.endpoint == "" {
		t.Fatalf("GET /sse: %d, no endpoint event", resp.StatusCode)
	}
	go func() {
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if json.Unmarshal([]byte(data), &m) == nil {
					s.msgs <- m
				}
			}
		}
	}()
	return s
}

func (s *sseStream) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case m := <-s.msgs:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no message on the SSE stream within 5 s")
		return nil
	}
}

// recvWithin is p.recv that fails after 5 s instead of waiting for an answer that may
// never come.
func recvWithin(t *testing.T, p *pipeServer) map[string]any {
	t.Helper()
	ch := make(chan []byte, 1)
	go func() {
		if p.out.Scan() {
			ch <- p.out.Bytes()
		}
	}()
	select {
	case b := <-ch:
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("stdout line is not JSON: %q", b)
		}
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no answer on stdout within 5 s")
		return nil
	}
}

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

func runs(d tools.Deps) int64 { return d.Runner.Sandbox.(*runnertest.Sandbox).Runs.Load() }

func notInitialized(m map[string]any) bool {
	e, _ := m["error"].(map[string]any)
	return e != nil && e["code"] == float64(-32600) && strings.Contains(fmt.Sprint(e["message"]), "not initialized")
}

// TestRequestsBeforeInitializeRefused: on every transport with a handshake, a request
// other than ping before initialize is refused and runs nothing: stdio and SSE ran it
// (a tools/call before initialize ran its code), while Streamable HTTP asked for the
// session id only initialize issues. A 2026-07-28 request, which has no handshake, runs.
func TestRequestsBeforeInitializeRefused(t *testing.T) {
	t.Run("stdio", func(t *testing.T) {
		d := fakeDeps(runnertest.Echo, 1)
		p := startStdioRaw(t, d, StdioOptions{})
		for _, line := range []string{callLine(1, "print(1)", ""), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`} {
			p.send(t, line)
			if m := recvWithin(t, p); !notInitialized(m) {
				t.Errorf("%s before initialize: %v", line, m)
			}
		}
		p.send(t, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
		if m := recvWithin(t, p); m["id"] != float64(3) || m["result"] == nil {
			t.Errorf("ping before initialize: %v", m)
		}
		if n := runs(d); n != 0 {
			t.Fatalf("%d runs before initialize", n)
		}
		p.send(t, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"x"},`+modernMeta+`}}`)
		if m := recvWithin(t, p); m["result"] == nil || runs(d) != 1 {
			t.Errorf("a 2026-07-28 call: %v (%d runs)", m, runs(d))
		}
	})
	t.Run("stdio pipelined", func(t *testing.T) {
		// A client that does not wait for initialize's answer finds the session initialized.
		d := fakeDeps(runnertest.Echo, 1)
		p := startStdioRaw(t, d, StdioOptions{})
		p.send(t, strings.Replace(initBody, `"id":1`, `"id":"init"`, 1)+"\n"+callLine(1, "print(1)", ""))
		for range 2 {
			if m := recvWithin(t, p); m["error"] != nil {
				t.Errorf("pipelined after initialize: %v", m)
			}
		}
	})
	t.Run("sse", func(t *testing.T) {
		d := fakeDeps(runnertest.Echo, 1)
		ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20, SSE: true})
		s := openSSE(t, ts.URL)
		if code := post(t, s.endpoint, call("print(1)"), nil); code != http.StatusAccepted {
			t.Fatalf("post: %d", code)
		}
		if m := s.next(t); !notInitialized(m) {
			t.Errorf("tools/call before initialize: %v", m)
		}
		if n := runs(d); n != 0 {
			t.Fatalf("%d runs before initialize", n)
		}
		post(t, s.endpoint, initBody, nil)
		if m := s.next(t); m["result"] == nil {
			t.Fatalf("initialize: %v", m)
		}
		post(t, s.endpoint, call("print(1)"), nil)
		if m := s.next(t); m["result"] == nil || runs(d) != 1 {
			t.Errorf("tools/call after initialize: %v (%d runs)", m, runs(d))
		}
	})
	t.Run("streamable http", func(t *testing.T) {
		d := fakeDeps(runnertest.Echo, 1)
		ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20})
		if code, m := postJSON(t, ts.URL+"/mcp", call("print(1)"), nil); code != http.StatusBadRequest || m["error"] == nil {
			t.Errorf("tools/call without a session: %d %v", code, m)
		}
		if n := runs(d); n != 0 {
			t.Fatalf("%d runs before initialize", n)
		}
	})
}

// badEnvelopes are messages refused before anything reads them, each with a null id.
var badEnvelopes = map[string]string{
	"batch":   `[` + strings.Replace(callBody, "CODE", "print(1)", 1) + `]`,
	"id null": strings.Replace(call("print(1)"), `"id":2`, `"id":null`, 1),
	"id true": strings.Replace(call("print(1)"), `"id":2`, `"id":true`, 1),
	"id {}":   strings.Replace(call("print(1)"), `"id":2`, `"id":{"a":2}`, 1),
}

func invalidRequest(m map[string]any) bool {
	e, _ := m["error"].(map[string]any)
	_, hasID := m["id"]
	return e != nil && e["code"] == float64(-32600) && hasID && m["id"] == nil
}

// TestBadEnvelopeRefusedOnEveryTransport: a batch, and a tools/call whose id is null,
// true or an object, get an Invalid Request error with a null id at once on each
// transport and run nothing. mcp-go took a null id for a notification: no answer on
// stdio, 202 on HTTP, and the client waited for its own timeout; it echoed true and
// objects as ids, and answered a batch as a parse error.
func TestBadEnvelopeRefusedOnEveryTransport(t *testing.T) {
	d := fakeDeps(runnertest.Block, 2)
	p := startStdio(t, d, StdioOptions{})
	// A call in flight: the refusals come while it runs.
	p.send(t, callLine("busy", "x", ""))
	for deadline := time.Now().Add(5 * time.Second); runs(d) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the call did not start")
		}
	}
	stateless := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20, Stateless: true})
	sse := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20, SSE: true})
	s := openSSE(t, sse.URL)
	post(t, s.endpoint, initBody, nil)
	s.next(t)
	for name, msg := range badEnvelopes {
		p.send(t, msg)
		if m := recvWithin(t, p); !invalidRequest(m) {
			t.Errorf("stdio, %s: %v", name, m)
		}
		if code, m := postJSON(t, stateless.URL+"/mcp", msg, nil); code != http.StatusBadRequest || !invalidRequest(m) {
			t.Errorf("Streamable HTTP, %s: %d %v", name, code, m)
		}
		if code, m := postJSON(t, s.endpoint, msg, nil); code != http.StatusBadRequest || !invalidRequest(m) {
			t.Errorf("SSE, %s: %d %v", name, code, m)
		}
	}
	if n := runs(d); n != 1 {
		t.Errorf("%d runs, want only the one in flight", n)
	}
}

// TestStdioDuplicateIDInFlightRefused: a request reusing the id of one in flight is
// refused. Taken, it ran beside the first, and the two shared mcp-go's cancellation
// entry: the first to end removed it, so the other could no longer be cancelled.
func TestStdioDuplicateIDInFlightRefused(t *testing.T) {
	d := fakeDeps(runnertest.Block, 2)
	p := startStdio(t, d, StdioOptions{})
	p.send(t, callLine(5, "x", ""))
	for deadline := time.Now().Add(5 * time.Second); runs(d) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the call did not start")
		}
	}
	p.send(t, callLine(5, "y", ""))
	m := recvWithin(t, p)
	if e, _ := m["error"].(map[string]any); m["id"] != float64(5) || e == nil || !strings.Contains(fmt.Sprint(e["message"]), "already in use") {
		t.Errorf("a second request 5: %v", m)
	}
	time.Sleep(50 * time.Millisecond)
	if n := runs(d); n != 1 {
		t.Fatalf("%d runs for two requests 5", n)
	}
	// The first is still the one a cancellation ends: its answer is not sent, and the
	// next request is answered.
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`)
	p.send(t, `{"jsonrpc":"2.0","id":6,"method":"ping"}`)
	if m := recvWithin(t, p); m["id"] != float64(6) {
		t.Errorf("after the cancellation: %v", m)
	}
}

// TestLongProgressTokenRefused: a call whose progress token is over maxProgressToken
// bytes is refused (-32602, its id kept) on every transport and runs nothing. Taken,
// each of its progress notifications, one a second, carried the token back: an 8 MB
// token on a 5 s call was 40 MB of stdout.
func TestLongProgressTokenRefused(t *testing.T) {
	d := fakeDeps(runnertest.Echo, 1)
	p := startStdio(t, d, StdioOptions{})
	stateless := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20, Stateless: true})
	sse := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20, SSE: true})
	s := openSSE(t, sse.URL)
	post(t, s.endpoint, initBody, nil)
	s.next(t)
	long := callLine(9, "x", strings.Repeat("T", maxProgressToken))
	refused := func(m map[string]any) bool {
		e, _ := m["error"].(map[string]any)
		return m["id"] == float64(9) && e != nil && e["code"] == float64(-32602) && strings.Contains(fmt.Sprint(e["message"]), "progressToken")
	}
	p.send(t, long)
	if m := recvWithin(t, p); !refused(m) {
		t.Errorf("stdio: %v", m)
	}
	if code, m := postJSON(t, stateless.URL+"/mcp", long, nil); code != http.StatusBadRequest || !refused(m) {
		t.Errorf("Streamable HTTP: %d %v", code, m)
	}
	if code, m := postJSON(t, s.endpoint, long, nil); code != http.StatusBadRequest || !refused(m) {
		t.Errorf("SSE: %d %v", code, m)
	}
	if n := runs(d); n != 0 {
		t.Fatalf("%d runs", n)
	}
	// The longest token allowed runs (the JSON string's quotes count).
	p.send(t, callLine(10, "x", strings.Repeat("T", maxProgressToken-2)))
	for {
		if m := recvWithin(t, p); m["id"] == float64(10) {
			if m["result"] == nil {
				t.Errorf("a token of %d bytes: %v", maxProgressToken, m)
			}
			break
		}
	}
}
