package soak

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/internal/sandboxtest"
)

// buildAirlock builds the server binary, and skips loudly (or fails under
// AIRLOCK_REQUIRE_SANDBOX=1) where this host cannot run sandboxes.
func buildAirlock(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		sandboxtest.SkipOrFail(t, "the soak reads /proc of the server's sandboxes: needs root on Linux")
	}
	bin := filepath.Join(t.TempDir(), "airlock")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/airlock-mcp/airlock").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "run", "-")
	cmd.Stdin = strings.NewReader("print(1)")
	cmd.Env = ServerEnv(t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		sandboxtest.SkipOrFail(t, "no usable sandbox: %v: %s", err, stderr.String())
	}
	return bin
}

// TestShortSoak is the soak in miniature: 200 calls of every kind, half of them 8 at a
// time, against the real binary, with every host-side check of the full soak.
func TestShortSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	rep := shortSoak(t, Options{Calls: 200, Parallel: 8, GoroutineSlack: 4, Pool: 2})
	// The checks must have had something to check.
	if rep.Sent < 200 || rep.AuditLines < 200 || rep.Before.FDs == 0 || rep.GoroutinesTwin == 0 {
		t.Fatalf("soak measured nothing: %+v", rep)
	}
}

// TestShortSessionSoak is the short soak with every call in a session: the hostile
// kinds run as later calls of sessions beside what earlier calls left, and nothing of
// any session may remain once they are closed.
func TestShortSessionSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	rep := shortSoak(t, Options{Calls: 120, Parallel: 4, Pool: 2, Sessions: true})
	if rep.Sent < 120 || rep.AuditLines < 120 || rep.Before.FDs == 0 {
		t.Fatalf("session soak measured nothing: %+v", rep)
	}
}

// TestShortTenantSoak runs three servers at once, each with calls that exhaust a
// per-user kernel budget (pending signals, pipe buffers, descriptors in flight) beside
// calls, and a host process of root, that must still get theirs.
func TestShortTenantSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	bin := buildAirlock(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := RunTenants(ctx, Options{Binary: bin, Calls: 60, Parallel: 3, Dir: t.TempDir()}, 3)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	rep.Print(&b)
	t.Log("\n" + b.String())
	if !rep.Pass() {
		t.Fatalf("tenant soak failed: %v", rep.Problems)
	}
	if rep.Kinds["budgets"].Calls == 0 || rep.HostChecks == 0 {
		t.Fatalf("the tenant soak checked nothing: %+v", rep)
	}
}

// shortSoak runs the soak with o against the built binary, logs its report and fails the
// test on any problem it found.
func shortSoak(t *testing.T, o Options) *Report {
	t.Helper()
	o.Binary, o.Dir = buildAirlock(t), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	rep.Print(&b)
	t.Log("\n" + b.String())
	if !rep.Pass() {
		t.Fatalf("soak failed: %v", rep.Problems)
	}
	return rep
}
