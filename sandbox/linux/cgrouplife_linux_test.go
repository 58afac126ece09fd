package linux

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/internal/sandboxtest"
	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/sandbox"
)

// A run's limits must hold from the program's first instruction: a program that forks
// or allocates as the very first thing it does must meet them, in a cold run, in a pooled
// one (whose cgroup the call's limits are lowered in before the handover) and in a
// session. A cgroup joined too late, or limits written after the program started, let
// these runs through (seen with a scratch build whose spawner joined 300 ms late).
func TestCgroupLimitsFromTheStart(t *testing.T) {
	recordTier(t)
	s, err := New(sandbox.Options{Isolation: testTier()})
	sandboxtest.Require(t, err)
	t.Cleanup(func() { s.Close() })
	if s.cg.version == 0 {
		t.Skipf("SKIPPING: no cgroups here (%s)", s.cg.reason)
	}
	const pids = 6
	// The shell forks first thing; each fork that succeeds is counted on stdout. dash
	// ends at the first fork refused ("Cannot fork"). Without the pids limit it stops
	// at 60.
	forks := shSpec(`n=0; while [ $n -lt 60 ]; do sleep 100 & n=$((n+1)); echo $n; done`, newMarker())
	forks.Limits.Pids = pids
	lastCount := func(res sandbox.Result) int {
		f := strings.Fields(string(res.Stdout.Bytes()))
		if len(f) == 0 {
			return 0
		}
		n, _ := strconv.Atoi(f[len(f)-1])
		return n
	}
	res, err := s.Run(context.Background(), withDefaults(forks))
	if err != nil {
		t.Fatalf("cold forks: %v %s", err, brief(res))
	}
	if n := lastCount(res); n >= pids || n == 0 {
		t.Errorf("cold: %d forks succeeded under a pids limit of %d (%s)", n, pids, brief(res))
	}
	// 200 MiB allocated by the program's first statement, against 64 MiB.
	alloc := pySpec("b = bytearray(200 << 20)", newMarker())
	alloc.Limits.Memory = 64 << 20
	res, err = s.Run(context.Background(), withDefaults(alloc))
	if err != nil || res.Status != sandbox.StatusMemoryLimit {
		t.Errorf("cold: 200 MB under a 64 MiB limit: %v %s", err, brief(res))
	}

	// Pooled: the template's limits are higher; the call's are written before the
	// handover, and the preloaded interpreter forks at once.
	langs := poolLanguages(t)
	limits := sandbox.Limits{Wall: 30 * time.Second, CPU: 30 * time.Second, Memory: 256 << 20, Pids: 32, Output: 1 << 20}
	s.Warm([]sandbox.Spec{withDefaults(langs["python"].Spec(nil, nil, limits, policy.BoundByRlimit))}, 1)
	waitReady := func() {
		deadline := time.Now().Add(10 * time.Second)
		for s.PoolStats().Ready < 1 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	lower := limits
	lower.Pids = pids
	code := "import os, time\nn = 0\ntry:\n    while n < 60:\n        if os.fork() == 0:\n            time.sleep(100)\n        n += 1\nexcept OSError:\n    pass\nprint(n)"
	waitReady()
	hits := s.PoolStats().Hits
	res, err = s.Run(context.Background(), withDefaults(langs["python"].Spec([]byte(code), nil, lower, policy.BoundByRlimit)))
	if err != nil || s.PoolStats().Hits != hits+1 {
		t.Fatalf("pooled forks: %v %s (pool %+v)", err, brief(res), s.PoolStats())
	}
	if n := lastCount(res); n >= pids {
		t.Errorf("pooled: %d forks succeeded under a pids limit of %d (%s)", n, pids, brief(res))
	}

	// A session: its cgroup is made by its spawner as a cold run's is, for its whole
	// life; its first call forks at once (the driver and the interpreter count too).
	needSessions(t, s)
	sspec := sessionSpec(t, "python")
	sspec.Limits.Pids = 3 * pids
	sspec.Limits.Memory = 96 << 20
	ss, err := s.OpenSession(context.Background(), withDefaults(sspec))
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	defer ss.Close()
	res = call(t, ss, code)
	t.Logf("session: %d forks, %s", lastCount(res), res.Status)
	if n := lastCount(res); n >= 3*pids || res.Status != sandbox.StatusOK {
		t.Errorf("session: %d forks succeeded under a pids limit of %d (%s)", n, 3*pids, brief(res))
	}
	if res = call(t, ss, "b = bytearray(200 << 20)"); res.Status != sandbox.StatusMemoryLimit {
		t.Errorf("session: 200 MiB under a 96 MiB limit: %s", brief(res))
	}
}

// A run's cgroup is gone once its sandbox is released, however it ended: a normal end,
// a timeout, an OOM kill, a spawner killed from outside, a setup failure.
func TestRunCgroupsLeaveNothing(t *testing.T) {
	recordTier(t)
	s, err := New(sandbox.Options{Isolation: testTier()})
	sandboxtest.Require(t, err)
	t.Cleanup(func() { s.Close() })
	if s.cg.version == 0 {
		t.Skipf("SKIPPING: no cgroups here (%s)", s.cg.reason)
	}
	// Spares (prepared, empty cgroups a later run takes, refilled in the background) are
	// the server's by design and go with Close (TestSparesAreFreshAndGoWithClose); there
	// are never more than a refill makes, in each own dir.
	left := func(when string) {
		t.Helper()
		s.Wait()
		for _, own := range s.cg.ownDirs() {
			entries, err := os.ReadDir(own)
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			n := 0
			for _, e := range entries {
				switch {
				case !e.IsDir():
				case strings.Contains(e.Name(), spareMark):
					n++
				default:
					t.Errorf("%s: cgroup %s left behind", when, filepath.Join(own, e.Name()))
				}
			}
			if n > spareTarget {
				t.Errorf("%s: %d spare cgroups in %s, more than a refill makes (%d)", when, n, own, spareTarget)
			}
		}
	}
	left("after the self-check")

	res, err := s.Run(context.Background(), withDefaults(sandbox.Spec{Argv: []string{"/bin/true"}}))
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("true: %v %s", err, brief(res))
	}
	left("after a normal end")

	spec := shSpec("sleep 100", newMarker())
	spec.Limits.Wall = 100 * time.Millisecond
	if res, err = s.Run(context.Background(), withDefaults(spec)); err != nil || res.Status != sandbox.StatusTimeout {
		t.Fatalf("timeout: %v %s", err, brief(res))
	}
	left("after a timeout")

	spec = pySpec("b = bytearray(200 << 20)", newMarker())
	spec.Limits.Memory = 64 << 20
	if res, err = s.Run(context.Background(), withDefaults(spec)); err != nil || res.Status != sandbox.StatusMemoryLimit {
		t.Fatalf("oom: %v %s", err, brief(res))
	}
	left("after an OOM kill")

	marker := newMarker()
	spec = shSpec("sleep 100", marker)
	spec.Limits.Wall = 20 * time.Second
	done := make(chan sandbox.Result, 1)
	go func() {
		res, _ := s.Run(context.Background(), withDefaults(spec))
		done <- res
	}()
	prog := waitHostProc(t, marker, 5*time.Second)
	spawner := parentOf(t, parentOf(t, prog))
	if b, _ := os.ReadFile("/proc/" + strconv.Itoa(spawner) + "/cmdline"); !strings.HasPrefix(string(b), "airlock-spawner") {
		t.Fatalf("pid %d is %q, not the spawner", spawner, b)
	}
	if err := syscall.Kill(spawner, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
	left("after the spawner was killed")

	if res, err = s.Run(context.Background(), withDefaults(sandbox.Spec{Argv: []string{"/nonexistent"}})); res.Status == sandbox.StatusOK {
		t.Fatalf("nonexistent: %v %s", err, brief(res))
	}
	left("after a failed start")
}
