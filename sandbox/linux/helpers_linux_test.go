package linux

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/internal/sandboxtest"
	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/sandbox"
)

const (
	python = "/usr/bin/python3"
	shell  = "/bin/sh"
)

var (
	sbOnce sync.Once
	sbInst *Sandbox
	sbErr  error
)

// testSandbox is one backend for the whole test process, as in the server, in the tier
// testTier names.
func testSandbox(t *testing.T) *Sandbox {
	t.Helper()
	sbOnce.Do(func() { sbInst, sbErr = New(sandbox.Options{Isolation: testTier()}) })
	sandboxtest.Require(t, sbErr)
	return sbInst
}

// testTier is the isolation tier this test process's sandboxes have: the namespace
// tier unless AIRLOCK_TEST_ISOLATION says otherwise (TestLandlockTier runs the escape
// suite again in a child test process with it set to landlock).
func testTier() string {
	if t := os.Getenv("AIRLOCK_TEST_ISOLATION"); t != "" {
		return t
	}
	return sandbox.IsolationNamespaces
}

// inLandlockTier reports whether this test process tests the Landlock tier.
func inLandlockTier() bool { return testTier() == sandbox.IsolationLandlock }

// notInTier marks a test whose guarantee the Landlock tier does not give, with why (the
// probe and the README list the same): the guarantee table shows it as not applicable.
// It is not a skip for a missing kernel feature, so AIRLOCK_REQUIRE_SANDBOX leaves it be.
func notInTier(t *testing.T, why string) {
	t.Helper()
	if inLandlockTier() {
		t.Skip(notApplicable + why)
	}
}

const notApplicable = "NOT APPLICABLE IN THE LANDLOCK TIER: "

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// newMarker is a unique string put on a program's command line, so the host can find
// any process of that run in its own /proc.
func newMarker() string { return "airlock-mark-" + randHex(8) }

// pySpec runs code with the real interpreter (isolated, no site) and marker as argv[1].
// withDefaults gives a test spec what policy gives every call: each zero limit its
// default (the CPU limit follows the wall clock, as a call's timeout does) and a network
// mode. The backend refuses a zero limit.
func withDefaults(spec sandbox.Spec) sandbox.Spec {
	l, d := &spec.Limits, policy.DefaultBounds().Default
	if l.Wall <= 0 {
		l.Wall = d.Wall
	}
	if l.CPU <= 0 {
		l.CPU = l.Wall
	}
	fill := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	fill(&l.Memory, d.Memory)
	fill(&l.FileSize, d.FileSize)
	fill(&l.Workspace, d.Workspace)
	fill(&l.Output, d.Output)
	if l.Pids <= 0 {
		l.Pids = d.Pids
	}
	if l.OpenFiles <= 0 {
		l.OpenFiles = d.OpenFiles
	}
	return withDefaultNetwork(spec)
}

// runPrinting starts spec in s and returns once its program has printed something (it
// is then at work: holding a lock, a budget, a pattern of pages), with the channel its
// result comes on. A run that ends or errs first fails the test.
func runPrinting(t *testing.T, ctx context.Context, s *Sandbox, spec sandbox.Spec, what string) <-chan sandbox.Result {
	t.Helper()
	printed := make(chan struct{})
	var once sync.Once
	spec.Progress = func(p sandbox.Progress) {
		if p.StdoutBytes > 0 {
			once.Do(func() { close(printed) })
		}
	}
	done := make(chan sandbox.Result, 1)
	go func() {
		res, err := s.Run(ctx, withDefaults(spec))
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
		done <- res
	}()
	select {
	case <-printed:
	case res := <-done:
		t.Fatalf("%s ended before it printed: %s", what, brief(res))
	case <-ctx.Done():
		t.Fatalf("%s never printed", what)
	}
	return done
}

// pyAttempt begins a python probe that tries things one by one: attempt(name, fn) records
// "ok" or the errno's name of the OSError in out, which the probe prints as JSON.
const pyAttempt = `
import errno, json, os, sys
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
`

func pySpec(code, marker string) sandbox.Spec {
	return sandbox.Spec{
		Argv: []string{python, "-I", "-S", "-c", code, marker},
		Env:  []string{"AIRLOCK_MARK=" + marker},
	}
}

func shSpec(script, marker string) sandbox.Spec {
	return sandbox.Spec{Argv: []string{shell, "-c", script, marker}}
}

// run runs spec and fails the test if the sandbox itself failed.
func run(t *testing.T, spec sandbox.Spec) sandbox.Result {
	t.Helper()
	return runCtx(t, context.Background(), spec)
}

func runCtx(t *testing.T, ctx context.Context, spec sandbox.Spec) sandbox.Result {
	t.Helper()
	s := testSandbox(t)
	res, err := s.Run(ctx, withDefaults(spec))
	if err != nil {
		t.Fatalf("Run: %v (result %+v)", err, brief(res))
	}
	return res
}

// runJSON runs a python program that prints one JSON object as its last stdout line
// and decodes it into out. The program must end ok.
func runJSON(t *testing.T, spec sandbox.Spec, out any) sandbox.Result {
	t.Helper()
	res := run(t, spec)
	if res.Status != sandbox.StatusOK {
		t.Fatalf("program ended %s: %s", res.Status, brief(res))
	}
	lines := strings.Split(strings.TrimSpace(string(res.Stdout.Bytes())), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), out); err != nil {
		t.Fatalf("decode program output: %v\n%s", err, brief(res))
	}
	return res
}

// brief is a Result for failure messages, with the output as text and cut short.
func brief(r sandbox.Result) string {
	cut := func(b []byte) string {
		if len(b) > 2000 {
			b = append(b[:1000:1000], append([]byte(" … "), b[len(b)-1000:]...)...)
		}
		return string(b)
	}
	return "status=" + string(r.Status) + " exit=" + strconv.Itoa(r.ExitCode) + " signal=" + r.Signal +
		" wall=" + r.Wall.String() + " cpu=" + r.CPU.String() + " detail=" + r.Detail +
		"\nstdout: " + cut(r.Stdout.Bytes()) + "\nstderr: " + cut(r.Stderr.Bytes())
}

// hostProcsWith lists the host pids (other than ours) whose command line or
// environment holds marker.
func hostProcsWith(marker string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	m := []byte(marker)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if bytes.Contains(cmd, m) || bytes.Contains(env, m) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// assertNoSurvivors fails if any host process still carries marker. The kernel has
// finished the pid namespace once Run returns (the init is reaped only after every
// process in it), so the check is immediate, with no grace period.
func assertNoSurvivors(t *testing.T, marker string) {
	t.Helper()
	if pids := hostProcsWith(marker); len(pids) > 0 {
		var desc []string
		for _, p := range pids {
			st, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "stat"))
			desc = append(desc, strings.TrimSpace(string(st)))
		}
		t.Fatalf("sandbox processes survived Run: %v\n%s", pids, strings.Join(desc, "\n"))
	}
}

// waitHostProc waits until a process carrying marker shows up on the host.
func waitHostProc(t *testing.T, marker string, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if pids := hostProcsWith(marker); len(pids) > 0 {
			return pids[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no host process with marker %s appeared within %s", marker, within)
	return 0
}

func isRoot() bool { return os.Geteuid() == 0 }
