package linux

import (
	"context"
	"errors"
	"github.com/airlock-mcp/airlock/internal/sandboxtest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/sandbox"
	sessions "github.com/airlock-mcp/airlock/session"
)

// sessionSpec is a session of lang with the real interpreter and its driver.
func sessionSpec(t testing.TB, lang string) sandbox.Spec {
	t.Helper()
	code, ok := policy.SessionDriver(lang)
	if !ok {
		t.Fatalf("no driver for %s", lang)
	}
	spec := sandbox.Spec{Language: lang, Code: code}
	switch lang {
	case "python":
		spec.Argv, spec.CodeFile = []string{python, "-I", "-S", "main.py"}, "main.py"
	case "javascript":
		spec.Argv, spec.CodeFile = []string{"/usr/bin/node", "main.js"}, "main.js"
		spec.Limits.AddressSpace = 8 << 30
	case "bash":
		spec.Argv, spec.CodeFile = []string{"/bin/bash", "main.sh"}, "main.sh"
	}
	return spec
}

func openSession(t *testing.T, spec sandbox.Spec) sandbox.Session {
	t.Helper()
	s := testSandbox(t)
	needSessions(t, s)
	ss, err := s.OpenSession(context.Background(), withDefaults(spec))
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	t.Cleanup(ss.Close)
	return ss
}

// needSessions skips where sessions are refused by design: a server without cgroups (an
// unprivileged one on a cgroup v1 host, as in TestUnprivileged), which
// TestSessionRefusedWithoutCgroups covers. With root, cgroups are there or the host
// lacks them, which AIRLOCK_REQUIRE_SANDBOX=1 makes a failure.
func needSessions(t *testing.T, s *Sandbox) {
	t.Helper()
	err := s.sessionUnavailable()
	if err != nil && s.cg.version == 0 {
		// A session is one cgroup for its whole life: an unprivileged server without
		// delegated cgroups, or a container with a read-only cgroupfs, has none, and
		// refuses sessions (TestSessionRefusedWithoutCgroups checks how).
		t.Skipf("SKIPPING: NO USABLE CGROUPS HERE (%s), SO NO SESSIONS: %v", s.cg.reason, err)
	}
	sandboxtest.Require(t, err)
}

// Without cgroups, sessions are refused with the cause and the fix; single-use calls
// still run.
func TestSessionRefusedWithoutCgroups(t *testing.T) {
	testSandbox(t)
	s, err := New(sandbox.Options{Cgroups: "off"})
	sandboxtest.Require(t, err)
	defer s.Close()
	_, err = s.OpenSession(context.Background(), withDefaults(sessionSpec(t, "python")))
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "sessions need cgroups") {
		t.Fatalf("a session without cgroups: %v", err)
	}
	if res, err := s.Run(context.Background(), withDefaults(pySpec("print(1)", newMarker()))); err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("a single-use call without cgroups: %v %s", err, brief(res))
	}
}

// call runs code in ss with a 10 s wall limit (or wall, when given).
func call(t *testing.T, ss sandbox.Session, code string, wall ...time.Duration) sandbox.Result {
	t.Helper()
	lim := sandbox.Limits{Wall: 10 * time.Second}
	if len(wall) > 0 {
		lim.Wall = wall[0]
	}
	res, err := ss.Call(context.Background(), sandbox.SessionCall{Code: []byte(code), Limits: filled(lim)})
	if err != nil {
		t.Fatalf("Call %q: %v", code, err)
	}
	return res
}

func wantOut(t *testing.T, res sandbox.Result, status sandbox.Status, stdout string) {
	t.Helper()
	if res.Status != status || strings.TrimSpace(string(res.Stdout.Bytes())) != stdout {
		t.Fatalf("want %s with stdout %q, got %s", status, stdout, brief(res))
	}
}

func TestSessionKeepsStateAndFiles(t *testing.T) {
	cases := map[string][3]string{
		"python":     {"x = 41\nopen('kept.txt', 'w').write('hi')", "print(x + 1)", "print(open('kept.txt').read())"},
		"javascript": {"var x = 41; require('fs').writeFileSync('kept.txt', 'hi')", "console.log(x + 1)", "console.log(require('fs').readFileSync('kept.txt', 'utf8'))"},
		"bash":       {"x=41; mkdir d; cd d; echo hi > ../kept.txt", "echo $((x + 1))", "cat ../kept.txt"},
	}
	for lang, c := range cases {
		t.Run(lang, func(t *testing.T) {
			ss := openSession(t, sessionSpec(t, lang))
			wantOut(t, call(t, ss, c[0]), sandbox.StatusOK, "")
			wantOut(t, call(t, ss, c[1]), sandbox.StatusOK, "42")
			wantOut(t, call(t, ss, c[2]), sandbox.StatusOK, "hi")
			// Each call has its own streams and status.
			res := call(t, ss, map[string]string{"python": "import sys; print('e', file=sys.stderr); sys.exit(3)",
				"javascript": "console.error('e'); process.exitCode = 3", "bash": "echo e >&2; (exit 3)"}[lang])
			if res.Status != sandbox.StatusError || res.ExitCode != 3 || strings.TrimSpace(string(res.Stderr.Bytes())) != "e" || res.Stdout.Total != 0 {
				t.Fatalf("want error 3 with stderr e: %s", brief(res))
			}
			wantOut(t, call(t, ss, c[1]), sandbox.StatusOK, "42")
		})
	}
}

// A call's timeout interrupts it; the interpreter recovers and keeps its state.
func TestSessionTimeoutInterrupts(t *testing.T) {
	cases := map[string][3]string{
		"python":     {"x = 41", "while True: pass", "print(x + 1)"},
		"javascript": {"var x = 41", "while (true) {}", "console.log(x + 1)"},
		"bash":       {"x=41", "while :; do :; done", "echo $((x + 1))"},
	}
	for lang, c := range cases {
		t.Run(lang, func(t *testing.T) {
			ss := openSession(t, sessionSpec(t, lang))
			call(t, ss, c[0])
			res := call(t, ss, c[1], time.Second)
			if res.Status != sandbox.StatusTimeout || res.Restarted {
				t.Fatalf("want a timeout the interpreter survived: %s restarted=%v", brief(res), res.Restarted)
			}
			if res.Wall > time.Second+sandbox.SessionInterruptGrace {
				t.Fatalf("the interrupted call took %s", res.Wall)
			}
			wantOut(t, call(t, ss, c[2]), sandbox.StatusOK, "42")
		})
	}
}

// A call that ignores the interrupt is killed with the rest of the session's
// processes; the driver restarts with the workspace kept.
func TestSessionKillRestartsKeepingFiles(t *testing.T) {
	ss := openSession(t, sessionSpec(t, "python"))
	call(t, ss, "x = 41\nopen('kept.txt', 'w').write('hi')")
	res := call(t, ss, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass", time.Second)
	if res.Status != sandbox.StatusTimeout || !res.Restarted {
		t.Fatalf("want a timeout with a restart: %s restarted=%v", brief(res), res.Restarted)
	}
	wantOut(t, call(t, ss, "print(open('kept.txt').read(), 'x' in globals())"), sandbox.StatusOK, "hi False")
	// The code's own exit restarts the interpreter too, and says so.
	res = call(t, ss, "import os; os._exit(7)")
	if res.Status != sandbox.StatusError || res.ExitCode != 7 || !res.Restarted {
		t.Fatalf("want exit 7 with a restart: %s restarted=%v", brief(res), res.Restarted)
	}
	wantOut(t, call(t, ss, "print(1)"), sandbox.StatusOK, "1")
}

// The CPU limit is per call, measured from outside.
func TestSessionCPULimitPerCall(t *testing.T) {
	ss := openSession(t, sessionSpec(t, "python"))
	lim := sandbox.Limits{Wall: 20 * time.Second, CPU: 500 * time.Millisecond}
	res, err := ss.Call(context.Background(), sandbox.SessionCall{Code: []byte("while True: pass"), Limits: filled(lim)})
	if err != nil || res.Status != sandbox.StatusTimeout || res.Wall > 5*time.Second {
		t.Fatalf("want a CPU timeout well before the wall limit: %v %s", err, brief(res))
	}
	// The next call starts a fresh count.
	res, err = ss.Call(context.Background(), sandbox.SessionCall{Code: []byte("sum(range(10**6)); print('ok')"), Limits: filled(lim)})
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("want ok: %v %s", err, brief(res))
	}
}

// A call's CPU time counts the children it never waits for (SIGCHLD ignored: reaped at
// once, their times in no rusage). On cgroup v1 the server summed the session's
// processes' times, which missed them: 2.5 s of CPU counted as 160 ms, and such a call
// ran to its wall-clock limit.
func TestSessionCPULimitUnwaitedChildren(t *testing.T) {
	ss := openSession(t, sessionSpec(t, "python"))
	lim := sandbox.Limits{Wall: 15 * time.Second, CPU: time.Second}
	res, err := ss.Call(context.Background(), sandbox.SessionCall{Code: []byte(unwaitedSpinners), Limits: filled(lim)})
	if err != nil || res.Status != sandbox.StatusTimeout || !strings.Contains(res.Detail, "CPU-time limit") {
		t.Fatalf("want the CPU-time limit to end the call (wall 15 s): %v %s", err, brief(res))
	}
	if res.CPU < 900*time.Millisecond {
		t.Errorf("reported %s of CPU for a call stopped at its CPU-time limit of 1s", res.CPU)
	}
	t.Logf("unwaited spinners in a session: %s, cpu %s, wall %s", res.Detail, res.CPU, res.Wall)
}

// Output past the flood ceiling kills the call's processes, not the server's memory.
func TestSessionOutputFlood(t *testing.T) {
	ss := openSession(t, sessionSpec(t, "python"))
	lim := sandbox.Limits{Wall: 20 * time.Second, Output: 4 << 10}
	res, err := ss.Call(context.Background(), sandbox.SessionCall{Code: []byte("import sys\nwhile True: sys.stdout.write('x' * 65536)"), Limits: filled(lim)})
	if err != nil || res.Status != sandbox.StatusOutputLimit || !res.Restarted || int64(len(res.Stdout.Bytes())) > 4<<10 {
		t.Fatalf("want output_limit with a restart and 4 KiB kept: %v %s", err, brief(res))
	}
	wantOut(t, call(t, ss, "print(1)"), sandbox.StatusOK, "1")
}

// A daemon forked in a session lives while the session does and dies with it; after
// Close nothing of the session is left: no process, no cgroup.
func TestSessionDaemonLivesWithSession(t *testing.T) {
	s := testSandbox(t)
	ss := openSession(t, sessionSpec(t, "python"))
	marker := newMarker()
	res := call(t, ss, "import subprocess\nsubprocess.Popen(['/usr/bin/python3', '-c', 'import time; time.sleep(300)', '"+marker+"'], start_new_session=True)\nprint('started')")
	wantOut(t, res, sandbox.StatusOK, "started")
	waitHostProc(t, marker, 5*time.Second)
	call(t, ss, "x = 1")
	if len(hostProcsWith(marker)) == 0 {
		t.Fatal("the daemon died between calls")
	}
	cg := ss.(*session).l.cg
	ss.Close()
	s.Wait()
	assertNoSurvivors(t, marker)
	for _, d := range append([]string{cg.dir}, mapValues(cg.dirs)...) {
		if d == "" {
			continue
		}
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("the session's cgroup %s is left: %v", d, err)
		}
	}
	if _, err := ss.Call(context.Background(), sandbox.SessionCall{Code: []byte("print(1)")}); !errors.Is(err, sandbox.ErrSessionEnded) {
		t.Fatalf("a closed session took a call: %v", err)
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// The session's memory limit holds across calls; an OOM kill restarts the driver with
// the files kept.
func TestSessionMemoryKillRestarts(t *testing.T) {
	spec := sessionSpec(t, "python")
	spec.Limits.Memory = 128 << 20
	ss := openSession(t, spec)
	call(t, ss, "open('kept.txt', 'w').write('hi')\nkeep = bytearray(40 << 20)")
	res := call(t, ss, "more = [bytearray(16 << 20) for _ in range(64)]")
	if res.Status != sandbox.StatusMemoryLimit {
		t.Fatalf("want memory_limit: %s restarted=%v", brief(res), res.Restarted)
	}
	wantOut(t, call(t, ss, "print(open('kept.txt').read())"), sandbox.StatusOK, "hi")
}

// An idle session expires (idle_ttl, short here) and leaves nothing on the host: no
// process, no cgroup, no mount, no file.
func TestSessionIdleExpiryLeavesNothing(t *testing.T) {
	s := testSandbox(t)
	needSessions(t, s)
	mountsBefore := hostMounts(t)
	m := sessions.New(sessions.Limits{IdleTTL: 300 * time.Millisecond, MaxLifetime: time.Hour, MaxPerClient: 4, MaxTotal: 16}, nil)
	t.Cleanup(m.Close)
	marker := newMarker()
	var ss sandbox.Session
	h, err := m.Open("owner", "python", nil, func(string) (sandbox.Session, error) {
		var err error
		ss, err = s.OpenSession(context.Background(), withDefaults(sessionSpec(t, "python")))
		return ss, err
	})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	res := call(t, ss, "import subprocess\nopen('"+marker+"', 'w').write('x')\n"+
		"subprocess.Popen(['/usr/bin/python3', '-c', 'import time; time.sleep(300)', '"+marker+"'], start_new_session=True)")
	wantOut(t, res, sandbox.StatusOK, "")
	m.Release(h, false)
	waitHostProc(t, marker, 5*time.Second)
	cg := ss.(*session).l.cg
	select {
	case <-ss.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the idle session did not expire")
	}
	s.Wait()
	assertNoSurvivors(t, marker)
	for _, d := range append([]string{cg.dir}, mapValues(cg.dirs)...) {
		if _, err := os.Stat(d); d != "" && !os.IsNotExist(err) {
			t.Fatalf("the expired session's cgroup %s is left: %v", d, err)
		}
	}
	if after := hostMounts(t); after > mountsBefore {
		t.Fatalf("the host has %d mounts after the session, %d before", after, mountsBefore)
	}
	for _, dir := range []string{os.TempDir(), "/tmp", "/var/tmp", "/dev/shm"} {
		_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
			if err == nil && strings.Contains(e.Name(), marker) {
				t.Errorf("the session's file is on the host: %s", p)
			}
			return nil
		})
	}
	if _, err := m.Acquire("owner", h.ID); !errors.Is(err, sessions.ErrUnknown) {
		t.Fatalf("an expired session's id: %v", err)
	}
}

func hostMounts(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// A child the call forks that runs off the end of the code exits there, as at the end
// of a script: it does not become a second worker reading the session's calls.
func TestSessionForkedChildExits(t *testing.T) {
	ss := openSession(t, sessionSpec(t, "python"))
	res := call(t, ss, "import os, time\nif os.fork() == 0:\n    print('child')\nelse:\n    os.wait()\n    print('parent')")
	if res.Status != sandbox.StatusOK || strings.Count(string(res.Stdout.Bytes()), "child") != 1 {
		t.Fatalf("fork: %s", brief(res))
	}
	for i := 0; i < 5; i++ {
		wantOut(t, call(t, ss, "import os\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]))"), sandbox.StatusOK, "3")
	}
}

// A fork bomb of copies of the worker meets the session's memory and pids limits: the
// kernel kills the call's processes, never the supervisor, and the session goes on.
func TestSessionForkBombKeepsSession(t *testing.T) {
	spec := sessionSpec(t, "python")
	spec.Limits.Memory = 128 << 20
	ss := openSession(t, spec)
	call(t, ss, "open('kept.txt', 'w').write('hi')")
	for i := 0; i < 4; i++ {
		res := call(t, ss, "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass", time.Second)
		if res.Status != sandbox.StatusTimeout && res.Status != sandbox.StatusMemoryLimit {
			t.Fatalf("fork bomb: %s", brief(res))
		}
		select {
		case <-ss.Done():
			t.Fatalf("the session ended at fork bomb %d: %s", i, brief(res))
		default:
		}
	}
	wantOut(t, call(t, ss, "print(open('kept.txt').read())"), sandbox.StatusOK, "hi")
}

// A timed-out call leaves no process that goes on, even when the interpreter recovers:
// a fork bomb's children are gone before the next call.
func TestSessionTimeoutLeavesNoProcess(t *testing.T) {
	ss := openSession(t, sessionSpec(t, "python"))
	call(t, ss, "x = 41")
	res := call(t, ss, "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass", time.Second)
	if res.Status != sandbox.StatusTimeout {
		t.Fatalf("fork bomb: %s", brief(res))
	}
	for i := 0; i < 3; i++ {
		res := call(t, ss, "import os, time\ntime.sleep(0.2)\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]))")
		wantOut(t, res, sandbox.StatusOK, "3")
		if res.Stderr.Total != 0 {
			t.Fatalf("stderr from earlier processes: %s", brief(res))
		}
	}
}

// The warm pool serves the first call of a new session: the session's sandbox is a
// prepared one (its interpreter already loaded), and it works like a cold one.
func TestSessionFromWarmPool(t *testing.T) {
	langs := poolLanguages(t)
	s := testSandbox(t)
	needSessions(t, s)
	limits := filled(sandbox.Limits{Wall: 10 * time.Second, Memory: 256 << 20, Pids: 32, Output: 1 << 20})
	var templates []sandbox.Spec
	for _, l := range langs {
		templates = append(templates, l.Spec(nil, nil, limits, policy.BoundByRlimit))
	}
	s.Warm(templates, 1)
	t.Cleanup(func() { s.Close() })
	for _, name := range []string{"python", "javascript", "bash"} {
		deadline := time.Now().Add(20 * time.Second)
		for s.PoolStats().Ready < len(templates) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		hits := s.PoolStats().Hits
		driver, _ := policy.SessionDriver(name)
		ss, err := s.OpenSession(context.Background(), langs[name].Spec(driver, nil, limits, policy.BoundByRlimit))
		if err != nil {
			t.Fatalf("%s: OpenSession: %v", name, err)
		}
		if got := s.PoolStats().Hits; got != hits+1 {
			ss.Close()
			t.Fatalf("%s: the session was not served by the pool (hits %d -> %d)", name, hits, got)
		}
		code := map[string][2]string{"python": {"x = 41", "print(x + 1)"}, "javascript": {"var x = 41", "console.log(x + 1)"},
			"bash": {"x=41", "echo $((x + 1))"}}[name]
		call(t, ss, code[0])
		wantOut(t, call(t, ss, code[1]), sandbox.StatusOK, "42")
		ss.Close()
	}
}

// BenchmarkSessionCall is one call in an open python session, against
// BenchmarkSingleUseCall, the same program in a fresh (cold) sandbox.
func BenchmarkSessionCall(b *testing.B) {
	s := benchSandbox(b)
	if err := s.sessionUnavailable(); err != nil {
		b.Skip(err)
	}
	code, _ := policy.SessionDriver("python")
	ss, err := s.OpenSession(context.Background(), withDefaults(sandbox.Spec{Language: "python", Code: code,
		Argv: []string{python, "-I", "-S", "main.py"}, CodeFile: "main.py"}))
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := ss.Call(context.Background(), sandbox.SessionCall{Code: []byte("print(1)"), Limits: filled(sandbox.Limits{Wall: 10 * time.Second})})
		if err != nil || res.Status != sandbox.StatusOK {
			b.Fatalf("%v %s", err, brief(res))
		}
	}
}

func BenchmarkSingleUseCall(b *testing.B) {
	s := benchSandbox(b)
	for i := 0; i < b.N; i++ {
		res, err := s.Run(context.Background(), sandbox.Spec{Argv: []string{python, "-I", "-S", "-c", "print(1)"}})
		if err != nil || res.Status != sandbox.StatusOK {
			b.Fatalf("%v %s", err, brief(res))
		}
	}
}

// A call's stdin larger than a pipe's buffer arrives whole, and the next call is
// framed correctly after it.
func TestSessionLargeStdin(t *testing.T) {
	ss := openSession(t, sessionSpec(t, "python"))
	in := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	res, err := ss.Call(context.Background(), sandbox.SessionCall{Code: []byte("import sys, hashlib\nprint(len(sys.stdin.read()))"),
		Stdin: []byte(in), Limits: filled(sandbox.Limits{Wall: 20 * time.Second})})
	if err != nil {
		t.Fatal(err)
	}
	wantOut(t, res, sandbox.StatusOK, "1048576")
	wantOut(t, call(t, ss, "print('next')"), sandbox.StatusOK, "next")
}

// The session's CPU rlimit bounds its interpreter's CPU time over all calls: past it,
// the interpreter is restarted and the call says why.
func TestSessionCPUBudgetRestarts(t *testing.T) {
	spec := sessionSpec(t, "python")
	spec.Limits.CPU = time.Second
	ss := openSession(t, spec)
	call(t, ss, "open('kept.txt', 'w').write('hi')")
	lim := sandbox.Limits{Wall: 30 * time.Second, CPU: 20 * time.Second}
	res, err := ss.Call(context.Background(), sandbox.SessionCall{Code: []byte("while True: pass"), Limits: filled(lim)})
	if err != nil || res.Status != sandbox.StatusTimeout || !res.Restarted || !strings.Contains(res.Detail, "CPU-time budget") {
		t.Fatalf("want a timeout at the session's CPU budget with a restart: %v %s restarted=%v", err, brief(res), res.Restarted)
	}
	wantOut(t, call(t, ss, "print(open('kept.txt').read())"), sandbox.StatusOK, "hi")
}

// filled is l with every limit the test leaves out at its default, as policy fills a call's.
func filled(l sandbox.Limits) sandbox.Limits { return withDefaults(sandbox.Spec{Limits: l}).Limits }

// inCgroup matches a process's cgroup line to the session's dir whether or not the
// server's cgroup namespace is rooted where the hierarchy is mounted, and nothing else.
func TestInCgroup(t *testing.T) {
	const v1 = "/sys/fs/cgroup/pids/airlock/701.1/session-9f3c"
	const v2 = "/sys/fs/cgroup/unified/airlock/701.1/session-9f3c"
	cases := []struct {
		name, text, dir, ctrl string
		want                  bool
	}{
		{"v1 own namespace", "5:pids:/airlock/701.1/session-9f3c\n4:memory:/x", v1, "pids", true},
		{"v1 container sharing the host's namespace", "5:pids:/libpod_parent/libpod-ab/airlock/701.1/session-9f3c", v1, "pids", true},
		{"v1 co-mounted controllers", "3:cpu,pids:/airlock/701.1/session-9f3c", v1, "pids", true},
		{"v1 another controller's line only", "4:memory:/airlock/701.1/session-9f3c", v1, "pids", false},
		{"v1 another sandbox", "5:pids:/airlock/701.1/session-aaaa", v1, "pids", false},
		{"v1 another server's sandbox of that id", "5:pids:/airlock/702.1/session-9f3c", v1, "pids", false},
		{"v1 a child of the session's cgroup", "5:pids:/airlock/701.1/session-9f3c/x", v1, "pids", false},
		{"v1 a name ending alike", "5:pids:/airlock/9701.1/session-9f3c", v1, "pids", false},
		{"v2", "0::/airlock/701.1/session-9f3c", v2, "", true},
		{"v2 container", "0::/machine.slice/libpod-ab/airlock/701.1/session-9f3c", v2, "", true},
		{"v2 another sandbox", "0::/airlock/701.1/session-9f3d", v2, "", false},
		{"empty", "", v2, "", false},
	}
	for _, c := range cases {
		if got := inCgroup(c.text, c.dir, c.ctrl); got != c.want {
			t.Errorf("%s: inCgroup(%q, %q, %q) = %v, want %v", c.name, c.text, c.dir, c.ctrl, got, c.want)
		}
	}
}
