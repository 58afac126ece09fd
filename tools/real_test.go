package tools

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/config"
	"github.com/airlock-mcp/airlock/internal/sandboxtest"
	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/probe/probetest"
	"github.com/airlock-mcp/airlock/runner"
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/sandbox/host"
)

// TestMain lets the test binary act as the sandbox's own init when re-executed.
func TestMain(m *testing.M) {
	if sandbox.Init() {
		return
	}
	os.Exit(m.Run())
}

func realDeps(t *testing.T) Deps {
	t.Helper()
	cfg := config.Default()
	cfg.Sandbox.Isolation = testTier()
	sb, err := host.New(cfg.SandboxOptions())
	if err == nil {
		_, err = sb.Probe(context.Background())
	}
	sandboxtest.Require(t, err)
	// The Landlock tier's run directories and their mounts go at Close (or at the next
	// server's start): without it every test left its own behind.
	if w, ok := sb.(sandbox.Warmer); ok {
		t.Cleanup(func() { _ = w.Close() })
	}
	reg, err := policy.Detect([]string{"python"})
	if err != nil || len(reg.Enabled()) == 0 {
		t.Skipf("SKIPPING real-sandbox test: no python interpreter (%v)", err)
	}
	r := &runner.Runner{Sandbox: sb, Languages: reg, Bounds: cfg.PolicyBounds(), Network: sandbox.NetworkNone,
		MaxCodeBytes: 1 << 20, MaxStdinBytes: 1 << 20, Limiter: runner.NewLimiter(2, 8, 30*time.Second),
		Log:      slog.New(slog.DiscardHandler),
		FileCaps: cfg.FileCaps(), OutDir: cfg.Artifacts.Dir, Artifacts: cfg.ArtifactLimits()}
	return Deps{Runner: r, Prober: probetest.Layers{Sandbox: sb}, Config: cfg, Version: "test"}
}

func TestRealRunCode(t *testing.T) {
	c := startClient(t, realDeps(t))
	tests := []struct {
		name, code, stdin string
		timeout           float64
		status            string
		stdout, stderr    string
	}{
		{name: "ok with stdin", code: "import sys\nprint(sys.stdin.read().upper())", stdin: "abc", status: "ok", stdout: "ABC"},
		{name: "exception", code: "raise ValueError('boom')", status: "error", stderr: "ValueError: boom"},
		{name: "timeout", code: "while True: pass", timeout: 1, status: "timeout"},
		{name: "no network", code: "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)", status: "error", stderr: "Error"},
		{name: "escape sequences stripped", code: "print('\\x1b[31mred\\x1b[0m')", status: "ok", stdout: "red"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := map[string]any{"code": tt.code, "stdin": tt.stdin}
			if tt.timeout > 0 {
				args["timeout_seconds"] = tt.timeout
			}
			t0 := time.Now()
			r := call(t, c, "run_code", args)
			out := structured(t, r)
			if out.Status != tt.status || r.IsError != (tt.status != "ok") {
				t.Fatalf("status %s isError %t, want %s: %s", out.Status, r.IsError, tt.status, text(r))
			}
			if !strings.Contains(out.Stdout, tt.stdout) || !strings.Contains(out.Stderr, tt.stderr) || strings.Contains(out.Stdout, "\x1b") {
				t.Errorf("stdout %q stderr %q", out.Stdout, out.Stderr)
			}
			if tt.status == "timeout" && time.Since(t0) > 5*time.Second {
				t.Errorf("a 1 s timeout took %v", time.Since(t0))
			}
		})
	}
}

// testTier is the tier of this test process's real sandboxes: the namespace tier unless
// AIRLOCK_TEST_ISOLATION names another (TestRealLandlockTier).
func testTier() string {
	if t := os.Getenv("AIRLOCK_TEST_ISOLATION"); t != "" {
		return t
	}
	return sandbox.IsolationNamespaces
}

// TestRealLandlockTier runs the real run_code, files and artifacts tests again in the
// Landlock tier, in a child test process (one backend per process, as in a server).
func TestRealLandlockTier(t *testing.T) {
	if testTier() == sandbox.IsolationLandlock {
		t.Skip("this is the Landlock tier's run itself")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.count=1", "-test.v", "-test.timeout=300s",
		"-test.run=^TestReal(RunCode|FilesIn|FilesRefused|FilesWorkspaceLimit|ArtifactsOut|ArtifactEscapes|OutDirReplacedBySymlink|ArtifactCaps)$")
	cmd.Env = append(os.Environ(), "AIRLOCK_TEST_ISOLATION="+sandbox.IsolationLandlock)
	out, err := cmd.CombinedOutput()
	if bytes.Contains(out, []byte("SKIPPING")) && os.Getenv("AIRLOCK_REQUIRE_SANDBOX") == "1" {
		t.Fatalf("the Landlock tier's run skipped:\n%s", out)
	}
	if err != nil || !bytes.Contains(out, []byte("\nPASS\n")) {
		t.Fatalf("run_code, files and artifacts fail in the Landlock tier (%v):\n%s", err, out)
	}
	if n := bytes.Count(out, []byte("--- PASS: TestReal")); n < 8 {
		t.Fatalf("%d of 8 tests passed in the Landlock tier:\n%s", n, out)
	}
}
