package linux

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

// A reused cgroup carries nothing over: a sandbox that hit its memory limit, its
// process limit and the wall clock (which lifts the CPU quota), with lower limits than
// the next, leaves a cgroup whose next sandbox gets its own limits back, an unthrottled
// quota set again, and counts no OOM kill or pids.max hit of the first.
func TestReusedCgroupCarriesNothing(t *testing.T) {
	s, err := New(sandbox.Options{})
	requireSandbox(t, err)
	defer s.Close()
	if s.cg.version != 1 {
		t.Skipf("SKIPPING: cgroups are reused on v1 only (in use here: version %d, %s)", s.cg.version, s.cg.reason)
	}
	// One sandbox at a time, each release awaited (the self-test's first): the same
	// cgroup each time.
	s.Wait()
	reusedOne := func() *cgroup {
		t.Helper()
		s.Wait()
		s.cg.reused.mu.Lock()
		defer s.cg.reused.mu.Unlock()
		if len(s.cg.reused.free) != 1 {
			t.Fatalf("%d cgroups kept for reuse, want 1", len(s.cg.reused.free))
		}
		return s.cg.reused.free[0]
	}
	if res := run1(t, s, shSpec("true", newMarker())); res.Status != sandbox.StatusOK {
		t.Fatalf("first run: %s", brief(res))
	}
	first := reusedOne()
	// A cgroup still charged with more than reuseMaxCharge is not reused, and what a
	// run leaves is freed lazily: wait for that before each run, so the reuse is tested.
	settle := func(c *cgroup, after string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !c.empty() && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("charge left by %s: %d KiB", after, readInt(filepath.Join(c.dirs["memory"], "memory.usage_in_bytes"))>>10)
	}
	settle(first, "the first run")

	// The dirty run: a memory bomb under 64 MiB, after a fork bomb under 8 processes,
	// ended by the wall clock while spinning.
	dirty := pySpec(`
import os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(1000)
        n += 1
except OSError:
    print("forks", n, flush=True)
chunks = []
try:
    while True:
        chunks.append(bytearray(8 << 20))
except MemoryError:
    pass
`, newMarker())
	dirty.Limits = sandbox.Limits{Memory: 64 << 20, Pids: 8, Wall: 3 * time.Second}
	res := run1(t, s, dirty)
	t.Logf("dirty run: %s", brief(res))
	if res.Status != sandbox.StatusMemoryLimit {
		t.Fatalf("dirty run: %s, want memory_limit", brief(res))
	}
	if c := reusedOne(); c != first {
		t.Fatal("the dirty run's cgroup was not the reused one")
	}
	// Its quota lifted (as stop does for a killed tree), so the next run must get it back.
	first.unthrottle()
	quota := filepath.Join(first.dirs["cpu"], "cpu.cfs_quota_us")
	if b, _ := readCgroupFile(quota); strings.TrimSpace(string(b)) != "-1" {
		t.Fatalf("quota after unthrottle: %q", b)
	}

	settle(first, "the dirty run")

	// The clean run: more memory and processes than the dirty one had; its limits and
	// counters are its own.
	marker := newMarker()
	clean := pySpec(`
import os, sys, time
pids = []
for _ in range(20):
    p = os.fork()
    if p == 0:
        time.sleep(2)
        os._exit(0)
    pids.append(p)
b = bytearray(160 << 20)
for i in range(0, len(b), 4096):
    b[i] = 1
for p in pids:
    os.waitpid(p, 0)
print("ok", flush=True)
# Killed by SIGKILL, not by the memory limit: a carried OOM kill would say otherwise.
os.kill(os.getpid(), 9)
`, marker)
	clean.Limits = sandbox.Limits{Memory: 512 << 20, Pids: 64, Wall: 20 * time.Second}
	done := make(chan sandbox.Result, 1)
	go func() { done <- run1(t, s, clean) }()
	prog := waitHostProc(t, marker, 10*time.Second)
	cpuDir := cgroupOf(t, prog, "cpu")
	if b, _ := readCgroupFile(filepath.Join(cpuDir, "cpu.cfs_quota_us")); strings.TrimSpace(string(b)) != "100000" {
		t.Errorf("the reused cgroup's CPU quota during the next run: %q, want 100000", b)
	}
	memDir := cgroupOf(t, prog, "memory")
	for file, want := range map[string]string{"memory.limit_in_bytes": fmt.Sprint(512 << 20), "memory.swappiness": "0"} {
		if b, _ := readCgroupFile(filepath.Join(memDir, file)); strings.TrimSpace(string(b)) != want {
			t.Errorf("%s during the next run: %q, want %s", file, b, want)
		}
	}
	res = <-done
	if res.Status != sandbox.StatusKilled || res.Signal != "SIGKILL" || !strings.Contains(string(res.Stdout.Bytes()), "ok") {
		t.Fatalf("clean run in the reused cgroup: %s, want killed by SIGKILL (a carried OOM kill makes it memory_limit)", brief(res))
	}
	if res.PeakMemory > 400<<20 {
		t.Errorf("clean run's peak %d MiB: the dirty run's peak carried over?", res.PeakMemory>>20)
	}
	if c := reusedOne(); c != first {
		t.Fatal("the clean run did not run in the reused cgroup: nothing was tested")
	}
	if !strings.HasSuffix(memDir, "/"+runName(res.ID)) {
		t.Errorf("reused cgroup %s not renamed after the run %s", memDir, res.ID)
	}
	// A failing exit: a carried pids.max hit would be added to its detail.
	settle(first, "the clean run")
	res = run1(t, s, shSpec("exit 3", newMarker()))
	if res.Status != sandbox.StatusError || res.Detail != "exited with code 3" {
		t.Errorf("exit 3 in the reused cgroup: %s, want just \"exited with code 3\" (no carried pids.max hit)", brief(res))
	}
	if c := reusedOne(); c != first {
		t.Fatal("the last run did not run in the reused cgroup")
	}
}

func run1(t *testing.T, s *Sandbox, spec sandbox.Spec) sandbox.Result {
	t.Helper()
	res, _ := s.Run(t.Context(), spec)
	return res
}

// cgroupOf is the host directory of pid's cgroup in the v1 controller ctrl.
func cgroupOf(t *testing.T, pid int, ctrl string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	mounts := parseCgroupMounts(readMountinfo(t))
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			if c == ctrl {
				if m, ok := mounts[ctrl]; ok {
					rel, _ := filepath.Rel(m.root, f[2])
					return filepath.Join(m.point, rel)
				}
			}
		}
	}
	t.Fatalf("pid %d has no %s cgroup", pid, ctrl)
	return ""
}

func readMountinfo(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
