package linux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

// landlockStateDoesNotBleed is TestStateDoesNotBleed in the Landlock tier: each run has
// its own workspace and tmp, and the host-wide places (/dev/shm, System V IPC) are
// refused rather than private.
func landlockStateDoesNotBleed(t *testing.T) {
	const write = `
import ctypes, json, os
out = {}
for p in [os.getcwd() + "/bleed", os.environ["TMPDIR"] + "/bleed", "/dev/shm/bleed", "/tmp/bleed"]:
    try:
        open(p, "w").write("run one")
        out[p] = "ok"
    except OSError as e:
        out[p] = e.strerror
libc = ctypes.CDLL(None, use_errno=True)
out["shm"] = [libc.shmget(0x41524c4b, 4096, 0o1666), ctypes.get_errno()]
print(json.dumps(out))
`
	const read = `
import json, os
print(json.dumps({"cwd": sorted(os.listdir(".")), "tmp": sorted(os.listdir(os.environ["TMPDIR"]))}))
`
	var wrote map[string]any
	runJSON(t, pySpec(write, newMarker()), &wrote)
	for p, v := range wrote {
		switch {
		case p == "shm":
			if r, _ := v.([]any); len(r) != 2 || r[0] != float64(-1) || r[1] != float64(1) {
				t.Errorf("System V shared memory: %v, want [-1, EPERM]", v)
			}
		case p == "/dev/shm/bleed" || p == "/tmp/bleed":
			if v != "Permission denied" {
				t.Errorf("%s: %v, want Permission denied", p, v)
			}
		case v != "ok":
			t.Errorf("%s: %v, want ok", p, v)
		}
	}
	var got map[string][]string
	runJSON(t, pySpec(read, newMarker()), &got)
	for d, l := range got {
		if len(l) != 0 {
			t.Errorf("second run sees %s: %v", d, l)
		}
	}
}

// TestLandlockTwoRunsInFlight: with another run in flight, a run cannot read its
// workspace or tmp, list its directory, reach a unix socket it listens on, signal it or
// trace it; nor signal, trace or read the server's /proc entries; nor change the
// resource limits, niceness, scheduling policy or CPUs of either. Under an unprivileged
// server every run has the server's uid, which is all the kernel asks for those, and
// Landlock does not cover them: a run could set the server's RLIMIT_CPU and so kill it,
// its RLIMIT_NOFILE, or SCHED_IDLE.
func TestLandlockTwoRunsInFlight(t *testing.T) {
	recordTier(t)
	if !inLandlockTier() {
		t.Skip("the Landlock tier's own test: TestLandlockTier runs it there")
	}
	const victim = `
import os, socket, sys, time, json
secret = sys.argv[2]
open("secret.txt", "w").write(secret)
open(os.environ["TMPDIR"] + "/secret.txt", "w").write(secret)
# This tier refuses bind and listen (TestAbstractListenerUnreachable); were a socket
# there, the attacker's connect to its path must fail all the same.
s = socket.socket(socket.AF_UNIX)
try:
    s.bind(os.environ["TMPDIR"] + "/sock")
    s.listen(1)
except OSError:
    pass
open(os.environ["TMPDIR"] + "/ready", "w").close()
print(json.dumps({"pid": os.getpid(), "cwd": os.getcwd(), "tmp": os.environ["TMPDIR"]}), flush=True)
time.sleep(3)
`
	const attacker = `
import ctypes, errno, json, os, signal, socket, sys
t = json.load(sys.stdin)
out = {}
def try_(name, f):
    try:
        r = f()
        out[name] = "ok:" + str(r)[:200]
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
try_("read workspace", lambda: open(t["cwd"] + "/secret.txt").read())
try_("read tmp", lambda: open(t["tmp"] + "/secret.txt").read())
try_("list workspace", lambda: os.listdir(t["cwd"]))
try_("list run dirs", lambda: os.listdir(os.path.dirname(os.path.dirname(os.path.dirname(t["cwd"])))))
def conn():
    s = socket.socket(socket.AF_UNIX)
    # A link with a short name: the victim's path is longer than sun_path holds.
    os.symlink(t["tmp"] + "/sock", "sock-link")
    s.connect("sock-link")
try_("connect its socket", conn)
for who in ("victim", "server"):
    pid = t[who]
    try_("signal " + who, lambda: os.kill(pid, 0))
    try_("environ " + who, lambda: open("/proc/%d/environ" % pid, "rb").read())
    try_("mem " + who, lambda: open("/proc/%d/mem" % pid, "rb").read(1))
    libc = ctypes.CDLL(None, use_errno=True)
    def attach():
        if libc.ptrace(16, pid, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "ptrace")
    try_("ptrace " + who, attach)
# The victim's are changed for real; the server's are set to what they are, which the
# kernel permits or refuses just the same.
import platform, resource, struct
for who in ("victim", "server"):
    pid, victim = t[who], who == "victim"
    try_("prlimit " + who, lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE, (10, 10)) if victim else resource.prlimit(pid, resource.RLIMIT_CORE, resource.prlimit(pid, resource.RLIMIT_CORE)))
    try_("setpriority " + who, lambda: os.setpriority(os.PRIO_PROCESS, pid, 19 if victim else os.getpriority(os.PRIO_PROCESS, pid)))
    try_("setaffinity " + who, lambda: os.sched_setaffinity(pid, {min(os.sched_getaffinity(pid))} if victim else os.sched_getaffinity(pid)))
    try_("setscheduler " + who, lambda: os.sched_setscheduler(pid, os.SCHED_IDLE if victim else os.sched_getscheduler(pid), os.sched_param(0)))
    try_("setparam " + who, lambda: os.sched_setparam(pid, os.sched_param(0)))
    def setattr_():
        attr = struct.pack("=IIQiIQQQ", 48, os.SCHED_IDLE if victim else os.sched_getscheduler(pid), 0, 0, 0, 0, 0, 0)
        nr = {"x86_64": 314, "aarch64": 274}[platform.machine()]
        if libc.syscall(nr, pid, attr, 0) != 0:
            raise OSError(ctypes.get_errno(), "sched_setattr")
    try_("setattr " + who, setattr_)
# Every process of the uid, the server's among them, at the niceness it has.
try_("setpriority user", lambda: os.setpriority(os.PRIO_USER, 0, os.getpriority(os.PRIO_PROCESS, 0)))
print(json.dumps(out))
`
	secret := "airlock-secret-" + randHex(8)
	vspec := pySpec(victim, newMarker())
	vspec.Argv = append(vspec.Argv, secret)
	vspec.Limits = sandbox.Limits{Wall: 10 * time.Second}
	vspec.ID = newID()
	s := testSandbox(t)
	first := make(chan sandbox.Result, 1)
	go func() {
		res, _ := s.Run(t.Context(), withDefaults(vspec))
		first <- res
	}()
	// The victim prints its facts before it sleeps; the host finds it by its marker.
	marker := vspec.Argv[len(vspec.Argv)-2]
	vpid := waitHostProc(t, marker, 5*time.Second)
	// Its run directory is named after its ID (runDirs), with a suffix when a host uid
	// found busy made it try again (run).
	// The workspace and tmp are a secret-named directory in each (runDirs): this test
	// hands the attacker what it could not find, to show the content is closed too.
	var ws, tmp string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		socks, _ := filepath.Glob(s.ll.base + "/" + vspec.ID + "*/tmp/*/ready")
		if len(socks) == 1 {
			tmp = filepath.Dir(socks[0])
			wss, _ := filepath.Glob(filepath.Dir(filepath.Dir(tmp)) + "/workspace/*")
			if len(wss) == 1 {
				ws = wss[0]
			}
			break
		}
	}
	if ws == "" {
		t.Fatalf("the victim's tmp/ready did not appear in %s", s.ll.base)
	}
	var facts = map[string]any{"victim": vpid, "server": os.Getpid(), "cwd": ws, "tmp": tmp}
	stdin, _ := json.Marshal(facts)
	aspec := pySpec(attacker, newMarker())
	aspec.Stdin = stdin
	var got map[string]string
	runJSON(t, aspec, &got)
	want := map[string]string{
		"read workspace": "EACCES", "read tmp": "EACCES", "list workspace": "EACCES", "list run dirs": "EACCES",
		// seccomp refuses connect in this tier (Landlock ABI 7 cannot restrict
		// pathname sockets by path).
		"connect its socket": "EPERM",
		"signal victim":      "EPERM", "signal server": "EPERM",
		"environ victim": "EACCES", "environ server": "EACCES", "mem victim": "EACCES", "mem server": "EACCES",
		// PTRACE_ATTACH is not among the requests seccomp lets through.
		"ptrace victim": "ENOSYS", "ptrace server": "ENOSYS",
		// Another process's limits and scheduling: the kernel refuses another uid's;
		// seccomp refuses them all in this tier, the uid's own included (filterPlan).
		"prlimit victim": "EPERM", "prlimit server": "EPERM", "setpriority victim": "EPERM", "setpriority server": "EPERM",
		"setaffinity victim": "EPERM", "setaffinity server": "EPERM", "setscheduler victim": "EPERM", "setscheduler server": "EPERM",
		"setparam victim": "EPERM", "setparam server": "EPERM", "setattr victim": "EPERM", "setattr server": "EPERM",
		"setpriority user": "EPERM",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got %q, want %q", k, got[k], w)
		}
	}
	for k, v := range got {
		if strings.Contains(v, secret) {
			t.Errorf("%s: the other run's secret leaked", k)
		}
	}
	// What the host sees of the victim: its own limits, niceness and policy still.
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", vpid)); err == nil && strings.Contains(string(b), "Max open files            10  ") {
		t.Errorf("the attacker lowered the victim's RLIMIT_NOFILE:\n%s", b)
	}
	// Niceness (field 19) and policy (41) as this process has them, which the victim
	// inherited (a suite run under nice, say).
	sched := func(pid string) (nice, policy string) {
		st, err := os.ReadFile("/proc/" + pid + "/stat")
		f := strings.Fields(string(st[max(strings.LastIndexByte(string(st), ')'), 0)+1:]))
		if err != nil || len(f) <= 38 {
			return "", ""
		}
		return f[16], f[38]
	}
	ownNice, ownPolicy := sched("self")
	if nice, policy := sched(strconv.Itoa(vpid)); nice != "" && (nice != ownNice || policy != ownPolicy) {
		t.Errorf("the attacker changed the victim's niceness (%s, this process %s) or policy (%s, this process %s)", nice, ownNice, policy, ownPolicy)
	}
	if res := <-first; res.Status != sandbox.StatusOK {
		t.Errorf("the victim run: %s", brief(res))
	}
}

// TestLandlockHostDatagramUnreachable: a host datagram socket anyone may write (as
// /dev/log is: the host's journal) receives nothing from the program, by sendto, connect
// or sendmsg with an address (which seccomp cannot read), from a socket or a socketpair.
func TestLandlockHostDatagramUnreachable(t *testing.T) {
	recordTier(t)
	if !inLandlockTier() {
		t.Skip("the Landlock tier's own test: TestLandlockTier runs it there")
	}
	dir, err := os.MkdirTemp("/tmp", "airlock-dgram-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := dir + "/log"
	host, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	for _, p := range []string{dir, path} {
		if err := os.Chmod(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	const attacker = `
import errno, json, socket, sys
path = sys.argv[2]
out = {}
def try_(name, f):
    try:
        out[name] = "ok:" + str(f())
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
def sock(t):
    return socket.socket(socket.AF_UNIX, t)
try_("dgram sendto", lambda: sock(socket.SOCK_DGRAM).sendto(b"sendto", path))
try_("dgram sendmsg", lambda: sock(socket.SOCK_DGRAM).sendmsg([b"sendmsg"], [], 0, path))
try_("raw sendmsg", lambda: sock(socket.SOCK_RAW).sendmsg([b"raw"], [], 0, path))
try_("dgram connect", lambda: sock(socket.SOCK_DGRAM).connect(path))
try_("pair sendmsg", lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)[0].sendmsg([b"pair"], [], 0, path))
try_("stream sendmsg", lambda: sock(socket.SOCK_STREAM).sendmsg([b"stream"], [], 0, path))
pair = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
try_("seqpacket pair sendmsg", lambda: pair[0].sendmsg([b"seqpacket"], [], 0, path))
print(json.dumps(out))
`
	spec := pySpec(attacker, newMarker())
	spec.Argv = append(spec.Argv, path)
	var got map[string]string
	runJSON(t, spec, &got)
	t.Logf("attempts: %v", got)
	want := map[string]string{
		"dgram sendto": "EPERM", "dgram sendmsg": "EPERM", "raw sendmsg": "EPERM", "dgram connect": "EPERM", "pair sendmsg": "EPERM",
		// The kernel refuses a msg_name on an unconnected stream socket, and ignores
		// it on a connected seqpacket one (the datagram goes to its peer).
		"stream sendmsg": "ENOTSUP", "seqpacket pair sendmsg": "ok:9",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got %q, want %q", k, got[k], w)
		}
	}
	if err := host.SetReadDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	for {
		n, err := host.Read(buf)
		if err != nil {
			break
		}
		t.Errorf("the host datagram socket received %q from the sandbox", buf[:n])
	}
}

// forkChain keeps a chain moving: each process forks its successor and exits at once,
// so at no moment is one fixed process the chain's root to kill.
const forkChain = `
import os, sys, time
if os.fork() == 0:
    while True:
        if os.fork() != 0:
            os._exit(0)
        time.sleep(0.001)
time.sleep(0.3)
print("main done", flush=True)
time.sleep(1000)
`

// TestForkChainDies: the timeout ends a fork chain too, in either tier.
func TestForkChainDies(t *testing.T) {
	recordTier(t)
	marker := newMarker()
	spec := pySpec(forkChain, marker)
	spec.Limits = sandbox.Limits{Wall: time.Second, Pids: 64}
	res := run(t, spec)
	if res.Status != sandbox.StatusTimeout || !strings.Contains(string(res.Stdout.Bytes()), "main done") {
		t.Fatalf("status %s, want timeout: %s", res.Status, brief(res))
	}
	assertNoSurvivors(t, marker)
}

// tierGuarantees are the escape tests run in both tiers, by guarantee: TestMain prints
// the table (guarantee → namespaces / landlock), with the Landlock column from
// TestLandlockTier's child run. docs and the README carry the same table.
var tierGuarantees = []struct{ test, guarantee string }{
	{"TestHostFilesUnreachable", "files: /home, /root, /etc secrets, the server's binary and state dir, host canaries in /tmp /var/tmp /dev/shm unreadable"},
	{"TestNoServerFilesInTree", "files: nothing of the server listable outside the system dirs"},
	{"TestWriteOutsideWorkspace", "files: writes only to the workspace and tmp"},
	{"TestMetadataOutsideWorkspace", "files: no mode, owner, time or xattr change outside the workspace"},
	{"TestHostXattrsUnreadable", "files: no host file's extended attributes read or listed"},
	{"TestWorldWritableHostFiles", "files: no xattr stored in a world-writable host file or directory"},
	{"TestInodeFlagsOutsideWorkspace", "files: no inode flag (nodump, sync) or lease on a readable host file"},
	{"TestDeviceNodesUnchanged", "files: the host's /dev/null and the like usable, their times unchanged"},
	{"TestMountFlags", "files: own mount table, read-only and nosuid"},
	{"TestLandlockTwoRunsInFlight", "files, processes: another run in flight unreachable (workspace, tmp, its socket, signals, ptrace, /proc, its and the server's limits and scheduling)"},
	{"TestLandlockHostDatagramUnreachable", "network: a host datagram socket anyone may write (/dev/log) unreachable"},
	{"TestStateDoesNotBleed", "files: nothing of one run seen by the next (workspace, tmp, /dev/shm, SysV IPC)"},
	{"TestIdentity", "identity: no capabilities, no_new_privs, seccomp, an unprivileged host uid"},
	{"TestHostUIDsDistinct", "identity: a host uid per sandbox (root server)"},
	{"TestSetuidGainsNothing", "identity: setuid binaries gain nothing"},
	{"TestEnvDoesNotLeak", "environment: the server's environment does not leak"},
	{"TestFDsDoNotLeak", "environment: no descriptor of the server leaks"},
	{"TestNetworkDenied", "network: inet sockets refused, host loopback listeners and abstract sockets unreachable"},
	{"TestAbstractListenerUnreachable", "network: a host process cannot reach a listener of the program at an abstract name"},
	{"TestHostPidsHidden", "processes: own pid view, host processes hidden"},
	{"TestSignalsToInit", "processes: the program cannot kill its supervisor"},
	{"TestDetachedGrandchildDies", "processes: setsid, double-forked, SIGTERM-ignoring descendants die with the run"},
	{"TestForkChainDies", "processes: a fork chain dies at the timeout"},
	{"TestNoProcessOutlivesItsUID", "processes: no process of a run's host uid outlives it"},
	{"TestNoLeftovers", "processes: no cgroup, mount, temp dir, process or fd left after 200 runs"},
	{"TestForkBomb", "resources: fork bomb bounded"},
	{"TestMemoryBomb", "resources: memory limit"},
	{"TestCPULimit", "resources: CPU limit"},
	{"TestWallTimeout", "resources: wall-clock timeout"},
	{"TestDiskFill", "resources: workspace, /tmp, /dev/shm size-capped"},
	{"TestFileSizeLimit", "resources: file size limit"},
	{"TestOutputFlood", "output: caps and flood kill"},
	{"TestCancel", "processes: cancellation kills the run"},
	{"TestTenantBudgets", "resources: per-user kernel budgets not shared between runs"},
	{"TestSyscallsDenied", "syscalls: the seccomp denials"},
	{"TestForeignArchSyscallKills", "syscalls: foreign-architecture syscalls kill"},
	{"TestHostActivityInvisible", "syscalls: no inotify or dnotify on the host's files"},
	{"TestPageCacheUnobservable", "syscalls: no page-cache probe of the host's files (preadv2 RWF_NOWAIT)"},
	{"TestHostPageCacheKept", "syscalls: no eviction of the host's files from the page cache (fadvise DONTNEED)"},
	{"TestPoolMatchesColdRun", "warm pool: a pooled run is a cold run"},
	{"TestPoolHonoursCallLimits", "warm pool: the call's limits hold"},
	{"TestPooledBashSingleUse", "warm pool: a pooled shell starts clean and carries nothing of another call"},
	{"TestArtifactListIsBounded", "artifacts: the listing is bounded"},
	{"TestUnprivileged", "identity: the suite holds under an unprivileged server"},
}

var (
	tierMu      sync.Mutex
	tierResults = map[string]string{} // this process's tier: test → pass, FAIL, n/a
	tierOther   map[string]string     // the Landlock child's, from TestLandlockTier
)

// recordTier notes the test's outcome in this process's tier for the table.
func recordTier(t *testing.T) {
	t.Cleanup(func() {
		v := "pass"
		switch {
		case t.Failed():
			v = "FAIL"
		case t.Skipped():
			v = "n/a"
		}
		tierMu.Lock()
		tierResults[t.Name()] = v
		tierMu.Unlock()
	})
}

// TestLandlockTier runs the escape suite again in the Landlock tier, in a child test
// process (a backend is one per process, as in a server), and fails if any of it fails.
// A test that does not apply there says why (notInTier), and the table shows it.
func TestLandlockTier(t *testing.T) {
	if inLandlockTier() {
		t.Skip("this is the Landlock tier's run itself")
	}
	if os.Getenv("AIRLOCK_UNPRIV_CHILD") == "1" {
		t.Skip("the unprivileged run: the Landlock tier's child runs its own")
	}
	var names []string
	for _, g := range tierGuarantees {
		names = append(names, g.test)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-test.count=1", "-test.v", "-test.timeout=600s", "-test.run=^(" + strings.Join(names, "|") + ")$"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), "AIRLOCK_TEST_ISOLATION="+sandbox.IsolationLandlock)
	out, err := cmd.CombinedOutput()
	got := parseTierRun(string(out))
	tierMu.Lock()
	tierOther = got
	tierMu.Unlock()
	if err != nil || !strings.Contains(string(out), "\nPASS\n") {
		t.Fatalf("the escape suite fails in the Landlock tier (%v):\n%s", err, out)
	}
	for _, n := range names {
		if got[n] == "" {
			t.Errorf("%s did not run in the Landlock tier", n)
		}
	}
	if testing.Verbose() {
		t.Logf("the Landlock tier's run:\n%s", out)
	}
}

var tierLine = regexp.MustCompile(`(?m)^--- (PASS|FAIL|SKIP): (Test\w+) `)
var naLine = regexp.MustCompile(`(?m)^\s+\S+_test\.go:\d+: ` + notApplicable + `(.*)$`)

// parseTierRun reads a verbose child run: test → pass, FAIL or "n/a: why".
func parseTierRun(out string) map[string]string {
	got := map[string]string{}
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		m := tierLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		switch m[1] {
		case "PASS":
			got[m[2]] = "pass"
		case "FAIL":
			got[m[2]] = "FAIL"
		case "SKIP":
			// go test -v prints a test's skip message before its "--- SKIP" line.
			got[m[2]] = "skipped"
			if i > 0 {
				if n := naLine.FindStringSubmatch(lines[i-1]); n != nil {
					got[m[2]] = "n/a: " + n[1]
				}
			}
		}
	}
	return got
}

// printTierTable writes the guarantee table once the tests have run (TestMain).
func printTierTable(w io.Writer) {
	tierMu.Lock()
	defer tierMu.Unlock()
	if tierOther == nil {
		return
	}
	fmt.Fprintf(w, "\nguarantee → namespaces / landlock (this run)\n")
	for _, g := range tierGuarantees {
		ns := tierResults[g.test]
		if ns == "" {
			ns = "-"
		}
		fmt.Fprintf(w, "  %-100s %-8s %s\n", g.guarantee, ns, tierOther[g.test])
	}
}

// BenchmarkTiers compares a cold and a pooled call in the namespace tier and the
// Landlock tier, interleaved (one of each per round: this machine's speed drifts by ten
// points within minutes, so back-to-back windows would mislead). It reports medians.
func BenchmarkTiers(b *testing.B) {
	tiers := map[string]*Sandbox{}
	for _, tier := range []string{sandbox.IsolationNamespaces, sandbox.IsolationLandlock} {
		s, err := New(sandbox.Options{Isolation: tier})
		if err != nil {
			b.Skipf("SKIPPING: no %s tier on this host: %v", tier, err)
		}
		tiers[tier] = s
	}
	tmpl := withDefaults(sandbox.Spec{Language: "bench", Argv: []string{"/usr/bin/true"}})
	py := sandbox.Spec{Argv: []string{python, "-I", "-S", "-c", "pass"}}
	for _, s := range tiers {
		s.Warm([]sandbox.Spec{tmpl}, 1)
		b.Cleanup(func() { s.Close() })
	}
	kinds := []string{"cold-true", "pooled-true", "cold-python"}
	times := map[string][]time.Duration{}
	for b.Loop() {
		for _, kind := range kinds {
			for _, tier := range []string{sandbox.IsolationNamespaces, sandbox.IsolationLandlock} {
				s := tiers[tier]
				spec := sandbox.Spec{Argv: []string{"/usr/bin/true"}}
				switch kind {
				case "pooled-true":
					b.StopTimer()
					for deadline := time.Now().Add(10 * time.Second); s.PoolStats().Ready < 1 && time.Now().Before(deadline); {
						time.Sleep(time.Millisecond)
					}
					b.StartTimer()
					spec = tmpl
				case "cold-python":
					spec = py
				}
				start := time.Now()
				res, err := s.Run(context.Background(), withDefaults(spec))
				if err != nil || res.Status != sandbox.StatusOK {
					b.Fatal(tier, kind, err, res.Status, res.Detail)
				}
				times[tier+"/"+kind] = append(times[tier+"/"+kind], time.Since(start))
			}
		}
	}
	for k, ts := range times {
		slices.Sort(ts)
		b.ReportMetric(float64(ts[len(ts)/2].Microseconds())/1000, k+"-ms")
	}
}

// fakeDirs is a directory tree for grantAround: dir → its entries (a trailing "@" marks
// a symlink).
type fakeDirs map[string][]string

func (f fakeDirs) ReadDir(name string) ([]os.DirEntry, error) {
	var out []os.DirEntry
	for _, n := range f[name] {
		out = append(out, fakeEntry(n))
	}
	return out, nil
}

type fakeEntry string

func (e fakeEntry) Name() string { return strings.TrimSuffix(string(e), "@") }
func (e fakeEntry) IsDir() bool  { return false }
func (e fakeEntry) Type() os.FileMode {
	if strings.HasSuffix(string(e), "@") {
		return os.ModeSymlink
	}
	return 0
}
func (e fakeEntry) Info() (os.FileInfo, error) { return nil, os.ErrInvalid }

// TestGrantAround: a mount beneath a granted directory is left out by granting its
// siblings instead, down the path to it, never a symlink.
func TestGrantAround(t *testing.T) {
	fs := fakeDirs{
		"/usr":           {"bin", "lib", "local"},
		"/usr/local":     {"bin", "lib", "share"},
		"/usr/local/bin": {"airlock", "tool", "link@"},
	}
	got := grantAround("/usr", []string{"/usr/local/bin/airlock", "/proc", "/usrx/y"}, fs)
	want := []string{"/usr/bin", "/usr/lib", "/usr/local/bin/tool", "/usr/local/lib", "/usr/local/share"}
	if !slices.Equal(got, want) {
		t.Errorf("grantAround = %v, want %v", got, want)
	}
	if got := grantAround("/etc/ssl", []string{"/usr/local/bin/airlock"}, fs); !slices.Equal(got, []string{"/etc/ssl"}) {
		t.Errorf("a root with nothing beneath it: %v", got)
	}
	if got := grantAround("/usr/local/bin", []string{"/usr/local/bin"}, fs); got != nil {
		t.Errorf("a root that is itself a mount: %v", got)
	}
	if got := unescapeMount(`/mnt/a\040b`); got != "/mnt/a b" {
		t.Errorf("unescapeMount = %q", got)
	}
}

// TestLandlockPieces: the ABI check names each missing piece and refuses without
// allow_degraded; this kernel's ABI is one row, the others cannot be had here.
func TestLandlockPieces(t *testing.T) {
	for _, tc := range []struct {
		abi      int
		degraded bool
		want     uint32
		missing  []string // substrings, one per missing piece
		refused  bool
	}{
		{0, true, 0, nil, true},
		{1, false, 0, []string{"TCP", "scoping"}, true},
		{3, true, 0, []string{"TCP bind/connect denial (Landlock ABI 4, this kernel has 3", "scoping (Landlock ABI 6"}, false},
		{4, false, llNet, []string{"scoping"}, true},
		{5, true, llNet, []string{"scoping (Landlock ABI 6, this kernel has 5"}, false},
		{6, false, llNet | llScope, nil, false},
		{7, false, llNet | llScope, nil, false},
	} {
		want, missing, err := landlockPieces(tc.abi, tc.degraded)
		if tc.refused {
			if !errors.Is(err, sandbox.ErrUnavailable) {
				t.Errorf("ABI %d, degraded %t: err %v, want a refusal", tc.abi, tc.degraded, err)
			}
			for _, m := range tc.missing {
				if err == nil || !strings.Contains(err.Error(), m) {
					t.Errorf("ABI %d: the refusal %v does not name %q", tc.abi, err, m)
				}
			}
			continue
		}
		if err != nil || want != tc.want || len(missing) != len(tc.missing) {
			t.Errorf("ABI %d, degraded %t: want %b missing %q err %v; want %b and %d missing", tc.abi, tc.degraded, want, missing, err, tc.want, len(tc.missing))
			continue
		}
		for i, m := range tc.missing {
			if !strings.Contains(missing[i], m) {
				t.Errorf("ABI %d: missing[%d] = %q, want it to name %q", tc.abi, i, missing[i], m)
			}
		}
	}
}

// TestLandlockRunsDirIsPrivate: the directory that holds the Landlock tier's run
// directories (/tmp/airlock-UID-runs for an unprivileged server without
// XDG_RUNTIME_DIR: a name anyone can take first in /tmp) is refused unless it is a real
// directory of the server's uid that no one else may write. Whoever owns it could rename
// the server's directory in it and put a symlink in its place, so that a later run's
// workspace, with the call's code and files, is made in a directory of theirs.
func TestLandlockRunsDirIsPrivate(t *testing.T) {
	other := t.TempDir()
	cases := map[string]func(runs string) error{
		"a symlink": func(runs string) error { return os.Symlink(other, runs) },
		"writable by others": func(runs string) error {
			if err := os.Mkdir(runs, 0o777); err != nil {
				return err
			}
			return os.Chmod(runs, 0o777)
		},
	}
	if isRoot() {
		cases["another uid's"] = func(runs string) error {
			if err := os.Mkdir(runs, 0o711); err != nil {
				return err
			}
			return os.Chown(runs, 1, 1)
		}
	}
	for name, make := range cases {
		state := t.TempDir()
		runs := filepath.Join(state, "runs")
		if err := make(runs); err != nil {
			t.Fatal(err)
		}
		tier, err := newLandlockTier(sandbox.Options{StateDir: state, AllowDegraded: true})
		if err == nil {
			os.RemoveAll(tier.base)
			t.Errorf("%s runs directory accepted: the tier made %s in it", name, tier.base)
		} else if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), runs) {
			t.Errorf("%s runs directory: %v, want ErrUnavailable naming %s", name, err, runs)
		}
	}
	state := t.TempDir()
	tier, err := newLandlockTier(sandbox.Options{StateDir: state, AllowDegraded: true})
	if err != nil {
		t.Fatalf("a fresh runs directory refused: %v", err)
	}
	os.RemoveAll(tier.base)
}
