package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/airlock-mcp/airlock/config"
	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/probe"
	"github.com/airlock-mcp/airlock/probe/probetest"
	"github.com/airlock-mcp/airlock/runner"
	"github.com/airlock-mcp/airlock/runner/runnertest"
	"github.com/airlock-mcp/airlock/sandbox"
)

var update = flag.Bool("update", false, "rewrite golden files")

func fakeDeps(fn func(context.Context, sandbox.Spec) (sandbox.Result, error)) Deps {
	sb := &runnertest.Sandbox{Fn: fn, Report: runnertest.Report()}
	cfg := config.Default()
	cfg.HTTP.AuthToken = "super-secret-token"
	r := &runner.Runner{Sandbox: sb, Languages: runnertest.Python(), Bounds: runnertest.Bounds(),
		Network: sandbox.NetworkNone, MaxCodeBytes: 1 << 10, MaxStdinBytes: 1 << 10,
		Limiter: runner.NewLimiter(1, 1, 50*time.Millisecond), Log: slog.New(slog.DiscardHandler),
		FileCaps: cfg.FileCaps(), OutDir: cfg.Artifacts.Dir, Artifacts: cfg.ArtifactLimits()}
	return Deps{Runner: r, Prober: probetest.Layers{Sandbox: sb}, Config: cfg, Version: "test"}
}

func startClient(t *testing.T, d Deps) *client.Client {
	t.Helper()
	s := server.NewMCPServer("airlock", "test", server.WithToolCapabilities(false), server.WithRecovery())
	Register(s, d)
	c, err := client.NewInProcessClient(s)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	var v any
	if err := json.Unmarshal(got, &v); err != nil {
		t.Fatalf("%s: not JSON: %v", name, err)
	}
	pretty, _ := json.MarshalIndent(v, "", "  ")
	pretty = append(pretty, '\n')
	path := filepath.Join("testdata", name+".golden.json")
	if *update {
		if err := os.WriteFile(path, pretty, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("missing snapshot %s (run go test ./tools -update): %v", path, err)
	}
	if !bytes.Equal(want, pretty) {
		t.Errorf("%s changed; if intended, run go test ./tools -update\n got: %s", path, pretty)
	}
}

func TestSchemaSnapshots(t *testing.T) {
	for _, st := range All(fakeDeps(runnertest.Echo)) {
		golden(t, st.Tool.Name+".input", st.Tool.RawInputSchema)
		golden(t, st.Tool.Name+".output", st.Tool.RawOutputSchema)
	}
}

func TestToolsList(t *testing.T) {
	c := startClient(t, fakeDeps(runnertest.Echo))
	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res.Tools)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "tools_list", b)
	for _, tool := range res.Tools {
		a := tool.Annotations
		if tool.Title == "" || a.ReadOnlyHint == nil || a.DestructiveHint == nil || a.IdempotentHint == nil || a.OpenWorldHint == nil {
			t.Errorf("%s: title or an annotation is unset: %+v", tool.Name, a)
		}
		if tb, _ := json.Marshal(tool); !bytes.Contains(tb, []byte(`"outputSchema":{`)) {
			t.Errorf("%s: no output schema", tool.Name)
		}
	}
}

func TestOpenWorldFollowsNetwork(t *testing.T) {
	d := fakeDeps(runnertest.Echo)
	if *RunCode(d).Tool.Annotations.OpenWorldHint {
		t.Error("openWorld with network none")
	}
	d.Runner.Network = sandbox.NetworkHost
	if !*RunCode(d).Tool.Annotations.OpenWorldHint {
		t.Error("not openWorld with network host")
	}
}

func call(t *testing.T, c *client.Client, name string, args any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		t.Fatalf("%s: protocol error %v (tool failures must be isError results)", name, err)
	}
	return res
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func structured(t *testing.T, r *mcp.CallToolResult) RunCodeResult {
	t.Helper()
	b, _ := json.Marshal(r.StructuredContent)
	var out RunCodeResult
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("structuredContent: %v", err)
	}
	return out
}

// refusedAs checks a refused call: isError, the text as the only content, and a
// conforming structuredContent with the given status and the same text.
func refusedAs(t *testing.T, r *mcp.CallToolResult, status string) {
	t.Helper()
	conforms(t, r)
	out := structured(t, r)
	if !r.IsError || out.Status != status || out.Detail != text(r) || len(r.Content) != 1 {
		t.Errorf("isError=%t status=%q (want %q) detail=%q text=%q", r.IsError, out.Status, status, out.Detail, text(r))
	}
}

// conforms checks that structuredContent validates against run_code's output schema,
// with the validator mcp-go itself uses.
func conforms(t *testing.T, r *mcp.CallToolResult) {
	t.Helper()
	var schema any
	if err := json.Unmarshal(RunCode(fakeDeps(runnertest.Echo)).Tool.RawOutputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	comp := jsonschema.NewCompiler()
	if err := comp.AddResource("run_code.output.json", schema); err != nil {
		t.Fatal(err)
	}
	sch, err := comp.Compile("run_code.output.json")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r.StructuredContent)
	var v any
	if err := json.Unmarshal(b, &v); err != nil || v == nil {
		t.Fatalf("no structuredContent: %s", b)
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("structuredContent does not validate against the output schema: %v\n%s", err, b)
	}
}

func TestRunCodeOK(t *testing.T) {
	c := startClient(t, fakeDeps(runnertest.Echo))
	r := call(t, c, "run_code", map[string]any{"code": "print(1)\n", "stdin": "data"})
	if r.IsError {
		t.Fatalf("isError: %s", text(r))
	}
	out := structured(t, r)
	if out.Status != "ok" || out.Stdout != "print(1)\ndata" || out.StdoutBytes != 13 || out.Language != "python" ||
		out.LanguageVersion != "3.11.2" || out.ID == "" || out.TimeoutSeconds != 30 || out.WallMs != 12 {
		t.Errorf("result = %+v", out)
	}
	if !strings.HasPrefix(text(r), "status: ok") || !strings.Contains(text(r), "data") {
		t.Errorf("text = %q", text(r))
	}
}

func TestRunCodeStatusMapping(t *testing.T) {
	tests := []struct {
		name   string
		res    sandbox.Result
		want   string
		inText string
	}{
		{"error", sandbox.Result{Status: sandbox.StatusError, ExitCode: 3, Stderr: sandbox.Stream{Head: []byte("Traceback"), Total: 9}}, "error", "exited with code 3"},
		{"timeout", sandbox.Result{Status: sandbox.StatusTimeout, ExitCode: -1, Signal: "SIGKILL"}, "timeout", "timeout_seconds"},
		{"memory", sandbox.Result{Status: sandbox.StatusMemoryLimit}, "memory_limit", "256 MiB"},
		{"sandbox error", sandbox.Result{Status: sandbox.StatusSandboxError, Detail: "mount failed"}, "sandbox_error", "mount failed"},
		{"truncated", sandbox.Result{Status: sandbox.StatusOutputLimit, Stdout: sandbox.Stream{Head: []byte("aaa"), Tail: []byte("zzz"), Total: 1 << 20}}, "output_limit", "truncated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := startClient(t, fakeDeps(func(_ context.Context, s sandbox.Spec) (sandbox.Result, error) {
				r := tt.res
				r.ID = s.ID
				return r, nil
			}))
			r := call(t, c, "run_code", map[string]any{"code": "x"})
			out := structured(t, r)
			if !r.IsError || out.Status != tt.want || !strings.Contains(text(r), tt.inText) {
				t.Errorf("isError=%t status=%s text=%q", r.IsError, out.Status, text(r))
			}
			if tt.want == "output_limit" && (!out.StdoutTruncated || out.StdoutBytes != 1<<20) {
				t.Errorf("truncation not reported: %+v", out)
			}
		})
	}
}

func TestRunCodeBadInput(t *testing.T) {
	c := startClient(t, fakeDeps(runnertest.Echo))
	tests := []struct {
		name string
		args any
		want string
	}{
		{"missing code", map[string]any{"language": "python"}, `missing required argument "code"`},
		{"wrong type", map[string]any{"code": 12}, `argument "code" must be a string, got number`},
		{"extra arg", map[string]any{"code": "1", "steps": 2}, `unknown argument "steps"`},
		{"too large", map[string]any{"code": strings.Repeat("x", 2000)}, "code too large"},
		{"nul", map[string]any{"code": "print(1)\x00"}, "NUL"},
		{"unknown language", map[string]any{"code": "1", "language": "cobol"}, "cobol"},
		{"disabled language", map[string]any{"code": "1", "language": "node"}, "not enabled"},
		{"negative timeout", map[string]any{"code": "1", "timeout_seconds": -1}, "must not be negative"},
		{"huge timeout", map[string]any{"code": "1", "timeout_seconds": 1e300}, "not a plausible timeout"},
		{"args wrong type", map[string]any{"code": "1", "args": "a b"}, `argument "args" must be an array of strings`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, c, "run_code", tt.args)
			if !r.IsError || !strings.Contains(text(r), tt.want) {
				t.Errorf("isError=%t text=%q, want %q", r.IsError, text(r), tt.want)
			}
			refusedAs(t, r, statusInvalidRequest)
		})
	}
	// The server keeps serving after all of that.
	if r := call(t, c, "run_code", map[string]any{"code": "ok"}); r.IsError {
		t.Fatalf("after bad input: %s", text(r))
	}
}

func TestRunCodeTimeoutClamped(t *testing.T) {
	var wall time.Duration
	d := fakeDeps(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
		wall = s.Limits.Wall
		return runnertest.Echo(ctx, s)
	})
	c := startClient(t, d)
	r := call(t, c, "run_code", map[string]any{"code": "1", "timeout_seconds": 3000})
	if r.IsError {
		t.Fatal(text(r))
	}
	res := structured(t, r)
	if got := res.TimeoutSeconds; got != d.Runner.Bounds.Max.Wall.Seconds() || wall != d.Runner.Bounds.Max.Wall {
		t.Errorf("reported %gs, ran with %v; want the maximum %v", got, wall, d.Runner.Bounds.Max.Wall)
	}
	// The lowering is said, in the structure and in the text a model reads.
	want := []LoweredLimit{{Limit: "timeout_seconds", Requested: 3000, Granted: d.Runner.Bounds.Max.Wall.Seconds(),
		Unit: "seconds", Setting: "limits.max.wall"}}
	if !reflect.DeepEqual(res.Lowered, want) {
		t.Errorf("lowered = %+v, want %+v", res.Lowered, want)
	}
	note := fmt.Sprintf("note: timeout_seconds 3000 was lowered to %g, the server's maximum (limits.max.wall)", d.Runner.Bounds.Max.Wall.Seconds())
	if !strings.Contains(text(r), note) {
		t.Errorf("text does not say the timeout was lowered:\n%s", text(r))
	}
	// A request within the maximum is not reported.
	if r := call(t, c, "run_code", map[string]any{"code": "1", "timeout_seconds": 2}); structured(t, r).Lowered != nil ||
		strings.Contains(text(r), "lowered") {
		t.Errorf("a timeout within the maximum was reported lowered: %s", text(r))
	}
}

func TestRunCodeBusy(t *testing.T) {
	d := fakeDeps(runnertest.Block)
	c := startClient(t, d)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = "run_code"
		req.Params.Arguments = map[string]any{"code": "block"}
		r, _ := c.CallTool(ctx, req)
		done <- r
	}()
	for d.Runner.Limiter.Running() == 0 {
		time.Sleep(time.Millisecond)
	}
	r := call(t, c, "run_code", map[string]any{"code": "second"})
	if !r.IsError || !strings.Contains(text(r), "busy") {
		t.Errorf("second call: isError=%t %q", r.IsError, text(r))
	}
	refusedAs(t, r, statusBusy)
	cancel()
	<-done
}

func TestRunCodeSandboxUnavailable(t *testing.T) {
	c := startClient(t, fakeDeps(func(context.Context, sandbox.Spec) (sandbox.Result, error) {
		return sandbox.Result{}, errors.Join(sandbox.ErrUnavailable, errors.New("user namespaces are disabled"))
	}))
	r := call(t, c, "run_code", map[string]any{"code": "1"})
	if !r.IsError || !strings.Contains(text(r), "sandbox unavailable") || !strings.Contains(text(r), "user namespaces") {
		t.Errorf("isError=%t %q", r.IsError, text(r))
	}
	conforms(t, r)
}

// A refusal quoting what the call sent shows it sanitized, in the text as in the detail:
// a language name carrying a clipboard write (OSC 52) or a BiDi override drives no
// terminal and hides nothing.
func TestRefusalSanitizesWhatItQuotes(t *testing.T) {
	d := fakeDeps(runnertest.Echo)
	d.Runner.Environments = policy.NewEnvironments(policy.Environment{Name: "data", Language: "python", Usable: true})
	c := startClient(t, d)
	r := call(t, c, "run_code", map[string]any{"code": "1", "environment": "data", "language": "ruby\x1b]52;c;cm0gLXJmIC8=\x07\u202egnp.exe"})
	if !r.IsError || !strings.Contains(text(r), "environment data is python, not ruby") {
		t.Fatalf("isError=%t %q", r.IsError, text(r))
	}
	for _, bad := range []string{"\x1b", "\a", "\u202e"} {
		if strings.Contains(text(r), bad) {
			t.Errorf("the refusal's text holds %q: %q", bad, text(r))
		}
	}
	conforms(t, r)
}

func TestGetConfigRedacted(t *testing.T) {
	c := startClient(t, fakeDeps(runnertest.Echo))
	r := call(t, c, "get_config", nil)
	b, _ := json.Marshal(r)
	if r.IsError || strings.Contains(string(b), "super-secret-token") {
		t.Fatalf("isError=%t or token leaked: %s", r.IsError, b)
	}
	var v ConfigView
	sb, _ := json.Marshal(r.StructuredContent)
	if err := json.Unmarshal(sb, &v); err != nil {
		t.Fatal(err)
	}
	if !v.HTTP.AuthRequired || v.Isolation.Backend != "fake" || len(v.Languages) != 2 || v.Limits.Max.WallMs != 300000 {
		t.Errorf("view = %+v", v)
	}
	if r := call(t, c, "get_config", map[string]any{"x": 1}); !r.IsError {
		t.Error("get_config accepted an argument")
	}
	// A fleet's tokens are in a tokens file: auth is required just the same, and the
	// file's path is not shown.
	d := fakeDeps(runnertest.Echo)
	d.Config.HTTP.AuthToken, d.Config.HTTP.TokensFile = "", "/etc/airlock/secret-tokens"
	if v := EffectiveConfig(context.Background(), d); !v.HTTP.AuthRequired {
		t.Error("get_config says no auth is required of a server with a tokens file")
	}
	if b, _ := json.Marshal(call(t, startClient(t, d), "get_config", nil)); strings.Contains(string(b), "secret-tokens") {
		t.Errorf("get_config shows the tokens file: %s", b)
	}
}

func TestProbeSandbox(t *testing.T) {
	c := startClient(t, fakeDeps(runnertest.Echo))
	r := call(t, c, "probe_sandbox", map[string]any{"categories": []string{"fs"}})
	if r.IsError {
		t.Fatal(text(r))
	}
	sb, _ := json.Marshal(r.StructuredContent)
	var rep probe.Report
	if err := json.Unmarshal(sb, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != probe.Isolated || len(rep.Layers) != 3 || !strings.Contains(text(r), "verdict: isolated") {
		t.Errorf("report = %+v", rep)
	}
}

// blockingProber runs until its context ends, like a probe suite in progress.
type blockingProber struct{ started chan struct{} }

func (p blockingProber) Run(ctx context.Context, _ probe.Filter) (probe.Report, error) {
	p.started <- struct{}{}
	<-ctx.Done()
	return probe.Report{}, ctx.Err()
}
func (p blockingProber) Quick(ctx context.Context) (probe.Report, error) {
	return p.Run(ctx, probe.Filter{})
}

// probe_sandbox starts sandboxes too: it is one of the client's calls in flight, so a
// client at http.client_max_parallel cannot take more of the server's slots with it.
func TestProbeSandboxCountsAgainstTheClient(t *testing.T) {
	d := fakeDeps(runnertest.Echo)
	d.Runner.PerClient = runner.NewClientLimit(1)
	p := blockingProber{started: make(chan struct{}, 2)}
	d.Prober = p
	h := ProbeSandbox(d).Handler
	ctx, cancel := context.WithCancel(runner.WithPrincipal(context.Background(), "alice"))
	first := make(chan struct{})
	go func() { defer close(first); _, _ = h(ctx, mcp.CallToolRequest{}) }()
	<-p.started
	// Without the limit the second call would run (and block): it gets a moment only.
	second, stopSecond := context.WithTimeout(ctx, 2*time.Second)
	r, err := h(second, mcp.CallToolRequest{})
	stopSecond()
	if err != nil || !r.IsError || !strings.Contains(text(r), "busy") {
		t.Errorf("alice's second probe_sandbox at her limit of 1: %v %+v, want a busy error", err, r)
	}
	bob, stop := context.WithCancel(runner.WithPrincipal(context.Background(), "bob"))
	go func() { _, _ = h(bob, mcp.CallToolRequest{}) }()
	select {
	case <-p.started:
	case <-time.After(5 * time.Second):
		t.Error("bob's probe_sandbox did not start beside alice's")
	}
	stop()
	cancel()
	<-first
}

// The status line never says "in 0 ms": a pooled program can finish within a millisecond.
func TestRenderRunSubMillisecond(t *testing.T) {
	for wall, want := range map[int64]string{0: "status: ok (exit 0) in <1 ms\n", 12: "status: ok (exit 0) in 12 ms\n"} {
		got := renderRun(RunCodeResult{Status: "ok", WallMs: wall}, sandbox.Limits{})
		if !strings.HasPrefix(got, want) {
			t.Errorf("wall %d ms: %q, want prefix %q", wall, got, want)
		}
	}
}
