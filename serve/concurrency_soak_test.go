package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/airlock-mcp/airlock/runner"
	"github.com/airlock-mcp/airlock/runner/runnertest"
	"github.com/airlock-mcp/airlock/sandbox"
)

// slowEcho runs for 30 ms, like a quick real program.
func slowEcho(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
	select {
	case <-time.After(30 * time.Millisecond):
	case <-ctx.Done():
	}
	return runnertest.Echo(ctx, s)
}

// outcomeOf sorts an answer: "ok", "busy" or something unexpected.
func outcomeOf(r *mcp.CallToolResult, err error) string {
	switch {
	case err != nil:
		return "error: " + err.Error()
	case !r.IsError:
		return "ok"
	}
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok && strings.HasPrefix(tc.Text, "server busy") {
			return "busy"
		}
	}
	return fmt.Sprintf("unexpected: %+v", r.Content)
}

// The limiter and its queue under 50 concurrent HTTP clients, each with its own
// connection and session: 4 slots, a queue of 8 waiting at most 200 ms. Every call must
// be answered, ok or busy, within the queue timeout plus a run plus slack; none may hang.
func TestConcurrency50HTTPClients(t *testing.T) {
	d := fakeDeps(slowEcho, 4)
	d.Runner.Limiter = runner.NewLimiter(4, 8, 200*time.Millisecond)
	ts := httptest.NewServer(Handler(New(d), "http://127.0.0.1", HTTPOptions{MaxBodyBytes: 1 << 20, Log: quiet}))
	defer ts.Close()
	g0 := runtime.NumGoroutine()
	counts := run50(t, func(ctx context.Context) (*client.Client, error) {
		c, err := client.NewStreamableHttpClient(ts.URL + "/mcp")
		if err != nil {
			return nil, err
		}
		if err := c.Start(ctx); err != nil {
			return nil, err
		}
		_, err = c.Initialize(ctx, mcp.InitializeRequest{})
		return c, err
	}, 50, 5)
	t.Logf("HTTP: %v", counts)
	ts.CloseClientConnections()
	waitGoroutines(t, g0)
}

// The same over one stdio session with 50 requests in flight at once.
func TestConcurrency50StdioRequests(t *testing.T) {
	d := fakeDeps(slowEcho, 4)
	d.Runner.Limiter = runner.NewLimiter(4, 8, 200*time.Millisecond)
	p := startStdio(t, d, StdioOptions{})
	// One shared transport: the stdio server has one client, which sends 50 at once.
	lines := make(chan map[string]any, 1024)
	go func() {
		for p.out.Scan() {
			var m map[string]any
			if err := json.Unmarshal(p.out.Bytes(), &m); err == nil {
				lines <- m
			}
		}
		close(lines)
	}()
	const n = 250
	t0 := time.Now()
	for i := 0; i < n; i++ {
		p.send(t, callLine(i, "print(1)", ""))
	}
	counts := map[string]int{}
	seen := map[float64]bool{}
	deadline := time.After(20 * time.Second)
	for len(seen) < n {
		select {
		case m := <-lines:
			id, _ := m["id"].(float64)
			if seen[id] {
				t.Fatalf("id %v answered twice", id)
			}
			seen[id] = true
			res, _ := m["result"].(map[string]any)
			switch {
			case res == nil:
				counts["protocol error"]++
			case res["isError"] != true:
				counts["ok"]++
			case strings.Contains(fmt.Sprint(res["content"]), "server busy"):
				counts["busy"]++
			default:
				counts[fmt.Sprint(res["content"])]++
			}
		case <-deadline:
			t.Fatalf("only %d of %d calls answered in 20 s: %v", len(seen), n, counts)
		}
	}
	t.Logf("stdio: %d calls in %s: %v", n, time.Since(t0).Round(time.Millisecond), counts)
	if counts["ok"]+counts["busy"] != n || counts["ok"] == 0 || counts["busy"] == 0 {
		t.Fatalf("want only ok and busy answers, and some of each: %v", counts)
	}
}

// run50 starts clients clients, each making calls calls, and checks every answer.
func run50(t *testing.T, dial func(context.Context) (*client.Client, error), clients, calls int) map[string]int {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	counts := map[string]int{}
	var slowest time.Duration
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dial(ctx)
			if err != nil {
				mu.Lock()
				counts["dial: "+err.Error()]++
				mu.Unlock()
				return
			}
			defer c.Close()
			for j := 0; j < calls; j++ {
				req := mcp.CallToolRequest{}
				req.Params.Name = "run_code"
				req.Params.Arguments = map[string]any{"code": "print(1)"}
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				t0 := time.Now()
				r, err := c.CallTool(cctx, req)
				took := time.Since(t0)
				cancel()
				mu.Lock()
				counts[outcomeOf(r, err)]++
				slowest = max(slowest, took)
				mu.Unlock()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("deadlock: calls still unanswered after 60 s: %v", counts)
	}
	// A call waits at most the queue timeout (200 ms) for a slot, then runs 30 ms.
	if slowest > 2*time.Second {
		t.Errorf("slowest answer took %s; the queue timeout is 200 ms", slowest)
	}
	if counts["ok"]+counts["busy"] != clients*calls || counts["ok"] == 0 {
		t.Fatalf("want %d ok or busy answers: %v", clients*calls, counts)
	}
	t.Logf("slowest answer %s", slowest.Round(time.Millisecond))
	return counts
}

func waitGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+5 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > before+5 {
		t.Errorf("goroutines: %d after, %d before", g, before)
	} else {
		t.Logf("goroutines: %d before, %d after", before, g)
	}
}
