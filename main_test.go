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

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
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

// needSandbox skips loudly where the kernel cannot sandbox, and fails instead when
// AIRLOCK_REQUIRE_SANDBOX=1.
func needSandbox(t *testing.T) string {
	t.Helper()
	bin := binary(t)
	if !sandboxOK {
		if os.Getenv("AIRLOCK_REQUIRE_SANDBOX") == "1" {
			t.Fatalf("sandbox unavailable and AIRLOCK_REQUIRE_SANDBOX=1: %s", sandboxWhy)
		}
		t.Skipf("SKIPPING: no usable sandbox on this host: %s", sandboxWhy)
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

func exercise(t *testing.T, c *client.Client, wantVersion string) {
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
		{"modern", mcp.LATEST_PROTOCOL_VERSION, nil},
		{"legacy", "2025-06-18", []client.ClientOption{client.WithProtocolVersion("2025-06-18")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			tr := transport.NewStdioWithOptions(bin, os.Environ(), []string{"serve"}, transport.WithCommandStderrWriter(&stderr))
			c := client.NewClient(tr, tc.opts...)
			defer c.Close()
			exercise(t, c, tc.version)
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
	url := ""
	sc := bufio.NewScanner(stderr)
	re := regexp.MustCompile(`endpoint=(http://\S+/mcp)`)
	for url == "" && sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	if url == "" {
		t.Fatal("no endpoint logged")
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
			exercise(t, c, tc.version)
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
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"print('\udcff', 'ok')","stdin":"\u0000\u00ff"}}}`,
	}
	for _, l := range lines {
		if _, err := io.WriteString(stdin, l+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	want := map[float64]bool{1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true}
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
		{"unknown command", nil, []string{"frobnicate"}, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
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
