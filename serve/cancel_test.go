package serve

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/runner/runnertest"
	"github.com/airlock-mcp/airlock/sandbox"
)

const modernCall = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"CODE"},` +
	`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`

// TestCancelOnlyOwnRequests: where a request has no MCP session (a stateless server, a
// 2026-07-28 request), mcp-go keys its calls in flight by the request id alone, and ids
// are small counters every client repeats: bob's notifications/cancelled for id 2 ended
// alice's call 2. A client's cancellation reaches its own calls only, and still does.
func TestCancelOnlyOwnRequests(t *testing.T) {
	modern := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "run_code"}
	for name, tt := range map[string]struct {
		opt  HTTPOptions
		body string
		hdr  map[string]string
	}{
		"stateless":                 {HTTPOptions{Stateless: true}, callBody, nil},
		"2026-07-28 on a stateful":  {HTTPOptions{}, modernCall, modern},
		"2026-07-28 on a stateless": {HTTPOptions{Stateless: true}, modernCall, modern},
	} {
		t.Run(name, func(t *testing.T) {
			// "wait" runs until released or cancelled.
			release := make(chan struct{})
			var cancelled atomic.Int32
			d := fakeDeps(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
				select {
				case <-release:
					return runnertest.Echo(ctx, s)
				case <-ctx.Done():
					cancelled.Add(1)
					return runnertest.Block(ctx, s)
				}
			}, 2)
			tt.opt.Clients, tt.opt.MaxBodyBytes = aliceAndBob(t), 1<<20
			ts := httpServer(t, d, tt.opt)
			url := ts.URL + "/mcp"
			as := func(token string, hdr map[string]string) map[string]string {
				m := map[string]string{"Authorization": "Bearer " + token}
				for k, v := range hdr {
					m[k] = v
				}
				return m
			}
			alice := as("aaaaaaaaaaaaaaaaaaaa", tt.hdr)
			// The Go SDK sends a notification with the version header and no other.
			version := map[string]string{"MCP-Protocol-Version": tt.hdr["MCP-Protocol-Version"]}
			cancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"r"}}`
			start := func() chan reply {
				done := make(chan reply, 1)
				go func() { done <- do(t, http.MethodPost, url, strings.Replace(tt.body, "CODE", "wait", 1), alice) }()
				for deadline := time.Now().Add(3 * time.Second); d.Runner.Limiter.Running() == 0; {
					if time.Now().After(deadline) {
						t.Fatal("alice's call never started")
					}
					time.Sleep(time.Millisecond)
				}
				return done
			}
			finished := func(done chan reply) reply {
				select {
				case r := <-done:
					return r
				case <-time.After(5 * time.Second):
					t.Fatal("alice's call did not finish")
					return reply{}
				}
			}

			done := start()
			bob := as("bbbbbbbbbbbbbbbbbbbb", version)
			if r := do(t, http.MethodPost, url, cancel, bob); r.code != http.StatusAccepted {
				t.Errorf("bob's cancellation: %d %s, want 202", r.code, r.body)
			}
			// mcp-go reads a notification's params whatever their _meta holds; a
			// decoder that stops at it sees no method after it.
			odd := `{"jsonrpc":"2.0","params":{"_meta":5,"requestId":2},"method":"notifications/cancelled"}`
			if r := do(t, http.MethodPost, url, odd, bob); r.code != http.StatusBadRequest {
				t.Errorf("bob's cancellation with a _meta of the wrong type: %d %s, want 400", r.code, r.body)
			}
			close(release)
			if r := finished(done); r.code != 200 || !strings.Contains(r.body, `"status":"ok"`) || cancelled.Load() != 0 {
				t.Errorf("alice's call 2 after bob cancelled his 2: %d %s", r.code, r.body)
			}

			release = make(chan struct{})
			done = start()
			if r := do(t, http.MethodPost, url, cancel, as("aaaaaaaaaaaaaaaaaaaa", version)); r.code != http.StatusAccepted {
				t.Errorf("alice's cancellation: %d %s, want 202", r.code, r.body)
			}
			// Its run ends (the answer, if any, is not waited for: the client gave up).
			if finished(done); cancelled.Load() != 1 {
				t.Error("alice's cancellation of her call 2 did not end its run")
			}
		})
	}
}
