package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/airlock-mcp/airlock/internal/sandboxtest"
	"github.com/airlock-mcp/airlock/internal/soak"
	"github.com/airlock-mcp/airlock/tools"
)

var (
	buildOnce  sync.Once
	binPath    string
	buildErr   error
	sandboxOK  bool
	sandboxWhy string
)

// binary builds airlock once and checks once whether this host can run sandboxes.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "airlock-e2e")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "airlock")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
			return
		}
		cmd := exec.Command(binPath, "run", "-")
		cmd.Stdin = strings.NewReader("print(1)")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err = cmd.Run()
		var exit *exec.ExitError
		switch {
		case err == nil:
			sandboxOK = true
		case errors.As(err, &exit) && exit.ExitCode() == 3:
			sandboxWhy = stderr.String()
		default:
			buildErr = fmt.Errorf("airlock run: %w\n%s", err, stderr.String())
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// endpointLine is the endpoint a starting HTTP or SSE server logs once it serves.
var endpointLine = regexp.MustCompile(`endpoint=(http://\S+)`)

// loggedEndpoint reads a starting server's stderr up to the endpoint it logs and
// returns it (…/mcp, or …/sse); seen, if not nil, is given each line read. The rest of
// stderr is drained in the background, so the server never blocks on it.
func loggedEndpoint(t *testing.T, stderr io.Reader, seen func(line string)) string {
	t.Helper()
	url := ""
	var logged strings.Builder
	sc := bufio.NewScanner(stderr)
	for url == "" && sc.Scan() {
		logged.WriteString(sc.Text() + "\n")
		if seen != nil {
			seen(sc.Text())
		}
		if m := endpointLine.FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	if url == "" {
		t.Fatalf("no endpoint logged:\n%s", logged.String())
	}
	return url
}

// servedClient starts cmd, a server on Streamable HTTP, and returns an initialized
// client of it and its endpoint; the test's end closes the client, then stops the
// server with SIGTERM and waits for it.
func servedClient(t *testing.T, ctx context.Context, cmd *exec.Cmd) (*client.Client, string) {
	t.Helper()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	url := loggedEndpoint(t, stderr, nil)
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	t.Cleanup(func() { c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "t", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return c, url
}

// needSandbox skips loudly where the kernel cannot sandbox, and fails instead when
// AIRLOCK_REQUIRE_SANDBOX=1.
func needSandbox(t *testing.T) string {
	t.Helper()
	bin := binary(t)
	if !sandboxOK {
		sandboxtest.SkipOrFail(t, "no usable sandbox on this host: %s", sandboxWhy)
	}
	return bin
}

func callReq(name string, args map[string]any, token any) mcp.CallToolRequest {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	if token != nil {
		req.Params.Meta = &mcp.Meta{ProgressToken: token}
	}
	return req
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// exercise drives one client through the tools; get_config must name the transport and
// the address really served (want.Transport, want.HTTP.Addr).
func exercise(t *testing.T, c *client.Client, wantVersion string, want tools.ConfigView) {
	t.Helper()
	ctx := context.Background()
	var progress atomic.Int64
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" {
			progress.Add(1)
		}
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := c.ProtocolVersion(); got != wantVersion {
		t.Errorf("negotiated %q, want %q", got, wantVersion)
	}
	list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil || len(list.Tools) != 3 {
		t.Fatalf("tools/list: %v %v", list, err)
	}
	r, err := c.CallTool(ctx, callReq("run_code", map[string]any{"code": "print(sum(range(10)))"}, nil))
	if err != nil || r.IsError || !strings.Contains(resultText(r), "45") {
		t.Fatalf("run_code: %v %+v", err, r)
	}
	// A run of ~2.5 s with a progress token gets throttled progress.
	r, err = c.CallTool(ctx, callReq("run_code", map[string]any{"code": "import time\nfor i in range(5):\n    print(i, flush=True)\n    time.sleep(0.5)\n"}, "p1"))
	if err != nil || r.IsError {
		t.Fatalf("run_code with progress: %v %s", err, resultText(r))
	}
	if n := progress.Load(); n < 1 || n > 4 {
		t.Errorf("got %d progress notifications for a 2.5 s run, want 1..4 (throttled to 1/s)", n)
	}
	// Cancelling the request kills the sandbox: the next call runs at once.
	cctx, cancel := context.WithTimeout(ctx, 700*time.Millisecond)
	t0 := time.Now()
	_, err = c.CallTool(cctx, callReq("run_code", map[string]any{"code": "import time\ntime.sleep(60)"}, nil))
	cancel()
	if err == nil || time.Since(t0) > 5*time.Second {
		t.Fatalf("cancelled call: err=%v after %v", err, time.Since(t0))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err = c.CallTool(ctx, callReq("get_config", nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(r.StructuredContent)
		var v tools.ConfigView
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		if v.Transport != want.Transport || v.HTTP.Addr != want.HTTP.Addr || v.HTTP.AuthRequired != want.HTTP.AuthRequired {
			t.Fatalf("get_config says transport %q at %q (auth %t), want %q at %q (auth %t)", v.Transport, v.HTTP.Addr,
				v.HTTP.AuthRequired, want.Transport, want.HTTP.Addr, want.HTTP.AuthRequired)
		}
		if strings.Contains(string(b), `"running":0`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled run still holds its slot: %s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r, err = c.CallTool(ctx, callReq("run_code", map[string]any{"code": "1", "language": "cobol"}, nil))
	if err != nil || !r.IsError || !strings.Contains(resultText(r), "cobol") {
		t.Errorf("unknown language: %v %+v", err, r)
	}
}

func TestE2EStdio(t *testing.T) {
	bin := needSandbox(t)
	for _, tc := range []struct {
		name, version string
		opts          []client.ClientOption
	}{
		// The server answers server/discover only after its startup probes, which take
		// longer than the client's 5 s default on a loaded host; the client then falls
		// back to initialize and the test saw the legacy era.
		{"modern", mcp.LATEST_PROTOCOL_VERSION, []client.ClientOption{client.WithDiscoverTimeout(60 * time.Second)}},
		{"legacy", "2025-06-18", []client.ClientOption{client.WithProtocolVersion("2025-06-18")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			tr := transport.NewStdioWithOptions(bin, os.Environ(), []string{"serve"}, transport.WithCommandStderrWriter(&stderr))
			c := client.NewClient(tr, tc.opts...)
			defer c.Close()
			exercise(t, c, tc.version, tools.ConfigView{Transport: "stdio"})
			if t.Failed() {
				t.Logf("server stderr:\n%s", stderr.String())
			}
		})
	}
}

func TestE2EHTTP(t *testing.T) {
	bin := needSandbox(t)
	cmd := exec.Command(bin, "serve", "--http", "127.0.0.1:0")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	warned := false
	url := loggedEndpoint(t, stderr, func(line string) {
		// A tokenless server is every local user's: it says so.
		warned = warned || strings.Contains(line, "no client token")
	})
	if !warned {
		t.Error("a server without a token did not warn that every local user can run code")
	}
	for _, tc := range []struct {
		name, version string
		opts          []client.ClientOption
	}{
		{"modern", mcp.LATEST_PROTOCOL_VERSION, nil},
		{"legacy", "2025-06-18", []client.ClientOption{client.WithProtocolVersion("2025-06-18")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := transport.NewStreamableHTTP(url)
			if err != nil {
				t.Fatal(err)
			}
			c := client.NewClient(tr, tc.opts...)
			defer c.Close()
			// The listener's address, port chosen: not http.addr's 127.0.0.1:8765.
			want := tools.ConfigView{Transport: "http"}
			want.HTTP.Addr = strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
			exercise(t, c, tc.version, want)
		})
	}
}

// Everything the server writes to stdout must be JSON-RPC, even while sandboxed code
// floods its own stdout and stderr and the client sends garbage.
func TestE2EStdoutIsOnlyJSONRPC(t *testing.T) {
	bin := needSandbox(t)
	cmd := exec.Command(bin, "serve")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`not json at all`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_code","_meta":{"progressToken":"t3"},"arguments":{"code":"import os,sys\nfor i in range(20000):\n    print('line', i, 'x'*100)\n    print('err', i, file=sys.stderr)\nos.write(1, b'{\"jsonrpc\":\"fake\"}\\n\\x1b[2J raw')\n"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"print(1)","extra":true}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"print(1)\u0000"}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"print(1)","timeout_seconds":-5}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"print('\u00ff\u2028', 'ok')","stdin":"\u0000\u00ff"}}}`,
		// Half a surrogate pair would be decoded to U+FFFD and run as such: refused.
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"print('\udcff', 'ok')"}}}`,
	}
	for _, l := range lines {
		if _, err := io.WriteString(stdin, l+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	want := map[float64]bool{1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true, 9: true}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 16<<20)
	results := map[float64]map[string]any{}
	parseErrors, n := 0, 0
	for len(want) > 0 && sc.Scan() {
		n++
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m["jsonrpc"] != "2.0" {
			t.Fatalf("stdout line %d is not JSON-RPC: %.200q", n, sc.Text())
		}
		id, hasID := m["id"].(float64)
		switch {
		case hasID:
			delete(want, id)
			results[id] = m
		case m["id"] == nil && m["error"] != nil:
			parseErrors++
		}
	}
	if len(want) > 0 {
		t.Fatalf("no answer for ids %v (stdout ended: %v)", want, sc.Err())
	}
	if parseErrors != 1 {
		t.Errorf("want one parse error for the non-JSON line, got %d", parseErrors)
	}
	flood := results[3]["result"].(map[string]any)
	sc3, _ := flood["structuredContent"].(map[string]any)
	if sc3["status"] != "ok" || sc3["stdout_truncated"] != true || sc3["stdout_bytes"].(float64) < 200000 {
		t.Errorf("flood result: status=%v truncated=%v bytes=%v", sc3["status"], sc3["stdout_truncated"], sc3["stdout_bytes"])
	}
	if s, _ := sc3["stdout"].(string); strings.Contains(s, "\x1b") {
		t.Error("escape sequence reached the client")
	}
	for _, id := range []float64{4, 5, 6} {
		r, _ := results[id]["result"].(map[string]any)
		if r == nil || r["isError"] != true {
			t.Errorf("id %v: want an isError result, got %v", id, results[id])
		}
	}
	if results[7]["error"] == nil {
		t.Errorf("unknown tool: want a JSON-RPC error, got %v", results[7])
	}
	if r, _ := results[8]["result"].(map[string]any); r == nil || r["isError"] == true {
		t.Errorf("odd unicode and NUL stdin: %v", results[8])
	}
	if e, _ := results[9]["error"].(map[string]any); e == nil || e["code"] != float64(-32700) {
		t.Errorf("half a surrogate pair: want a parse error, got %v", results[9])
	}
}

func TestE2ESigtermCancelsAndExitsZero(t *testing.T) {
	bin := needSandbox(t)
	cmd := exec.Command(bin, "serve")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"import time\ntime.sleep(60)"}}}`+"\n")
	sc := bufio.NewScanner(stdout)
	sc.Scan() // initialize
	time.Sleep(700 * time.Millisecond)
	t0 := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	var last string
	for sc.Scan() {
		last = sc.Text()
	}
	err := cmd.Wait()
	if err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	if d := time.Since(t0); d > 6*time.Second {
		t.Errorf("shutdown took %v", d)
	}
	if !strings.Contains(last, `"id":2`) || !strings.Contains(last, "cancelled") {
		t.Errorf("in-flight call did not get a cancelled result: %.300s", last)
	}
}

func TestE2EStartupErrors(t *testing.T) {
	bin := binary(t)
	// allow_loopback with the server's own port listed: every sandbox could call it.
	loopCfg := filepath.Join(t.TempDir(), "loop.toml")
	if err := os.WriteFile(loopCfg, []byte("network = \"allowlist\"\n[egress]\ndomains = [\"index.test\"]\nports = [18765]\nallow_loopback = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"invalid config", []string{"AIRLOCK_NETWORK=bridge"}, []string{"serve"}, "network: must be"},
		{"bad config file", nil, []string{"serve", "--config", "/nonexistent.toml"}, "read config"},
		{"public bind without token", nil, []string{"serve", "--http", "0.0.0.0:0"}, "without an auth token"},
		{"both transports", nil, []string{"serve", "--http", "127.0.0.1:0", "--sse", "127.0.0.1:0"}, "choose one"},
		{"own port on the allowlist", nil, []string{"serve", "--config", loopCfg, "--http", "127.0.0.1:18765"}, "this server's own HTTP transport"},
		{"unknown command", nil, []string{"frobnicate"}, "unknown command"},
		// A misspelt token variable would serve a loopback server without auth.
		{"misspelt environment variable", []string{"AIRLOCK_AUTH_TOKN=s3cret-s3cret-s3cret"}, []string{"serve", "--http", "127.0.0.1:0"}, "did you mean AIRLOCK_AUTH_TOKEN?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A server that starts instead of refusing is killed, and fails the row.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tc.args...)
			cmd.Env = append(os.Environ(), tc.env...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("err=%v stderr=%q, want exit 2 mentioning %q", err, stderr.String(), tc.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("wrote to stdout: %q", stdout.String())
			}
		})
	}
}

// TestE2EHostNetworkRefusalSaysWhy: serve refuses network = "host" (its startup probes
// reach the host's loopback, as that mode allows), and the refusal names the setting and
// the fix, not "run airlock probe", whose report blames the sandbox.
func TestE2EHostNetworkRefusalSaysWhy(t *testing.T) {
	bin := needSandbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--network", "host", "--audit", "off")
	cmd.Stdin = strings.NewReader("")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("err=%v, want exit 3; stderr %s", err, stderr.String())
	}
	for _, want := range []string{"isolation weakened by configuration", `refusing to serve`, `network = "host" shares this host's network`, `set network = "allowlist"`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q: %s", want, stderr.String())
		}
	}
}

func TestE2ERunCommand(t *testing.T) {
	bin := needSandbox(t)
	for _, tc := range []struct {
		code   string
		exit   int
		status string
	}{
		{"print('hi')", 0, "ok"},
		{"import sys; sys.exit(4)", 1, "error"},
	} {
		cmd := exec.Command(bin, "run", "--timeout", "10", "-")
		cmd.Stdin = strings.NewReader(tc.code)
		out, err := cmd.Output()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		}
		var res map[string]any
		if jerr := json.Unmarshal(out, &res); jerr != nil || code != tc.exit || res["status"] != tc.status {
			t.Errorf("%q: exit %d, out %s", tc.code, code, out)
		}
	}
}

// Node's heap is capped (NODE_OPTIONS) only where RLIMIT_AS bounds memory: under a
// memory cgroup the cgroup bounds it, and the flag would cost every cold start node's
// built-in code cache (~8 ms). The server decides from its own probe, so the run says
// which case it was in ("degraded" when there is no cgroup).
func TestE2ENodeHeapCapOnlyWithoutCgroup(t *testing.T) {
	bin := needSandbox(t)
	if _, err := exec.LookPath("node"); err != nil {
		t.Skipf("SKIPPING: node is not installed: %v", err)
	}
	cases := 0
	for _, extra := range [][]string{nil, {"--cgroups", "off"}} {
		args := append([]string{"run", "--languages", "javascript", "--language", "javascript"}, extra...)
		cmd := exec.Command(bin, append(args, "-")...)
		cmd.Stdin = strings.NewReader(`console.log(process.env.NODE_OPTIONS ?? "unset")`)
		out, err := cmd.Output()
		var res struct {
			Status   string `json:"status"`
			Stdout   string `json:"stdout"`
			Degraded bool   `json:"degraded"`
		}
		if jerr := json.Unmarshal(out, &res); err != nil || jerr != nil || res.Status != "ok" {
			t.Fatalf("%v: %v %v\n%s", extra, err, jerr, out)
		}
		got := strings.TrimSpace(res.Stdout)
		switch {
		case res.Degraded && !strings.HasPrefix(got, "--max-old-space-size="):
			t.Errorf("%v, memory bounded by RLIMIT_AS: NODE_OPTIONS %q, want the heap cap", extra, got)
		case !res.Degraded && got != "unset":
			t.Errorf("%v, memory bounded by a cgroup: NODE_OPTIONS %q, want none", extra, got)
		}
		if !res.Degraded {
			cases++
		}
	}
	if cases == 0 {
		t.Log("no memory cgroup on this host: only the RLIMIT_AS case was checked")
	}
}

// rawStdio is airlock serve driven by raw lines: every stdout line must be a JSON-RPC
// message in valid UTF-8, or the test fails.
type rawStdio struct {
	pid   int
	stdin io.WriteCloser
	msgs  chan map[string]any
	bad   chan string
}

func startRawStdio(t *testing.T, bin string) *rawStdio {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = soak.ServerEnv(dir, "AIRLOCK_POOL_SIZE=0", "AIRLOCK_AUDIT=off")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	p := &rawStdio{pid: cmd.Process.Pid, stdin: stdin, msgs: make(chan map[string]any, 16), bad: make(chan string, 1)}
	go func() {
		defer close(p.msgs)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 32<<20)
		for sc.Scan() {
			var m map[string]any
			if !utf8.Valid(sc.Bytes()) || json.Unmarshal(sc.Bytes(), &m) != nil || m["jsonrpc"] != "2.0" {
				p.bad <- sc.Text()
				return
			}
			p.msgs <- m
		}
	}()
	return p
}

func (p *rawStdio) send(t *testing.T, line []byte) {
	t.Helper()
	if _, err := p.stdin.Write(append(line, '\n')); err != nil {
		t.Fatal(err)
	}
}

// answer returns the next response, skipping notifications.
func (p *rawStdio) answer(t *testing.T) map[string]any {
	t.Helper()
	for {
		select {
		case m, ok := <-p.msgs:
			if !ok {
				t.Fatal("the server closed stdout")
			}
			if _, note := m["method"]; !note {
				return m
			}
		case l := <-p.bad:
			t.Fatalf("stdout line is not JSON-RPC in UTF-8: %.300q", l)
		case <-time.After(60 * time.Second):
			t.Fatal("no answer within 60 s")
		}
	}
}

// Bad input written straight to the real binary's stdin: protocol misuse is a JSON-RPC
// error, a bad argument an isError result naming it, and the server keeps serving.
// TestE2EStdoutIsOnlyJSONRPC covers plain garbage, NUL in code, an extra argument, a
// negative timeout and an unknown tool.
func TestE2EBadInputRawStdio(t *testing.T) {
	p := startRawStdio(t, needSandbox(t))
	p.send(t, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	if m := p.answer(t); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	p.send(t, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	call := func(id int, args string) []byte {
		return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run_code","arguments":%s}}`, id, args))
	}
	alive := func(id int) {
		t.Helper()
		p.send(t, call(id, `{"code":"print('alive', 6*7)"}`))
		m := p.answer(t)
		r, _ := m["result"].(map[string]any)
		if m["id"] != float64(id) || r == nil || r["isError"] == true || !strings.Contains(fmt.Sprint(r["content"]), "alive 42") {
			t.Fatalf("a valid call after bad input: %v", m)
		}
	}
	// 100 MB: six times the 16 MiB message limit, so it is refused unread.
	big := call(2, `{"code":"`+strings.Repeat("a", 100<<20)+`"}`)
	go func() { _, _ = p.stdin.Write(append(big, '\n')) }()
	if m := p.answer(t); m["id"] != float64(2) || !strings.Contains(fmt.Sprint(m["error"]), "message too large") {
		t.Fatalf("100 MB line: %.300v", m)
	}
	alive(3)

	const rpc, tool = "rpc", "tool"
	for i, tc := range []struct {
		name, kind, want string
		line             []byte
	}{
		{"invalid UTF-8 in code", rpc, "not valid UTF-8", call(10, "{\"code\":\"print('\xff\xfe')\"}")},
		{"invalid UTF-8 in stdin", rpc, "not valid UTF-8", call(11, "{\"code\":\"1\",\"stdin\":\"a\xc3\"}")},
		{"raw NUL bytes", rpc, "parse", []byte("\x00\x00{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"tools/list\"}")},
		{"NUL escape in code", tool, "NUL", call(13, `{"code":"import os\u0000"}`)},
		{"NaN token", rpc, "parse", call(14, `{"code":"1","timeout_seconds":NaN}`)},
		{"Infinity token", rpc, "parse", call(15, `{"code":"1","timeout_seconds":Infinity}`)},
		{"NaN as a string", tool, `"timeout_seconds" must be a number`, call(16, `{"code":"1","timeout_seconds":"NaN"}`)},
		{"huge timeout", tool, "not a plausible timeout", call(17, `{"code":"1","timeout_seconds":1e308}`)},
		{"timeout beyond float64", rpc, "1e400", call(18, `{"code":"1","timeout_seconds":1e400}`)},
		{"negative fraction timeout", tool, "must not be negative", call(19, `{"code":"1","timeout_seconds":-0.5}`)},
		{"empty arguments", tool, `missing required argument "code"`, call(20, `{}`)},
		{"no arguments", tool, `missing required argument "code"`, []byte(`{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"run_code"}}`)},
		{"arguments a string", tool, "must be a JSON object", call(22, `"print(1)"`)},
		{"code a number", tool, `"code" must be a string`, call(23, `{"code":12}`)},
		{"stdin a number", tool, `"stdin" must be a string`, call(24, `{"code":"1","stdin":5}`)},
		{"args of numbers", tool, `"args"`, call(25, `{"code":"1","args":[1,2]}`)},
		{"language a number", tool, `"language" must be a string`, call(26, `{"code":"1","language":42}`)},
		{"unknown language", tool, "cobol", call(27, `{"code":"1","language":"cobol"}`)},
		{"unknown and extra arguments", tool, `unknown argument`, call(28, `{"code":"1","steps":2,"language":"python"}`)},
		{"params a string", rpc, "", []byte(`{"jsonrpc":"2.0","id":29,"method":"tools/call","params":"run_code"}`)},
		{"tool name a number", rpc, "", []byte(`{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":42,"arguments":{}}}`)},
		{"method a number", rpc, "parse", []byte(`{"jsonrpc":"2.0","id":31,"method":7}`)},
		{"JSON-RPC 1.0", rpc, "version", []byte(`{"jsonrpc":"1.0","id":32,"method":"tools/list"}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.send(t, tc.line)
			m := p.answer(t)
			switch tc.kind {
			case rpc:
				if m["error"] == nil || !strings.Contains(strings.ToLower(fmt.Sprint(m["error"])), strings.ToLower(tc.want)) {
					t.Errorf("want a JSON-RPC error mentioning %q, got %.300v", tc.want, m)
				}
			case tool:
				r, _ := m["result"].(map[string]any)
				if r == nil || r["isError"] != true || !strings.Contains(fmt.Sprint(r["content"]), tc.want) {
					t.Errorf("want an isError result mentioning %q, got %.300v", tc.want, m)
				}
			}
		})
		if i%6 == 5 {
			alive(100 + i)
		}
	}
	alive(200)
}

// TestE2ERunOutNamesWhatIsNotSaved: with --out, every file the program left in out/ is
// either saved or named on stderr with the reason, and a run that lost any exits 1. The
// sandbox lists a symlink to a host file, a FIFO, a hard link and a file over the size
// cap without returning them; `airlock run --out` used to print only the saved lines
// and exit 0, so a script saw a complete save. A hidden name (.git/config, whose
// core.fsmonitor git runs, .ssh/authorized_keys) is returned but never saved: the
// output directory is often a project's or the user's home.
func TestE2ERunOutNamesWhatIsNotSaved(t *testing.T) {
	bin := needSandbox(t)
	dir := filepath.Join(t.TempDir(), "saved")
	cmd := exec.Command(bin, "run", "--audit", "off", "--timeout", "20", "--out", dir, "-")
	cmd.Stdin = strings.NewReader(`
import os
os.makedirs("out", exist_ok=True)
open("out/ok.txt", "w").write("ok")
open("out/big.bin", "wb").write(b"x" * (5 << 20))
os.symlink("/etc/passwd", "out/passwd")
os.mkfifo("out/fifo")
open("out/a.txt", "w").write("a")
os.link("out/a.txt", "out/b.txt")
os.makedirs("out/.git", exist_ok=True)
open("out/.git/config", "w").write("[core]\n\tfsmonitor = touch /tmp/pwned\n")
os.makedirs("out/sub/.ssh", exist_ok=True)
open("out/sub/.ssh/authorized_keys", "w").write("ssh-ed25519 AAAA attacker")
`)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("exit %v, want 1: files were not saved\n%s", err, stderr.String())
	}
	var res struct {
		Status string `json:"status"`
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil || res.Status != "ok" {
		t.Fatalf("result %s: %v", out, jerr)
	}
	for _, want := range []string{
		"saved " + filepath.Join(dir, "ok.txt") + " (2 bytes)",
		"not saved: out/big.bin: file too large",
		"not saved: out/passwd: symlink",
		"not saved: out/fifo: not a regular file",
		"not saved: out/a.txt: hard link",
		"not saved: out/b.txt: hard link",
		"not saved: out/.git/config: refused: a hidden name",
		"not saved: out/sub/.ssh/authorized_keys: refused: a hidden name",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "ok.txt" {
		t.Errorf("saved %v, want ok.txt alone", entries)
	}
	for _, p := range []string{".git", "sub"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
			t.Errorf("%s created in --out", p)
		}
	}
}

// A server or run started under a low soft open-file limit (ulimit -Sn 8, the hard limit
// high) must still run calls: Go raises its own soft limit, but the zygote it forks before
// the runtime (`airlock run`) or execs (after a global flag, and the server) got the
// original one back, could not take a spawn's descriptors, and every call was refused
// with a user-namespace hint. The program's own limit stays limits.open_files.
func TestE2ELowSoftFileLimit(t *testing.T) {
	bin := needSandbox(t)
	var hard syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &hard); err != nil || hard.Max < 1024 {
		t.Fatalf("RLIMIT_NOFILE hard limit %d (%v): this test needs at least 1024", hard.Max, err)
	}
	code := "import resource; print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
	for _, argv := range [][]string{
		{"run", "--timeout", "10", "-"},                        // the zygote forked before Go starts
		{"--max-parallel", "2", "run", "--timeout", "10", "-"}, // the exec'd zygote
	} {
		cmd := exec.Command("/bin/sh", append([]string{"-c", `ulimit -Sn 8 && exec "$0" "$@"`, bin}, argv...)...)
		cmd.Stdin = strings.NewReader(code)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var res map[string]any
		if jerr := json.Unmarshal(out, &res); err != nil || jerr != nil || res["status"] != "ok" {
			t.Errorf("%v under ulimit -Sn 8: %v, out %s, stderr %s", argv, err, out, stderr.String())
			continue
		}
		if got := strings.TrimSpace(fmt.Sprint(res["stdout"])); got != "256" {
			t.Errorf("%v: the program's soft open-file limit is %s, want limits.open_files' 256", argv, got)
		}
	}
}
