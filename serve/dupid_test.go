package serve

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/runner/runnertest"
	"github.com/airlock-mcp/airlock/sandbox"
)

// cancelLog is a sandbox whose runs block until cancelled, and which tells which runs
// (by their code) were cancelled.
type cancelLog struct {
	mu    sync.Mutex
	ended map[string]bool
}

func (c *cancelLog) run(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
	<-ctx.Done()
	c.mu.Lock()
	c.ended[string(s.Code)] = true
	c.mu.Unlock()
	return runnertest.Block(ctx, s)
}

func (c *cancelLog) was(code string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ended[code]
}

// waitEnded waits a moment for code's run to be cancelled, and reports whether it was.
func (c *cancelLog) waitEnded(code string) bool {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if c.was(code) {
			return true
		}
	}
	return false
}

func waitRunning(t *testing.T, n int64, running func() int64) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); running() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d runs started, want %d", running(), n)
		}
	}
}

// sessionCall is a legacy-era tools/call with id ID running CODE.
func sessionCall(id, code string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"` + code + `"}}}`
}

func cancelOf(id string) string {
	return `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `}}`
}

// TestSessionDuplicateIDInFlightRefused: on a stateful Streamable HTTP session a second
// request with the id of one in flight (written as 7 or 7.0, which mcp-go answers alike)
// is refused and runs nothing. Taken, the two shared mcp-go's cancellation slot: the
// second replaced the first's, so a cancellation of 7 ended the second call and the first
// could no longer be cancelled at all.
func TestSessionDuplicateIDInFlightRefused(t *testing.T) {
	log := &cancelLog{ended: map[string]bool{}}
	d := fakeDeps(log.run, 4)
	ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20})
	url := ts.URL + "/mcp"
	sid := map[string]string{"Mcp-Session-Id": initSession(t, url, nil)}
	running := func() int64 { return int64(d.Runner.Limiter.Running()) }

	first := make(chan reply, 1)
	go func() { first <- do(t, http.MethodPost, url, sessionCall("7", "a"), sid) }()
	waitRunning(t, 1, running)
	for _, again := range []string{"7", "7.0", "7e0"} {
		second := make(chan reply, 1)
		go func() { second <- do(t, http.MethodPost, url, sessionCall(again, "b"+again), sid) }()
		select {
		case r := <-second:
			if r.code != http.StatusConflict || !strings.Contains(r.body, `"id":`+again) || !strings.Contains(r.body, "already in use") {
				t.Errorf("a second request %s: %d %s", again, r.code, r.body)
			}
		case <-time.After(time.Second):
			t.Errorf("a second request %s while 7 is in flight was taken (it runs)", again)
		}
	}
	if n := running(); n != 1 {
		t.Errorf("%d runs for requests 7, 7.0 and 7e0 at once", n)
	}
	// The first is still the one a cancellation of 7 ends.
	if r := do(t, http.MethodPost, url, cancelOf("7.0"), sid); r.code != http.StatusAccepted {
		t.Errorf("cancellation: %d %s", r.code, r.body)
	}
	if !log.waitEnded("a") {
		t.Error("the cancellation of 7 did not end request 7")
	}
	<-first
	// Once answered, the id is free again.
	again := make(chan reply, 1)
	go func() { again <- do(t, http.MethodPost, url, sessionCall("7", "c"), sid) }()
	waitRunning(t, 1, running)
	do(t, http.MethodPost, url, cancelOf("7"), sid)
	if !log.waitEnded("c") {
		t.Error("request 7 after the first was answered was not cancelled")
	}
	<-again
	// Any cancellations still needed to let the refused calls that were taken end.
	for _, c := range []string{"b7", "b7.0", "b7e0"} {
		if log.was(c) {
			t.Errorf("call %s ran and was cancelled", c)
		}
	}
}

// TestCancelNamesExactlyOneID: a notifications/cancelled ends the request it names and
// no other, on every transport: 7 and 7.0 name one request, "7" another (JSON-RPC
// compares ids as values, and a string is not a number). mcp-go keys its cancellations
// by fmt's %v of the id, so "7" and 7 were one slot: the later call took it, and a
// cancellation of 7 ended the call "7". Where requests have no session (2026-07-28, a
// stateless server) the same id may be in flight in two requests of one client: each is
// its own POST, and one client's ids are not another's to refuse.
func TestCancelNamesExactlyOneID(t *testing.T) {
	modern := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "run_code"}
	modernCallOf := func(id, code string) string {
		return strings.Replace(strings.Replace(modernCall, `"id":2`, `"id":`+id, 1), "CODE", code, 1)
	}
	for _, tt := range []struct {
		name   string
		opt    HTTPOptions
		hdr    map[string]string
		callOf func(id, code string) string
	}{
		{"stateful session", HTTPOptions{}, nil, sessionCall},
		{"stateless", HTTPOptions{Stateless: true}, nil, sessionCall},
		{"2026-07-28 on a stateful", HTTPOptions{}, modern, modernCallOf},
	} {
		t.Run(tt.name, func(t *testing.T) {
			log := &cancelLog{ended: map[string]bool{}}
			d := fakeDeps(log.run, 4)
			tt.opt.MaxBodyBytes = 1 << 20
			ts := httpServer(t, d, tt.opt)
			url := ts.URL + "/mcp"
			hdr := map[string]string{}
			for k, v := range tt.hdr {
				hdr[k] = v
			}
			if !tt.opt.Stateless && tt.hdr == nil {
				hdr["Mcp-Session-Id"] = initSession(t, url, nil)
			}
			note := map[string]string{}
			for _, k := range []string{"Mcp-Session-Id", "MCP-Protocol-Version"} {
				if v := hdr[k]; v != "" {
					note[k] = v
				}
			}
			running := func() int64 { return int64(d.Runner.Limiter.Running()) }
			var wg sync.WaitGroup
			start := func(id, code string, n int64) {
				wg.Add(1)
				go func() { defer wg.Done(); do(t, http.MethodPost, url, tt.callOf(id, code), hdr) }()
				waitRunning(t, n, running)
			}
			start("7", "num", 1)
			start(`"7"`, "str", 2)
			do(t, http.MethodPost, url, cancelOf("7.0"), note)
			if !log.waitEnded("num") || log.was("str") {
				t.Errorf("cancelled 7.0: request 7 ended %v, request \"7\" ended %v; want true, false", log.was("num"), log.was("str"))
			}
			do(t, http.MethodPost, url, cancelOf(`"7"`), note)
			if !log.waitEnded("str") {
				t.Error(`cancelled "7": request "7" did not end`)
			}
			wg.Wait()
			if tt.hdr == nil && !tt.opt.Stateless {
				return
			}
			// Without a session one id may be in two requests at once; a cancellation of it
			// ends both (the client cannot say which it meant).
			start("8", "x", 1)
			start("8", "y", 2)
			do(t, http.MethodPost, url, cancelOf("8"), note)
			if !log.waitEnded("x") || !log.waitEnded("y") {
				t.Errorf("cancelled 8 with two requests 8: %v %v", log.was("x"), log.was("y"))
			}
			wg.Wait()
		})
	}
}

// TestStdioCancelNamesExactlyOneID: on stdio too, 7 and 7.0 are one request (the second
// refused while the first runs) and "7" another, and a cancellation ends exactly the one
// it names: through mcp-go, "7" and 7 shared one slot and cancelling 7 ended "7".
func TestStdioCancelNamesExactlyOneID(t *testing.T) {
	log := &cancelLog{ended: map[string]bool{}}
	d := fakeDeps(log.run, 4)
	p := startStdio(t, d, StdioOptions{})
	running := func() int64 { return int64(d.Runner.Limiter.Running()) }
	p.send(t, sessionCall("7", "num"))
	waitRunning(t, 1, running)
	p.send(t, sessionCall("7.0", "dup"))
	m := recvWithin(t, p)
	if e, _ := m["error"].(map[string]any); m["id"] != float64(7) || e == nil || !strings.Contains(fmt.Sprint(e["message"]), "already in use") {
		t.Errorf("a request 7.0 while 7 runs: %v", m)
	}
	p.send(t, sessionCall(`"7"`, "str"))
	waitRunning(t, 2, running)
	p.send(t, cancelOf("7.0"))
	if !log.waitEnded("num") || log.was("str") {
		t.Errorf("cancelled 7.0: request 7 ended %v, request \"7\" ended %v; want true, false", log.was("num"), log.was("str"))
	}
	p.send(t, cancelOf(`"7"`))
	if !log.waitEnded("str") {
		t.Error(`cancelled "7": request "7" did not end`)
	}
	// Neither cancelled request is answered; the next one is.
	p.send(t, `{"jsonrpc":"2.0","id":9,"method":"ping"}`)
	if m := recvWithin(t, p); m["id"] != float64(9) {
		t.Errorf("after the cancellations: %v", m)
	}
	if log.was("dup") {
		t.Error("the refused request 7.0 ran")
	}
}

// TestSSECancelNamesExactlyOneID: on the legacy SSE transport, where 7 and "7" may be in
// flight on one stream at once (sseAnswers tells their answers apart), a cancellation
// of 7 ends the call 7 and not "7": through mcp-go both had one slot, the later's.
func TestSSECancelNamesExactlyOneID(t *testing.T) {
	log := &cancelLog{ended: map[string]bool{}}
	d := fakeDeps(log.run, 4)
	ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20, SSE: true})
	s := openSSE(t, ts.URL)
	post(t, s.endpoint, initBody, nil)
	s.next(t)
	running := func() int64 { return int64(d.Runner.Limiter.Running()) }
	for _, c := range []struct{ id, code string }{{"7", "num"}, {`"7"`, "str"}} {
		if r := do(t, http.MethodPost, s.endpoint, sessionCall(c.id, c.code), nil); r.code != http.StatusAccepted {
			t.Fatalf("post %s: %d %s", c.id, r.code, r.body)
		}
	}
	waitRunning(t, 2, running)
	if r := do(t, http.MethodPost, s.endpoint, cancelOf("7.0"), nil); r.code != http.StatusAccepted {
		t.Errorf("cancellation: %d %s", r.code, r.body)
	}
	if !log.waitEnded("num") || log.was("str") {
		t.Errorf("cancelled 7.0: request 7 ended %v, request \"7\" ended %v; want true, false", log.was("num"), log.was("str"))
	}
	do(t, http.MethodPost, s.endpoint, cancelOf(`"7"`), nil)
	if !log.waitEnded("str") {
		t.Error(`cancelled "7": request "7" did not end`)
	}
}
