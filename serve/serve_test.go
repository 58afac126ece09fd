package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/config"
	"github.com/airlock-mcp/airlock/probe/probetest"
	"github.com/airlock-mcp/airlock/runner"
	"github.com/airlock-mcp/airlock/runner/runnertest"
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/tools"
)

var quiet = slog.New(slog.DiscardHandler)

func fakeDeps(fn func(context.Context, sandbox.Spec) (sandbox.Result, error), parallel int) tools.Deps {
	sb := &runnertest.Sandbox{Fn: fn, Report: runnertest.Report()}
	r := &runner.Runner{Sandbox: sb, Languages: runnertest.Python(), Bounds: runnertest.Bounds(),
		Network: sandbox.NetworkNone, MaxCodeBytes: 1 << 20, MaxStdinBytes: 1 << 20,
		Limiter: runner.NewLimiter(parallel, 256, 5*time.Second), Log: quiet}
	return tools.Deps{Runner: r, Prober: probetest.Layers{Sandbox: sb}, Config: config.Default(), Version: "test"}
}

// pipeServer runs Stdio over pipes and returns a line writer, a line reader and a
// channel that yields Stdio's return value.
type pipeServer struct {
	in   *io.PipeWriter
	out  *bufio.Scanner
	done chan error
}

func startStdio(t testing.TB, d tools.Deps, opt StdioOptions) *pipeServer {
	t.Helper()
	p := startStdioRaw(t, d, opt)
	p.send(t, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if m := p.recv(t); m["id"] != "init" {
		t.Fatalf("initialize: %v", m)
	}
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return p
}

// startStdioRaw is startStdio without the handshake.
func startStdioRaw(t testing.TB, d tools.Deps, opt StdioOptions) *pipeServer {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	opt.Log = quiet
	p := &pipeServer{in: inW, out: bufio.NewScanner(outR), done: make(chan error, 1)}
	p.out.Buffer(nil, 64<<20)
	go func() {
		p.done <- Stdio(context.Background(), New(d), inR, outW, opt)
		outW.Close()
	}()
	t.Cleanup(func() { inW.Close() })
	return p
}

func (p *pipeServer) send(t testing.TB, line string) {
	t.Helper()
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

func (p *pipeServer) recv(t testing.TB) map[string]any {
	t.Helper()
	if !p.out.Scan() {
		t.Fatalf("stdout ended: %v", p.out.Err())
	}
	var m map[string]any
	if err := json.Unmarshal(p.out.Bytes(), &m); err != nil || m["jsonrpc"] != "2.0" {
		t.Fatalf("stdout line is not JSON-RPC: %q", p.out.Bytes())
	}
	return m
}

func callLine(id any, code string, token string) string {
	params := map[string]any{"name": "run_code", "arguments": map[string]any{"code": code}}
	if token != "" {
		params["_meta"] = map[string]any{"progressToken": token}
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
	return string(b)
}

// A progress notification sent right before the result must reach the client before it.
func TestStdioNoLateProgress(t *testing.T) {
	const n = 200
	d := fakeDeps(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
		if s.Progress != nil {
			s.Progress(sandbox.Progress{Elapsed: time.Millisecond, StdoutBytes: 1})
		}
		return runnertest.Echo(ctx, s)
	}, 8)
	p := startStdio(t, d, StdioOptions{})
	go func() {
		for i := range n {
			p.send(t, callLine(i, "x", fmt.Sprintf("tok-%d", i)))
		}
	}()
	answered := map[string]bool{}
	progress, late := 0, 0
	for len(answered) < n {
		m := p.recv(t)
		if m["method"] == "notifications/progress" {
			progress++
			tok := m["params"].(map[string]any)["progressToken"].(string)
			if answered[strings.TrimPrefix(tok, "tok-")] {
				late++
			}
			continue
		}
		answered[fmt.Sprint(m["id"])] = true
	}
	if progress != n {
		t.Errorf("got %d progress notifications, want %d (one per call)", progress, n)
	}
	if late != 0 {
		t.Errorf("%d of %d progress notifications arrived after their result", late, n)
	}
}

// Every snapshot the sandbox takes is one notification, however close together they
// come, numbered 1, 2, 3, ... and all of them before the result. The handler used to
// drop any that came less than 1 s after the last one sent: with the sandbox's 1 s
// ticker and its jitter, about half.
func TestStdioEveryProgressTickDelivered(t *testing.T) {
	const ticks = 5
	d := fakeDeps(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
		for i := range ticks {
			s.Progress(sandbox.Progress{Elapsed: time.Duration(i+1) * 999 * time.Millisecond})
		}
		return runnertest.Echo(ctx, s)
	}, 1)
	p := startStdio(t, d, StdioOptions{})
	p.send(t, callLine(1, "x", "tok"))
	var got []float64
	for {
		m := p.recv(t)
		if m["method"] == "notifications/progress" {
			got = append(got, m["params"].(map[string]any)["progress"].(float64))
			continue
		}
		if m["id"] != float64(1) {
			t.Fatalf("unexpected message %v", m)
		}
		break
	}
	if len(got) != ticks {
		t.Fatalf("%d progress notifications before the result, want %d: %v", len(got), ticks, got)
	}
	for i, v := range got {
		if v != float64(i+1) {
			t.Fatalf("progress values %v, want 1..%d", got, ticks)
		}
	}
}

func TestStdioHugeLineAndBadInputKeepServing(t *testing.T) {
	p := startStdio(t, fakeDeps(runnertest.Echo, 2), StdioOptions{MaxLine: 1 << 20})
	big := strings.Repeat("a", 20<<20)
	// The answer carries the request's own id wherever it sits: first (Go SDK, mcp-go) or
	// last (the TypeScript SDK writes it after the params). A notification gets nothing.
	for _, tc := range []struct {
		line string
		id   any
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"` + big + `"}}}`, float64(1)},
		{`{"method":"notifications/message","params":{"data":"` + big + `"},"jsonrpc":"2.0"}`, nil},
		{`{"method":"tools/call","params":{"name":"run_code","arguments":{"code":"` + big + `","id":7}},"jsonrpc":"2.0","id":"last"}`, "last"},
	} {
		go func() { _, _ = io.WriteString(p.in, tc.line+"\n") }()
		if tc.id == nil {
			continue
		}
		m := p.recv(t)
		if e, ok := m["error"].(map[string]any); !ok || m["id"] != tc.id || !strings.Contains(e["message"].(string), "message too large") {
			t.Fatalf("20 MB line with id %v: %.300v", tc.id, m)
		}
	}
	for _, bad := range []string{"this is not json", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nope"}}`, `[1,2`, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"run_code\",\"arguments\":{\"code\":\"\xff\"}}}"} {
		p.send(t, bad)
		if m := p.recv(t); m["error"] == nil {
			t.Errorf("%q: want a JSON-RPC error, got %v", bad, m)
		}
	}
	p.send(t, callLine(3, "still alive", ""))
	if m := p.recv(t); m["id"] != float64(3) || m["result"].(map[string]any)["isError"] == true {
		t.Fatalf("after bad input: %v", m)
	}
}

func TestStdioCancelKillsRunAndSendsNoResponse(t *testing.T) {
	var cancelled atomic.Bool
	d := fakeDeps(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
		if s.Code[0] == 'q' {
			return runnertest.Echo(ctx, s)
		}
		r, err := runnertest.Block(ctx, s)
		cancelled.Store(true)
		return r, err
	}, 2)
	p := startStdio(t, d, StdioOptions{})
	p.send(t, callLine(7, "block", ""))
	for d.Runner.Limiter.Running() == 0 {
		time.Sleep(time.Millisecond)
	}
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}`)
	deadline := time.Now().Add(2 * time.Second)
	for !cancelled.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !cancelled.Load() {
		t.Fatal("notifications/cancelled did not cancel the sandbox run")
	}
	p.send(t, callLine(8, "quick", ""))
	if m := p.recv(t); m["id"] != float64(8) {
		t.Fatalf("a response for the cancelled request was sent: %v", m)
	}
}

func TestStdioEOFCancelsInFlight(t *testing.T) {
	d := fakeDeps(runnertest.Block, 2)
	p := startStdio(t, d, StdioOptions{Grace: 3 * time.Second})
	p.send(t, callLine(1, "block", ""))
	for d.Runner.Limiter.Running() == 0 {
		time.Sleep(time.Millisecond)
	}
	t0 := time.Now()
	p.in.Close()
	m := p.recv(t)
	res, _ := m["result"].(map[string]any)
	if res == nil || res["isError"] != true || !strings.Contains(fmt.Sprint(res["content"]), "cancelled") {
		t.Errorf("in-flight call after EOF: %v", m)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Stdio did not return after stdin EOF")
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("EOF shutdown took %v", d)
	}
}

// More calls than mcp-go's 5 stdio workers must run at once when the limit allows it.
func TestStdioConcurrencyIsNotCappedAtFive(t *testing.T) {
	const n = 8
	var running, peak atomic.Int64
	release := make(chan struct{})
	d := fakeDeps(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
		v := running.Add(1)
		for {
			p := peak.Load()
			if v <= p || peak.CompareAndSwap(p, v) {
				break
			}
		}
		<-release
		running.Add(-1)
		return runnertest.Echo(ctx, s)
	}, n)
	p := startStdio(t, d, StdioOptions{})
	for i := range n {
		p.send(t, callLine(i, "x", ""))
	}
	deadline := time.Now().Add(3 * time.Second)
	for peak.Load() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(release)
	for range n {
		p.recv(t)
	}
	if peak.Load() != n {
		t.Errorf("peak concurrency %d, want %d", peak.Load(), n)
	}
}

// A call that asked for progress gets its notifications while it still runs, with a call
// that did not ask in flight beside it: only such calls keep the ticker going.
func TestStdioProgressWhileRunning(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	done := func() { once.Do(func() { close(release) }) }
	t.Cleanup(done)
	d := fakeDeps(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
		if s.Progress != nil {
			s.Progress(sandbox.Progress{Elapsed: time.Millisecond})
		}
		<-release
		return runnertest.Echo(ctx, s)
	}, 2)
	p := startStdio(t, d, StdioOptions{})
	p.send(t, callLine(1, "quiet", ""))
	p.send(t, callLine(2, "loud", "tok"))
	first := make(chan map[string]any, 1)
	go func() {
		if p.out.Scan() {
			var m map[string]any
			_ = json.Unmarshal(p.out.Bytes(), &m)
			first <- m
		}
	}()
	select {
	case m := <-first:
		if m["method"] != "notifications/progress" {
			t.Fatalf("first message %v, want the progress of the call still running", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no progress notification within 5 s while the call that asked for it ran")
	}
	done()
	for range 2 {
		if m := p.recv(t); m["id"] == nil {
			t.Fatalf("unexpected message %v", m)
		}
	}
}

// Requests read from a real pipe go through a second, non-blocking open of that pipe
// (pollable), and the end of the pipe still ends the server.
func TestStdioOverAPipe(t *testing.T) {
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	if runtime.GOOS == "linux" {
		p := pollable(inR)
		if p == nil {
			t.Fatal("a pipe was not reopened for the poller")
		}
		p.Close()
	}
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Stdio(context.Background(), New(fakeDeps(runnertest.Echo, 2)), inR, outW, StdioOptions{Log: quiet})
		outW.Close()
	}()
	out := bufio.NewScanner(outR)
	send := func(line string) {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() map[string]any {
		if !out.Scan() {
			t.Fatalf("stdout ended: %v", out.Err())
		}
		var m map[string]any
		if err := json.Unmarshal(out.Bytes(), &m); err != nil {
			t.Fatalf("%q: %v", out.Bytes(), err)
		}
		return m
	}
	send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if m := recv(); m["id"] != "init" {
		t.Fatalf("initialize: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(callLine(1, "over a pipe", ""))
	if m := recv(); m["id"] != float64(1) || m["result"] == nil {
		t.Fatalf("call: %v", m)
	}
	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Stdio at the pipe's end: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stdio did not return at the end of its input pipe")
	}
	if f := pollable(mustTemp(t)); f != nil {
		t.Error("a regular file was reopened for the poller")
	}
}

func mustTemp(t *testing.T) *os.File {
	f, err := os.CreateTemp(t.TempDir(), "in")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// serveDraining serves opt (with a ready State of its own) on a loopback listener the
// way the binary does, through ServeHTTP with a 10 s drain: sigterm starts the drain,
// served has ServeHTTP's answer.
func serveDraining(t *testing.T, d tools.Deps, opt HTTPOptions) (st *State, url string, sigterm func(), served chan error) {
	t.Helper()
	st = NewState()
	st.SetReady()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url = "http://" + ln.Addr().String()
	opt.MaxBodyBytes, opt.State, opt.Log = 1<<20, st, quiet
	h := Handler(New(d), url, opt)
	ctx, sigterm := context.WithCancel(context.Background())
	t.Cleanup(sigterm)
	served = make(chan error, 1)
	go func() { served <- ServeHTTP(ctx, ln, h, st, 10*time.Second, quiet) }()
	return st, url, sigterm, served
}
