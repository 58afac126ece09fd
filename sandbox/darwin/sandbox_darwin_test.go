package darwin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

// The test binary is its own sandbox init (sandbox.Init) and its own hostile program: with
// AIRLOCK_TEST_ROLE set it runs one escape attempt inside the sandbox and exits.
func TestMain(m *testing.M) {
	if sandbox.Init() {
		return
	}
	if role := os.Getenv("AIRLOCK_TEST_ROLE"); role != "" {
		os.Exit(hostile(role, os.Getenv("AIRLOCK_TEST_ARG")))
	}
	os.Exit(m.Run())
}

// hostile prints "ESCAPED" when the attempt worked and "blocked: …" otherwise.
func hostile(role, arg string) int {
	report := func(err error) int {
		if err == nil {
			fmt.Println("ESCAPED")
			return 0
		}
		fmt.Println("blocked:", err)
		return 1
	}
	switch role {
	case "read":
		_, err := os.ReadFile(arg)
		return report(err)
	case "readdir":
		_, err := os.ReadDir(arg)
		return report(err)
	case "write":
		return report(os.WriteFile(arg, []byte("x"), 0o644))
	case "connect":
		c, err := net.DialTimeout("tcp", arg, 2*time.Second)
		if err == nil {
			c.Close()
		}
		return report(err)
	case "env":
		fmt.Println(strings.Join(os.Environ(), "\n"))
		return 0
	case "flood":
		b := []byte(strings.Repeat("y", 64<<10))
		for {
			if _, err := os.Stdout.Write(b); err != nil {
				return 1
			}
		}
	case "spawn":
		n, _ := strconv.Atoi(arg)
		for i := range n {
			if _, err := syscall.ForkExec(os.Args[0], []string{os.Args[0]}, &syscall.ProcAttr{Env: []string{"AIRLOCK_TEST_ROLE=sleep"}}); err != nil {
				fmt.Printf("blocked after %d: %v\n", i, err)
				return 1
			}
		}
		fmt.Println("ESCAPED")
		return 0
	case "sleep":
		time.Sleep(time.Hour)
		return 0
	case "detach":
		// Double fork with setsid: the middle process exits at once, so the grandchild is
		// re-parented to launchd and outside our process group.
		attr := &syscall.ProcAttr{Env: []string{"AIRLOCK_TEST_ROLE=detach-middle"}, Files: []uintptr{0, 1, 2}, Sys: &syscall.SysProcAttr{Setsid: true}}
		if _, err := syscall.ForkExec(os.Args[0], []string{os.Args[0]}, attr); err != nil {
			return report(err)
		}
		time.Sleep(time.Hour)
		return 0
	case "detach-middle":
		attr := &syscall.ProcAttr{Env: []string{"AIRLOCK_TEST_ROLE=detach-leaf"}, Files: []uintptr{0, 1, 2}, Sys: &syscall.SysProcAttr{Setsid: true}}
		pid, err := syscall.ForkExec(os.Args[0], []string{os.Args[0]}, attr)
		if err != nil {
			return report(err)
		}
		fmt.Printf("leaf=%d\n", pid)
		return 0
	case "detach-leaf":
		_, _ = syscall.Setsid()
		for {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return 2
}

func newTestSandbox(t *testing.T) *Sandbox {
	t.Helper()
	s, err := New(sandbox.Options{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func run(t *testing.T, s *Sandbox, role, arg string, lim sandbox.Limits) sandbox.Result {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if lim.Wall == 0 {
		lim.Wall = 10 * time.Second
	}
	res, err := s.Run(context.Background(), sandbox.Spec{
		Language: "test", Argv: []string{self},
		Env:    []string{"AIRLOCK_TEST_ROLE=" + role, "AIRLOCK_TEST_ARG=" + arg},
		Limits: lim,
	})
	if err != nil {
		t.Fatalf("Run(%s): %v", role, err)
	}
	return res
}

func requireBlocked(t *testing.T, res sandbox.Result) {
	t.Helper()
	out := string(res.Stdout.Bytes())
	if strings.Contains(out, "ESCAPED") || !strings.Contains(out, "blocked") {
		t.Fatalf("escape attempt not blocked: status %s, stdout %q, stderr %q", res.Status, out, res.Stderr.Bytes())
	}
}

func TestSecretReadDenied(t *testing.T) {
	s := newTestSandbox(t)
	secret := filepath.Join(t.TempDir(), "id_rsa") // a sibling of the workspace, like ~/.ssh
	if err := os.WriteFile(secret, []byte("PRIVATE KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	requireBlocked(t, run(t, s, "read", secret, sandbox.Limits{}))
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	requireBlocked(t, run(t, s, "readdir", home, sandbox.Limits{}))
	requireBlocked(t, run(t, s, "readdir", filepath.Join(home, ".ssh"), sandbox.Limits{}))
}

func TestWriteOutsideWorkspaceDenied(t *testing.T) {
	s := newTestSandbox(t)
	target := filepath.Join(t.TempDir(), "planted")
	requireBlocked(t, run(t, s, "write", target, sandbox.Limits{}))
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file outside the workspace was created: %v", err)
	}
}

func TestNetworkDenied(t *testing.T) {
	s := newTestSandbox(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	requireBlocked(t, run(t, s, "connect", ln.Addr().String(), sandbox.Limits{}))
}

func TestEnvSecretAbsent(t *testing.T) {
	t.Setenv("AIRLOCK_TEST_SECRET", "hunter2")
	res := run(t, newTestSandbox(t), "env", "", sandbox.Limits{})
	out := string(res.Stdout.Bytes())
	if res.Status != sandbox.StatusOK || !strings.Contains(out, "PATH=/usr/bin:/bin") {
		t.Fatalf("env role did not run: %s %q %q", res.Status, out, res.Stderr.Bytes())
	}
	if strings.Contains(out, "hunter2") {
		t.Fatal("the server's environment leaked into the sandbox")
	}
}

func TestForkBombContained(t *testing.T) {
	res := run(t, newTestSandbox(t), "spawn", "200", sandbox.Limits{Pids: 8, Wall: 10 * time.Second})
	requireBlocked(t, res)
}

func TestOutputFloodCapped(t *testing.T) {
	res := run(t, newTestSandbox(t), "flood", "", sandbox.Limits{Output: 64 << 10})
	if res.Status != sandbox.StatusOutputLimit {
		t.Fatalf("status %s, want output_limit (%s)", res.Status, res.Detail)
	}
	if kept := len(res.Stdout.Head) + len(res.Stdout.Tail); kept > 64<<10 {
		t.Fatalf("kept %d bytes, cap 64 KiB", kept)
	}
}

func TestTimeoutKillsDetachedGrandchild(t *testing.T) {
	start := time.Now()
	res := run(t, newTestSandbox(t), "detach", "", sandbox.Limits{Wall: 2 * time.Second})
	if res.Status != sandbox.StatusTimeout {
		t.Fatalf("status %s, want timeout (%s)", res.Status, res.Detail)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Run took %v after a 2 s limit: a descendant held it", took)
	}
	_, leaf, ok := strings.Cut(string(res.Stdout.Bytes()), "leaf=")
	if !ok {
		t.Fatalf("grandchild did not report its pid: %q %q", res.Stdout.Bytes(), res.Stderr.Bytes())
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(leaf, "\n", 2)[0]))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("detached grandchild %d survived the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestProbe(t *testing.T) {
	r, err := newTestSandbox(t).Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := r.Layer("seatbelt"); !ok || !l.Active {
		t.Fatalf("seatbelt layer: %+v", l)
	}
	if l, ok := r.Layer("pid-namespace"); !ok || l.Active {
		t.Fatalf("pid-namespace must be reported inactive on macOS: %+v", l)
	}
	if len(r.Missing()) != 0 {
		t.Fatalf("required layers missing: %+v", r.Missing())
	}
}
