package linux

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/internal/sandboxtest"
	"github.com/airlock-mcp/airlock/sandbox"
)

// detach starts a grandchild that leaves the program's session, ignores SIGTERM and
// SIGHUP, and sleeps; with "keep-stdout" it also keeps the stdout pipe open.
const detach = `
import os, signal, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        if "keep-stdout" not in sys.argv:
            os.close(1); os.close(2)
        time.sleep(1000)
    os._exit(0)
time.sleep(0.2)
print("main done", flush=True)
if "hang" in sys.argv:
    time.sleep(1000)
`

func TestDetachedGrandchildDies(t *testing.T) {
	recordTier(t)
	t.Parallel()
	for _, tc := range []struct {
		name   string
		args   []string
		wall   time.Duration
		status sandbox.Status
		within time.Duration // from the program's start to the result (setup, slow under -race, excluded)
	}{
		// Under drainGrace (2 s), so waiting for the grandchild's pipe would fail.
		{"main-exits", nil, 10 * time.Second, sandbox.StatusOK, 1900 * time.Millisecond},
		{"main-exits-grandchild-holds-stdout", []string{"keep-stdout"}, 10 * time.Second, sandbox.StatusOK, 1900 * time.Millisecond},
		{"timeout", []string{"hang"}, time.Second, sandbox.StatusTimeout, 2 * time.Second},
		{"timeout-grandchild-holds-stdout", []string{"hang", "keep-stdout"}, time.Second, sandbox.StatusTimeout, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			marker := newMarker()
			spec := pySpec(detach, marker)
			spec.Argv = append(spec.Argv, tc.args...)
			spec.Limits = sandbox.Limits{Wall: tc.wall}
			start := time.Now()
			res := run(t, spec)
			took := time.Since(start)
			if res.Status != tc.status || !strings.Contains(string(res.Stdout.Bytes()), "main done") {
				t.Fatalf("status %s, want %s: %s", res.Status, tc.status, brief(res))
			}
			if res.Wall > tc.within {
				t.Errorf("program start to result %s (Run %s), want under %s", res.Wall, took, tc.within)
			}
			assertNoSurvivors(t, marker)
		})
	}
}

// TestSignalsToInit: the program signals its init with everything; the init must
// survive and still report the program's exit. The init is the program's parent: pid 1
// of the namespace tier; in the Landlock tier a process outside the program's nested
// Landlock domain, which scoping keeps its signals from.
func TestSignalsToInit(t *testing.T) {
	recordTier(t)
	const code = `
import os, signal
init = os.getppid()
sent = []
for s in range(1, 65):
    if s in (signal.SIGKILL, signal.SIGSTOP):
        pass
    try:
        os.kill(init, s)
        sent.append(s)
    except OSError:
        pass
for s in (signal.SIGKILL, signal.SIGSTOP):
    try:
        os.kill(init, s)
    except PermissionError:
        pass
print("sent", len(sent), flush=True)
`
	res := run(t, pySpec(code, newMarker()))
	if res.Status != sandbox.StatusOK || !strings.HasPrefix(string(res.Stdout.Bytes()), "sent ") {
		t.Fatalf("init did not survive signals from the program: %s", brief(res))
	}
	if inLandlockTier() && string(res.Stdout.Bytes()) != "sent 0\n" {
		t.Errorf("the program signalled its init: %s", brief(res))
	}
}

func TestStateDoesNotBleed(t *testing.T) {
	recordTier(t)
	if inLandlockTier() {
		landlockStateDoesNotBleed(t)
		return
	}
	const write = `
import ctypes, os
for p in ["/workspace/bleed", "/tmp/bleed", "/dev/shm/bleed"]:
    open(p, "w").write("run one")
libc = ctypes.CDLL(None, use_errno=True)
shmid = libc.shmget(0x41524c4b, 4096, 0o1666)
print("shmid", shmid)
`
	const read = `
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
out = {"shm": libc.shmget(0x41524c4b, 0, 0o666)}
for d in ["/workspace", "/tmp", "/dev/shm"]:
    out[d] = sorted(os.listdir(d))
print(json.dumps(out))
`
	res := run(t, pySpec(write, newMarker()))
	if res.Status != sandbox.StatusOK || strings.Contains(string(res.Stdout.Bytes()), "shmid -1") {
		t.Fatalf("first run: %s", brief(res))
	}
	var got map[string]any
	runJSON(t, pySpec(read, newMarker()), &got)
	for _, d := range []string{"/workspace", "/tmp", "/dev/shm"} {
		if l, _ := got[d].([]any); len(l) != 0 {
			t.Errorf("second run sees %s: %v", d, l)
		}
	}
	if got["shm"] != float64(-1) {
		t.Errorf("second run sees the first run's SysV shared memory: %v", got["shm"])
	}
}

// TestNoLeftovers runs 200 sandboxes (fast ones of every kind, 4 at a time) and then
// checks the host: no cgroup, mount, temp dir, process or descriptor is left behind.
func TestNoLeftovers(t *testing.T) {
	recordTier(t)
	s := testSandbox(t)
	s.Wait() // earlier tests' teardowns
	goroutinesBefore := runtime.NumGoroutine()
	fdsBefore := countFDs(t)
	mountsBefore := mountPoints(t)
	tmpBefore := tmpEntries()
	marker := newMarker()
	specs := []sandbox.Spec{
		{Argv: []string{"/bin/true", marker}},
		shSpec("sleep 1000 & exec /bin/false", marker),
		shSpec("(setsid sleep 1000 &); echo out; echo err >&2", marker),
		pySpec("import os\nos.fork() or os.setsid()\nprint(1)", marker),
		{Argv: []string{"/bin/sleep", "10", marker}, Limits: sandbox.Limits{Wall: 30 * time.Millisecond}},
		{Argv: []string{"/nonexistent", marker}},
		// Directories their owner cannot list (0300) or enter (0), filled first: the
		// Landlock tier's run directory must go all the same.
		pySpec("import os\nos.mkdir('x', 0o300)\nopen('x/f', 'w').write('left')\nos.mkdir('y', 0)\nprint(1)", marker),
	}
	// The unprivileged re-run of this suite passes -test.short: fewer runs, same checks.
	runs := 200
	if testing.Short() {
		runs = 60
	}
	var wg sync.WaitGroup
	work := make(chan sandbox.Spec)
	errs := make(chan string, runs)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for spec := range work {
				res, err := s.Run(t.Context(), withDefaults(spec))
				bad := res.Status == sandbox.StatusSandboxError && spec.Argv[0] != "/nonexistent"
				if (err != nil && spec.Argv[0] != "/nonexistent") || bad {
					errs <- spec.Argv[0] + ": " + brief(res)
				}
			}
		}()
	}
	start := time.Now()
	for i := 0; i < runs; i++ {
		work <- specs[i%len(specs)]
	}
	close(work)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("run failed: %s", e)
	}
	t.Logf("%d runs in %s (%.0f runs/s)", runs, time.Since(start), float64(runs)/time.Since(start).Seconds())

	assertNoSurvivors(t, marker)
	// Cgroups are removed in the background after the run; give that a moment. What
	// stays are the spares made for the next calls (spares_linux.go), nothing ever ran
	// in them: empty, and never more than the refill makes.
	var left []string
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		spares := s.cg.spareDirs()
		left = slices.DeleteFunc(ourCgroups(s), func(d string) bool { return slices.Contains(spares, d) })
		if len(left) == 0 {
			if n := len(spares); n > spareTarget*len(s.cg.ownDirs()) {
				t.Errorf("%d spare cgroup dirs, more than the %d a refill makes", n, spareTarget*len(s.cg.ownDirs()))
			}
			for _, d := range spares {
				if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err != nil || len(strings.TrimSpace(string(b))) > 0 {
					t.Errorf("spare cgroup %s has processes %q (%v)", d, b, err)
				}
			}
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("cgroups left behind: %v", left)
	}
	if after := mountPoints(t); !equalStrings(after, mountsBefore) {
		t.Errorf("host mounts changed: before %d, after %d", len(mountsBefore), len(after))
	}
	if s.ll != nil {
		// The Landlock tier's run mounts (runDirs) are this server's under its base,
		// and go with each run.
		var ours []string
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if ours = runMounts(t, s.ll.base); len(ours) == 0 {
				break
			}
		}
		if len(ours) > 0 {
			t.Errorf("run mounts left behind: %v", ours)
		}
		s.Wait()
		if dirs, _ := os.ReadDir(s.ll.base); len(dirs) > 0 {
			var names []string
			for _, d := range dirs {
				names = append(names, d.Name())
			}
			t.Errorf("run directories left behind in %s: %v", s.ll.base, names)
		}
	}
	// The engine makes no host temp files; anything new owned by the sandbox's host
	// uid would be a sandbox writing to the host. (Other suites may share /tmp.)
	for e := range tmpEntries() {
		var st syscall.Stat_t
		if !tmpBefore[e] && syscall.Lstat(filepath.Join(os.TempDir(), e), &st) == nil && s.ids.owns(st.Uid) && isRoot() {
			t.Errorf("temp entry left behind by a sandbox: /tmp/%s", e)
		}
	}
	var fdsAfter int
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		runtime.GC()
		if fdsAfter = countFDs(t); fdsAfter <= fdsBefore {
			break
		}
	}
	if fdsAfter > fdsBefore {
		t.Errorf("descriptors leaked: %d before, %d after: %v", fdsBefore, fdsAfter, fdTargets())
	}
	// Every run's goroutines (output and report readers, the spawner's waiter, the
	// teardown) end with it.
	s.Wait()
	var goroutinesAfter int
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if goroutinesAfter = runtime.NumGoroutine(); goroutinesAfter <= goroutinesBefore {
			break
		}
	}
	if goroutinesAfter > goroutinesBefore {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines leaked: %d before, %d after:\n%s", goroutinesBefore, goroutinesAfter, buf[:runtime.Stack(buf, true)])
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func fdTargets() []string {
	ents, _ := os.ReadDir("/proc/self/fd")
	var out []string
	for _, e := range ents {
		l, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		out = append(out, e.Name()+"->"+l)
	}
	return out
}

// engineMounts are where container engines on this host mount for their containers,
// which come and go while the suite runs (an overlay, a /dev/shm and a network
// namespace per podman container). The sandbox engine never mounts there.
var engineMounts = []string{"/var/lib/containers/", "/run/containers/", "/run/netns/", "/var/lib/docker/", "/run/docker/"}

// mountPoints lists the mount points of the test's own mount namespace, but for those
// of container engines.
func mountPoints(t *testing.T) []string {
	t.Helper()
	// The Landlock tier's run mounts, of any server on the host in that tier, root's
	// too when this one is not (a root server's runs in flight, as an unprivileged
	// suite sees them): TestNoLeftovers checks this server's own (runMounts).
	skip := []string{lockDir() + "-runs/", "/run/airlock-runs/"}
	if s := testSandbox(t); s.ll != nil {
		skip = append(skip, filepath.Dir(s.ll.base)+"/")
	}
	var out []string
	for _, m := range runMounts(t, "") {
		if !slices.ContainsFunc(append(skip, engineMounts...), func(p string) bool { return strings.HasPrefix(m, p) }) {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

// runMounts lists the mount points below dir ("": all of them).
func runMounts(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (dir == "" || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

func tmpEntries() map[string]bool {
	ents, _ := os.ReadDir(os.TempDir())
	m := map[string]bool{}
	for _, e := range ents {
		m[e.Name()] = true
	}
	return m
}

// ourCgroups lists the sandbox cgroups of this process still present.
func ourCgroups(s *Sandbox) []string {
	var bases []string
	switch s.cg.version {
	case 1:
		for _, b := range s.cg.v1 {
			bases = append(bases, b)
		}
	case 2:
		bases = append(bases, s.cg.v2)
	}
	prefix := strconv.Itoa(os.Getpid()) + "-"
	var out []string
	for _, b := range bases {
		ents, _ := os.ReadDir(b)
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
				out = append(out, filepath.Join(b, e.Name()))
			}
		}
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestUnprivileged runs this whole suite again as nobody, with no capabilities and no
// cgroups (v1 needs root), where memory and process limits fall back to rlimits.
func TestUnprivileged(t *testing.T) {
	recordTier(t)
	run := ""
	if f := flagValue("test.run"); f != "" && f != "TestUnprivileged" {
		run = f
	}
	runAsNobody(t, "TestUnprivileged", run, "--inh-caps=-all", "--bounding-set=-all")
}

// runAsNobody runs this test binary again as nobody (the tests matching run, all when
// empty) with setpriv's extra arguments, and fails if that run fails.
func runAsNobody(t *testing.T, name, run string, extra ...string) {
	t.Helper()
	if os.Getenv("AIRLOCK_UNPRIV_CHILD") == "1" {
		t.Skip("this is the unprivileged run itself")
	}
	if !isRoot() {
		t.Skip("already unprivileged: this run is the unprivileged suite")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux) is needed to drop to nobody: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A directory nobody can reach: the go test build dir is root's and mode 0700.
	dir, err := os.MkdirTemp("", "unpriv-suite-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "linux.test")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--reuid=nobody", "--regid=nogroup", "--clear-groups"}, extra...)
	args = append(args, bin, "-test.count=1", "-test.timeout=120s", "-test.v", "-test.short")
	if run != "" {
		args = append(args, "-test.run="+run)
	}
	cmd := exec.Command(setpriv, args...)
	cmd.Dir = dir
	cmd.Env = []string{"AIRLOCK_UNPRIV_CHILD=1", "HOME=" + dir, "TMPDIR=/tmp", "PATH=/usr/bin:/bin", "AIRLOCK_TEST_ISOLATION=" + testTier(),
		"AIRLOCK_REQUIRE_SANDBOX=" + os.Getenv("AIRLOCK_REQUIRE_SANDBOX")}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	t.Logf("%s as nobody took %s", name, time.Since(start))
	if bytes.Contains(out.Bytes(), []byte("SKIPPING: THIS KERNEL")) {
		sandboxtest.Require(t, fmt.Errorf("%w: not for an unprivileged user on this host:\n%s", sandbox.ErrUnavailable, out.Bytes()))
	}
	if err != nil || !bytes.Contains(out.Bytes(), []byte("\nPASS\n")) {
		t.Fatalf("%s fails as an unprivileged user (%v):\n%s", name, err, out.Bytes())
	}
	if testing.Verbose() {
		t.Logf("%s:\n%s", name, out.Bytes())
	}
}

func flagValue(name string) string {
	for i, a := range os.Args {
		for _, p := range []string{"-" + name + "=", "--" + name + "="} {
			if strings.HasPrefix(a, p) {
				return strings.TrimPrefix(a, p)
			}
		}
		if (a == "-"+name || a == "--"+name) && i+1 < len(os.Args) {
			return os.Args[i+1]
		}
	}
	return ""
}

// TestSignalDispositionsAreFresh: signals the server ignores (a nohup'd server ignores
// SIGHUP) stay ignored across fork and exec unless someone resets them. The program must
// start with every signal at its default action and none blocked, or it could not be
// interrupted the way its author expects.
// Not parallel: it changes the test process's own dispositions while it runs.
func TestSignalDispositionsAreFresh(t *testing.T) {
	signal.Ignore(syscall.SIGHUP, syscall.SIGUSR2, syscall.SIGTERM)
	defer signal.Reset(syscall.SIGHUP, syscall.SIGUSR2, syscall.SIGTERM)
	needProc(t)
	res := run(t, sandbox.Spec{Argv: []string{"/bin/cat", "/proc/self/status"}})
	if res.Status != sandbox.StatusOK {
		t.Fatalf("%s", brief(res))
	}
	status := string(res.Stdout.Bytes())
	for _, field := range []string{"SigIgn", "SigBlk"} {
		m := regexp.MustCompile(`(?m)^` + field + `:\s*([0-9a-f]+)$`).FindStringSubmatch(status)
		if m == nil {
			t.Fatalf("no %s in /proc/self/status: %q", field, status)
		}
		if strings.Trim(m[1], "0") != "" {
			t.Errorf("the program starts with %s %s, want none", field, m[1])
		}
	}
}

// The program may run on every CPU the server may: the init starts the thread that
// creates the network namespace on the CPUs it is not on itself (start_net), and that
// pin is the thread's alone, lifted before it is joined.
func TestProgramKeepsEveryCPU(t *testing.T) {
	needProc(t)
	var want unix.CPUSet
	if err := unix.SchedGetaffinity(0, &want); err != nil {
		t.Fatal(err)
	}
	var cpus []string
	for c := 0; c < 1024; c++ {
		if want.IsSet(c) {
			cpus = append(cpus, strconv.Itoa(c))
		}
	}
	// Two runs in flight, so the second starts its thread while the first's init holds
	// a CPU.
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := run(t, sandbox.Spec{Argv: []string{"/usr/bin/python3", "-c", "import os; print(*sorted(os.sched_getaffinity(0)))"}})
			if res.Status != sandbox.StatusOK {
				t.Errorf("%s", brief(res))
				return
			}
			if got := strings.TrimSpace(string(res.Stdout.Bytes())); got != strings.Join(cpus, " ") {
				t.Errorf("the program may run on CPUs %q, want %q", got, strings.Join(cpus, " "))
			}
		}()
	}
	wg.Wait()
}

// Each Sandbox keeps its sandboxes' cgroups in a dir of its own, not shared with other
// servers on the host, and removes it when it closes.
func TestCgroupDirPerServer(t *testing.T) {
	a, err := New(sandbox.Options{})
	sandboxtest.Require(t, err)
	b, err := New(sandbox.Options{})
	sandboxtest.Require(t, err)
	if a.cg.version == 0 {
		a.Close()
		b.Close()
		t.Skipf("SKIPPING: no cgroups here: %s", a.cg.reason)
	}
	own := func(s *Sandbox) []string { return s.cg.ownDirs() }
	for _, d := range own(a) {
		if slices.Contains(own(b), d) {
			t.Errorf("two Sandboxes share the cgroup dir %s", d)
		}
		if filepath.Base(filepath.Dir(d)) != cgroupDir {
			t.Errorf("own dir %s is not in an %s dir", d, cgroupDir)
		}
	}
	if res, err := a.Run(t.Context(), withDefaults(sandbox.Spec{Argv: []string{"/bin/true"}})); err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("%v %s", err, brief(res))
	}
	dirs := own(a)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after Close, %s: %v (want it gone)", d, err)
		}
	}
	for _, d := range own(b) {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("closing one Sandbox touched the other's dir: %v", err)
		}
	}
	// A closed Sandbox still runs (Close drains the pool; the next call starts afresh),
	// in its own dirs again, and its next Close removes them again.
	if res, err := a.Run(t.Context(), withDefaults(sandbox.Spec{Argv: []string{"/bin/true"}})); err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("after Close: %v %s", err, brief(res))
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("a run after Close: %v", err)
		}
	}
	a.Close()
	b.Close()
	for _, d := range append(dirs, own(b)...) {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after the last Close, %s: %v (want it gone)", d, err)
		}
	}
}
