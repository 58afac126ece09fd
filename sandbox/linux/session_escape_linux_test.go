package linux

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

// The engine's key escape attempts, run as the second call of a session: a session
// must not be a way around any guarantee of the single-use sandbox. (The first call
// leaves state behind on purpose: a thread, a child, a changed cwd.)
func TestSessionSecondCallEscapes(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("host-secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	sleeper := startHostSleeper(t)
	ss := openSession(t, sessionSpec(t, "python"))
	first := "import os, threading, subprocess, time\n" +
		"threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n" +
		"child = subprocess.Popen(['/usr/bin/python3', '-c', 'import time; time.sleep(60)'])\n" +
		"os.chdir('/tmp')"
	wantOut(t, call(t, ss, first), sandbox.StatusOK, "")
	probe := `
import ctypes, errno, json, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    return "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
def tryit(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
out = {
    "mount": sc(165, 0x10, 0x10, 0x10, 0, 0),
    "unshare-user": sc(272, 0x10000000),
    "setns": sc(308, -1, 0),
    "ptrace-attach": sc(101, 16, 1, 0, 0),
    "bpf": sc(321, 5, 0x10, 8),
    "host-secret": tryit(lambda: open(%q).read()),
    "write-etc": tryit(lambda: open("/etc/airlock-escape", "w")),
    "write-usr": tryit(lambda: open("/usr/airlock-escape", "w")),
    "kill-host-sleeper": tryit(lambda: os.kill(%d, 0)),
    "connect": tryit(lambda: socket.create_connection(("1.1.1.1", 53), timeout=2)),
    "uid": os.getuid(),
    "capeff": [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0],
    "fds": sorted(int(x) for x in os.listdir("/proc/self/fd")),
}
print(json.dumps(out))
`
	probe = strings.Replace(strings.Replace(probe, "%q", strconv.Quote(secret), 1), "%d", strconv.Itoa(sleeper), 1)
	res := call(t, ss, probe)
	if res.Status != sandbox.StatusOK {
		t.Fatalf("probe: %s", brief(res))
	}
	var got map[string]any
	if err := json.Unmarshal(res.Stdout.Bytes(), &got); err != nil {
		t.Fatalf("probe output: %v: %s", err, brief(res))
	}
	want := map[string]any{
		"mount": "EPERM", "unshare-user": "EPERM", "setns": "EPERM", "ptrace-attach": "ENOSYS", "bpf": "EPERM",
		"host-secret": "ENOENT", "write-etc": "EROFS", "write-usr": "EROFS", "kill-host-sleeper": "ESRCH",
		"connect": "EAFNOSUPPORT", "uid": float64(sandboxUID), "capeff": "0000000000000000",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("second call: %s = %v, want %v", k, got[k], v)
		}
	}
	// The worker's control pipe is its own (a call can read it only to break its own
	// session); nothing of the server's is open: 0-2, the control pipe, the listing's.
	if fds, _ := got["fds"].([]any); len(fds) > 5 {
		t.Errorf("the second call sees descriptors %v", fds)
	}
}

// Two sessions at once see nothing of each other: not the other's files, processes,
// or variables; and a single-use call sees neither.
func TestSessionsIsolatedFromEachOther(t *testing.T) {
	a := openSession(t, sessionSpec(t, "python"))
	b := openSession(t, sessionSpec(t, "python"))
	marker := newMarker()
	wantOut(t, call(t, a, "import os, subprocess\nsecret = 'a-only'\nopen('a.txt', 'w').write('a')\n"+
		"p = subprocess.Popen(['/usr/bin/python3', '-c', 'import time; time.sleep(60)', '"+marker+"'])\nprint(p.pid)"), sandbox.StatusOK,
		strings.TrimSpace(string(call(t, a, "print(p.pid)").Stdout.Bytes())))
	pidInA := strings.TrimSpace(string(call(t, a, "print(p.pid)").Stdout.Bytes()))
	res := call(t, b, "import os, json\n"+
		"print(json.dumps({'file': os.path.exists('a.txt'), 'secret': 'secret' in globals(),\n"+
		" 'procs': [open('/proc/%s/cmdline' % p).read() for p in os.listdir('/proc') if p.isdigit()]}))")
	var got struct {
		File   bool     `json:"file"`
		Secret bool     `json:"secret"`
		Procs  []string `json:"procs"`
	}
	if err := json.Unmarshal(res.Stdout.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, brief(res))
	}
	if got.File || got.Secret {
		t.Fatalf("session b sees session a's file (%v) or variable (%v)", got.File, got.Secret)
	}
	for _, c := range got.Procs {
		if strings.Contains(c, marker) {
			t.Fatalf("session b sees session a's process %q (pid %s in a)", c, pidInA)
		}
	}
	single := run(t, pySpec("import os; print(os.path.exists('a.txt'))", newMarker()))
	if strings.TrimSpace(string(single.Stdout.Bytes())) != "False" {
		t.Fatalf("a single-use call sees a session's file: %s", brief(single))
	}
}

// Tampering with the driver breaks only its own session: a forged marker without the
// key is output; a killed supervisor ends the session, whose next call is refused,
// and leaves nothing behind.
func TestSessionTamperingEndsOnlyItself(t *testing.T) {
	s := testSandbox(t)
	other := openSession(t, sessionSpec(t, "python"))
	call(t, other, "x = 1")
	ss := openSession(t, sessionSpec(t, "python"))
	forged := sandbox.MarkerPrefix + "00000000000000000000000000000000:end:1:0"
	res := call(t, ss, "print("+strconv.Quote(forged)+"); print('after')")
	if res.Status != sandbox.StatusOK || !strings.Contains(string(res.Stdout.Bytes()), "after") {
		t.Fatalf("a forged marker ended the call: %s", brief(res))
	}
	cg := ss.(*session).l.cg
	res = call(t, ss, "import os, signal, time\nos.kill(os.getppid(), signal.SIGKILL)\ntime.sleep(30)", 20*time.Second)
	if res.Status == sandbox.StatusOK || res.Wall > 10*time.Second {
		t.Fatalf("killing the supervisor: %s", brief(res))
	}
	select {
	case <-ss.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the session did not end with its supervisor")
	}
	s.Wait()
	for _, d := range append([]string{cg.dir}, mapValues(cg.dirs)...) {
		if _, err := os.Stat(d); d != "" && !os.IsNotExist(err) {
			t.Fatalf("cgroup %s left: %v", d, err)
		}
	}
	wantOut(t, call(t, other, "print(x)"), sandbox.StatusOK, "1")
}

// Sessions with calls in flight at once keep to their own state: each call sees its own
// session's counter and output, never another's.
func TestSessionsConcurrent(t *testing.T) {
	const sessions, calls = 4, 8
	ss := make([]sandbox.Session, sessions)
	for i := range ss {
		ss[i] = openSession(t, sessionSpec(t, "python"))
		wantOut(t, call(t, ss[i], "n = 0\nme = "+strconv.Itoa(i)), sandbox.StatusOK, "")
	}
	errs := make(chan string, sessions*calls)
	var wg sync.WaitGroup
	for i := range ss {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for c := 1; c <= calls; c++ {
				res, err := ss[i].Call(context.Background(), sandbox.SessionCall{Code: []byte("n += 1\nprint(me, n)"),
					Limits: filled(sandbox.Limits{Wall: 20 * time.Second})})
				if want := strconv.Itoa(i) + " " + strconv.Itoa(c); err != nil || strings.TrimSpace(string(res.Stdout.Bytes())) != want {
					errs <- "session " + strconv.Itoa(i) + " call " + strconv.Itoa(c) + ": want " + want + ": " + brief(res)
					return
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	// One session, two callers at once: the second is told it is busy, never mixed in.
	long := make(chan error, 1)
	go func() {
		_, err := ss[0].Call(context.Background(), sandbox.SessionCall{Code: []byte("import time; time.sleep(1)"), Limits: filled(sandbox.Limits{Wall: 20 * time.Second})})
		long <- err
	}()
	time.Sleep(200 * time.Millisecond)
	if _, err := ss[0].Call(context.Background(), sandbox.SessionCall{Code: []byte("print(1)")}); !errors.Is(err, sandbox.ErrSessionBusy) {
		t.Errorf("a second call at once: %v", err)
	}
	if err := <-long; err != nil {
		t.Errorf("the first call: %v", err)
	}
}

// A process a call leaves writing between calls, when nobody's output is kept, cannot
// make the server read without end: past the flood ceiling the session is ended, as a
// single-use call flooding its pipes is killed, and nothing of it stays.
func TestSessionFloodBetweenCallsEnds(t *testing.T) {
	s := testSandbox(t)
	ss := openSession(t, sessionSpec(t, "python"))
	marker := newMarker()
	res := call(t, ss, "import subprocess\nsubprocess.Popen(['/usr/bin/python3', '-c', 'import sys\\nwhile True: sys.stdout.write(\"x\" * 65536)', '"+marker+"'])\nprint('started')")
	wantOut(t, res, sandbox.StatusOK, "started")
	select {
	case <-ss.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("a process writing without end between calls did not end the session")
	}
	s.Wait()
	assertNoSurvivors(t, marker)
	if _, err := ss.Call(context.Background(), sandbox.SessionCall{Code: []byte("print(1)"), Limits: filled(sandbox.Limits{})}); !errors.Is(err, sandbox.ErrSessionEnded) {
		t.Fatalf("the flooded session took a call: %v", err)
	}
}

// A process of a call killed at the session's memory limit is reported, even when the
// interpreter survives it and ends the call itself: the call is not "ok" (a single-use
// call's sandbox would have ended at the limit).
func TestSessionChildOOMIsReported(t *testing.T) {
	spec := sessionSpec(t, "python")
	spec.Limits.Memory = 128 << 20
	ss := openSession(t, spec)
	res := call(t, ss, "import subprocess\nr = subprocess.run(['/usr/bin/python3', '-c', 'b = bytearray(1 << 30)'])\nprint(r.returncode)", 30*time.Second)
	if res.Status != sandbox.StatusMemoryLimit {
		t.Fatalf("a child killed at the memory limit: want memory_limit, got %s", brief(res))
	}
	wantOut(t, call(t, ss, "print(1)"), sandbox.StatusOK, "1")
}

// A call that closes the driver's stdout and stderr, so that no end marker can reach the
// server, is not reported as done (nor ok): it ends at its wall-clock limit, the worker
// is restarted, and the session goes on.
func TestSessionClosedStdioFailsClosed(t *testing.T) {
	ss := openSession(t, sessionSpec(t, "python"))
	res := call(t, ss, "import os\nos.close(1)\nos.close(2)", time.Second)
	if res.Status != sandbox.StatusTimeout || !res.Restarted {
		t.Fatalf("a call that closed fds 1 and 2: want timeout with a restart, got %s", brief(res))
	}
	wantOut(t, call(t, ss, "print(1)"), sandbox.StatusOK, "1")
}

// A process the call makes a sibling of its worker (clone with CLONE_PARENT) is the
// supervisor's child, as the worker is, and the sweep after a call the server stopped
// spares the supervisor's children. Such a sibling, ignoring the interrupt, went on
// after the call the server stopped (seen before the seccomp filter refused the flag).
// Whether the clone is refused or the sibling is killed, none may outlive the call.
func TestSessionStoppedCallLeavesNoSiblingOfTheWorker(t *testing.T) {
	ss := openSession(t, sessionSpec(t, "python"))
	call(t, ss, "x = 41")
	res := call(t, ss, `import ctypes, errno, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
pid = libc.syscall(56, 0x8000 | 17, 0, 0, 0, 0)  # clone(CLONE_PARENT | SIGCHLD)
if pid == 0:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        time.sleep(0.05)
if pid < 0:
    print("refused", errno.errorcode[ctypes.get_errno()])
else:
    ppid = int(open('/proc/%d/stat' % pid).read().rsplit(')', 1)[1].split()[1])
    print(pid, ppid == os.getppid(), flush=True)
    time.sleep(60)`, time.Second)
	out := strings.Fields(string(res.Stdout.Bytes()))
	switch {
	case res.Status == sandbox.StatusOK && len(out) == 2 && out[0] == "refused":
		if out[1] != "EPERM" {
			t.Fatalf("clone(CLONE_PARENT) refused with %s, want EPERM", out[1])
		}
	case res.Status == sandbox.StatusTimeout && !res.Restarted && len(out) == 2 && out[1] == "True":
		// Made: the stopped call must have taken it along.
		gone := call(t, ss, "import os\nprint(os.path.exists('/proc/"+out[0]+"'))")
		wantOut(t, gone, sandbox.StatusOK, "False")
	default:
		t.Fatalf("want clone(CLONE_PARENT) refused, or a timeout the interpreter survived: %s restarted=%v", brief(res), res.Restarted)
	}
	// The supervisor, the worker and this call's python: nothing else.
	wantOut(t, call(t, ss, "import os\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]))"), sandbox.StatusOK, "3")
	wantOut(t, call(t, ss, "print(x + 1)"), sandbox.StatusOK, "42")
}

// What a session leaves between its calls (files in /workspace, /tmp and /dev/shm,
// SysV shared memory, a POSIX message queue if it may make one, a background process listening on an
// abstract unix socket) reaches no other session in flight, no single-use call, and
// no session opened after it closed.
func TestSessionStateReachesNoOtherSandbox(t *testing.T) {
	marker := newMarker()
	plant := `import ctypes, os, socket, subprocess, time
for d in ("/workspace", "/tmp", "/dev/shm"):
    open(os.path.join(d, "MARK"), "w").write("a")
libc = ctypes.CDLL(None, use_errno=True)
assert libc.shmget(0x41524c4c, 4096, 0o1666) >= 0, ctypes.get_errno()
libc.mq_open(b"/MARK", os.O_CREAT | os.O_RDWR, 0o666, None)  # refused here (RLIMIT_MSGQUEUE 0); kept in case
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0MARK")
s.listen()
bg = subprocess.Popen(["/usr/bin/python3", "-c", "import socket, time\ns = socket.socket(socket.AF_UNIX)\ns.bind('\\0MARK-bg')\ns.listen()\ntime.sleep(120)"])
for _ in range(500):
    try:
        socket.socket(socket.AF_UNIX).connect("\0MARK-bg")
        break
    except OSError:
        time.sleep(0.01)
print("planted")`
	probe := `import ctypes, json, os, socket, time
libc = ctypes.CDLL(None, use_errno=True)
def reach(name):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(name)
        return "connected"
    except OSError as e:
        return os.strerror(e.errno)
out = {d: os.path.exists(os.path.join(d, "MARK")) for d in ("/workspace", "/tmp", "/dev/shm")}
out["shm"] = libc.shmget(0x41524c4c, 0, 0o666) >= 0
out["mq"] = libc.mq_open(b"/MARK", os.O_RDWR) >= 0
out["abstract"] = reach("\0MARK")
out["abstract-bg"] = reach("\0MARK-bg")
out["procs"] = [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid() and "MARK" in open("/proc/%s/cmdline" % p).read()]
print(json.dumps(out))`
	plant, probe = strings.ReplaceAll(plant, "MARK", marker), strings.ReplaceAll(probe, "MARK", marker)
	check := func(who, stdout string) {
		t.Helper()
		var got map[string]any
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("%s: %v: %q", who, err, stdout)
		}
		for k, v := range got {
			switch k {
			case "abstract", "abstract-bg":
				if v != "Connection refused" {
					t.Errorf("%s: the abstract socket of session a: %v", who, v)
				}
			case "procs":
				if l, _ := v.([]any); len(l) != 0 {
					t.Errorf("%s sees session a's processes %v", who, l)
				}
			default:
				if v != false {
					t.Errorf("%s sees session a's %s", who, k)
				}
			}
		}
	}
	a := openSession(t, sessionSpec(t, "python"))
	wantOut(t, call(t, a, plant), sandbox.StatusOK, "planted")
	// Session a itself sees what it left (so the probe can see it at all).
	self := call(t, a, probe)
	if !strings.Contains(string(self.Stdout.Bytes()), `"shm": true`) || !strings.Contains(string(self.Stdout.Bytes()), `"abstract-bg": "connected"`) {
		t.Fatalf("session a does not see its own state: %s", brief(self))
	}
	b := openSession(t, sessionSpec(t, "python"))
	var wg sync.WaitGroup
	var single sandbox.Result
	wg.Add(1)
	go func() {
		defer wg.Done()
		single = run(t, pySpec(probe, newMarker()))
	}()
	check("session b, in flight with a", string(call(t, b, probe).Stdout.Bytes()))
	wg.Wait()
	check("a single-use call, in flight with a", string(single.Stdout.Bytes()))
	a.Close()
	<-a.Done()
	c := openSession(t, sessionSpec(t, "python"))
	check("a session opened after a closed", string(call(t, c, probe).Stdout.Bytes()))
}
