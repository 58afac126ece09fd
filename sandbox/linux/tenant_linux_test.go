package linux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/internal/sandboxtest"
	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/sandbox"
)

// Cross-tenant budgets: each case exhausts one per-user kernel budget in one sandbox and
// holds it, while a second sandbox in flight at the same time and two host processes (one
// of root, one of the second sandbox's host uid) each use a little of it. Before each
// sandbox had a host uid of its own and low per-user rlimits, all four failed.
type tenantCase struct {
	name string
	// attack exhausts the budget, prints one JSON line and holds what it took.
	attack string
	// check uses a little of the budget and prints {"ok": bool, "detail": ...}.
	check string
	// attackBound, when set, checks the attacker's own JSON: it must have been held to
	// its sandbox's share.
	attackBound func(t *testing.T, got map[string]any)
}

// sigqueuePy defines queue(n): sigqueue n real-time signals to this process, and the
// count queued with the error that stopped it.
const sigqueuePy = `
import ctypes, os, signal, json
libc = ctypes.CDLL(None, use_errno=True)
sigs = list(range(signal.SIGRTMIN, signal.SIGRTMAX + 1))
def queue(limit):
    pid = os.getpid()
    for n in range(limit):
        if libc.sigqueue(pid, sigs[n % len(sigs)], ctypes.c_void_p(0)) != 0:
            return n, os.strerror(ctypes.get_errno())
    return limit, ""
`

const holdForever = `
import sys, time
sys.stdout.flush()
time.sleep(60)
`

var tenantCases = []tenantCase{{
	name: "pending-signals",
	// Real-time signals sent with sigqueue queue one entry each; blocked, they stay
	// pending and are charged to RLIMIT_SIGPENDING up the user-namespace chain. (kill()
	// past the limit loses the entry silently instead of failing.)
	attack: sigqueuePy + `
signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
n, err = queue(200000)
print(json.dumps({"queued": n, "err": err}))
` + holdForever,
	check: sigqueuePy + `
signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
n, err = queue(64)
print(json.dumps({"ok": n == 64, "detail": "%d of 64 queued %s" % (n, err)}))
`,
	attackBound: func(t *testing.T, got map[string]any) {
		if q, _ := got["queued"].(float64); q > sigPendingLimit {
			t.Errorf("the attacker queued %v signals, more than RLIMIT_SIGPENDING (%d)", q, sigPendingLimit)
		}
	},
}, {
	name: "pipe-buffers",
	// F_SETPIPE_SZ reserves pipe pages against the per-user pipe-user-pages-soft budget
	// (16384 pages) without charging any memory yet.
	attack: `
import os, fcntl, json
ok, err, keep = 0, "", []
for _ in range(120):
    r, w = os.pipe()
    keep.append((r, w))
    try:
        fcntl.fcntl(w, 1031, 1 << 20)
        ok += 1
    except OSError as e:
        err = e.strerror
print(json.dumps({"grown": ok, "err": err}))
` + holdForever,
	check: `
import os, fcntl, json
r, w = os.pipe()
size = fcntl.fcntl(w, 1032)
err = ""
try:
    grown = fcntl.fcntl(w, 1031, 1 << 20)
except OSError as e:
    grown, err = 0, e.strerror
print(json.dumps({"ok": size == 65536 and grown == 1 << 20, "detail": "new pipe %d bytes, grown to %d %s" % (size, grown, err)}))
`,
}, {
	name: "fds-in-flight",
	// Descriptors sent over a unix socket and never received count against the sender's
	// user (too_many_unix_fds, bounded by RLIMIT_NOFILE).
	attack: `
import os, socket, json
a, b = socket.socketpair()
fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(16)]
sent, err = 0, ""
try:
    while sent < 100000:
        socket.send_fds(a, [b"x"], fds)
        sent += len(fds)
except OSError as e:
    err = e.strerror
print(json.dumps({"in_flight": sent, "err": err}))
` + holdForever,
	check: `
import os, socket, json, resource
# A host process gets the sandbox's descriptor limit, so it is judged by the same rule.
resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
a, b = socket.socketpair()
err = ""
try:
    socket.send_fds(a, [b"x"], [os.open("/dev/null", os.O_RDONLY)])
    ok = True
except OSError as e:
    ok, err = False, e.strerror
print(json.dumps({"ok": ok, "detail": "send one fd: " + (err or "ok")}))
`,
}}

func TestTenantBudgets(t *testing.T) {
	recordTier(t)
	s := testSandbox(t)
	if !s.ids.isolated() {
		// An unprivileged server without subordinate ids maps every sandbox to its own
		// uid: the budgets are shared by design, and the probe must say so.
		rep, err := s.Probe(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range rep.Layers {
			if l.Name == "host-uids" && !l.Active && l.Fix != "" {
				t.Skipf("SKIPPING: the %s id scheme shares one host uid between sandboxes, and the probe reports it: %s", s.ids.scheme, l.Detail)
			}
		}
		t.Fatalf("the %s id scheme shares one host uid, but the probe does not report host-uids as degraded: %+v", s.ids.scheme, rep.Layers)
	}
	for _, tc := range tenantCases {
		t.Run(tc.name, func(t *testing.T) { runTenantCase(t, s, tc) })
	}
}

func runTenantCase(t *testing.T, s *Sandbox, tc tenantCase) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	attackCtx, stopAttack := context.WithCancel(ctx)
	defer stopAttack()

	// The attacker prints once it holds the budget.
	aSpec := pySpec(tc.attack, newMarker())
	aSpec.Limits.Wall = 50 * time.Second
	aSpec.Limits.OpenFiles = 512
	attackDone := runPrinting(t, attackCtx, s, aSpec, "the attacker (holding the budget)")

	// The second sandbox checks, prints and waits, so the host can find its uid.
	vMarker := newMarker()
	vCtx, stopVictim := context.WithCancel(ctx)
	defer stopVictim()
	checked := make(chan struct{})
	var checkedOnce sync.Once
	vSpec := pySpec(tc.check+holdForever, vMarker)
	vSpec.Limits.Wall = 50 * time.Second
	vSpec.Progress = func(p sandbox.Progress) {
		if p.StdoutBytes > 0 {
			checkedOnce.Do(func() { close(checked) })
		}
	}
	victimDone := make(chan sandbox.Result, 1)
	go func() {
		res, _ := s.Run(vCtx, withDefaults(vSpec))
		victimDone <- res
	}()
	uid, gid := hostIDsOf(t, waitHostProc(t, vMarker, 20*time.Second))

	var hostRoot, hostUser map[string]any
	if isRoot() {
		hostRoot, hostUser = hostCheck(t, tc.check, 0, 0), hostCheck(t, tc.check, uid, gid)
	} else {
		t.Log("an unprivileged test cannot start host observers of other uids; the concurrent sandbox is the check")
	}
	select {
	case <-checked:
	case <-ctx.Done():
	}
	stopVictim()
	victim := <-victimDone
	stopAttack()
	attacker := <-attackDone

	aOut := lastJSON(t, "attacker", attacker)
	t.Logf("attacker: %v", aOut)
	if tc.attackBound != nil {
		tc.attackBound(t, aOut)
	}
	for _, o := range []struct {
		who string
		out map[string]any
	}{
		{"the concurrent sandbox", lastJSON(t, "victim", victim)},
		{"a host process of root", hostRoot},
		{"a host process of the concurrent sandbox's host uid " + strconv.Itoa(uid), hostUser},
	} {
		if o.out == nil {
			continue
		}
		t.Logf("%s: %v", o.who, o.out)
		if ok, _ := o.out["ok"].(bool); !ok {
			t.Errorf("%s was starved by the other sandbox: %v", o.who, o.out["detail"])
		}
	}
}

// hostIDs reads the real uid and gid of a host process.
func hostIDsOf(t *testing.T, pid int) (int, int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatalf("read the sandbox process's status: %v", err)
	}
	field := func(name string) int {
		for _, l := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(l, name+":"); ok {
				n, _ := strconv.Atoi(strings.Fields(rest)[0])
				return n
			}
		}
		t.Fatalf("no %s in /proc/%d/status", name, pid)
		return 0
	}
	return field("Uid"), field("Gid")
}

// hostCheck runs check with the host's python, unsandboxed, as uid/gid (the test runs
// as root).
func hostCheck(t *testing.T, check string, uid, gid int) map[string]any {
	t.Helper()
	cmd := exec.Command(python, "-I", "-S", "-c", check)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("host check as uid %d: %v\n%s", uid, err, ee.Stderr)
	} else if err != nil {
		t.Fatalf("host check as uid %d: %v", uid, err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("host check as uid %d printed %q: %v", uid, out, err)
	}
	return m
}

// lastJSON decodes the first line of a held run's stdout (it was cancelled after).
func lastJSON(t *testing.T, who string, res sandbox.Result) map[string]any {
	t.Helper()
	line, _, _ := strings.Cut(strings.TrimSpace(string(res.Stdout.Bytes())), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("%s printed no verdict: %v\n%s", who, err, brief(res))
	}
	return m
}

// TestHostUIDsDistinct runs sandboxes of two servers at once (two backends, as two
// airlock processes on one host would be), cold runs on one and a waiting warm pool on
// the other: no two sandboxes (pid namespaces) share a host uid.
func TestHostUIDsDistinct(t *testing.T) {
	recordTier(t)
	s := testSandbox(t)
	if !s.ids.isolated() {
		t.Skipf("SKIPPING: the %s id scheme shares one host uid by design (TestTenantBudgets checks the probe says so)", s.ids.scheme)
	}
	other, err := New(sandbox.Options{Isolation: testTier()})
	sandboxtest.Require(t, err)
	defer other.Close()
	py := poolLanguages(t)["python"]
	other.Warm([]sandbox.Spec{withDefaults(py.Spec(nil, nil, sandbox.Limits{Wall: 10 * time.Second}, policy.BoundByRlimit))}, 3)

	const n = 4
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	markers := make([]string, n)
	var wg sync.WaitGroup
	for i := range markers {
		markers[i] = newMarker()
		spec := pySpec("import time; time.sleep(30)", markers[i])
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = s.Run(ctx, withDefaults(spec))
		}()
	}
	for _, m := range markers {
		waitHostProc(t, m, 20*time.Second)
	}
	for deadline := time.Now().Add(20 * time.Second); other.PoolStats().Ready < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the pool never got ready: %+v", other.PoolStats())
		}
	}
	// Every process with an id of the block, by uid: the sandboxes it belongs to. A
	// sandbox is one tree: its top is the process of the block whose parent (a zygote or
	// a spawner, of the server's uid) is not. The tree, not the pid namespace, tells
	// sandboxes apart: a server in a container has its spawners in the container's pid
	// namespace, and a container without CAP_SYS_PTRACE cannot read other users'
	// namespace links.
	type proc struct{ uid, ppid int }
	procs := map[int]proc{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(strings.Fields(statusField(string(b), "Uid"))[0])
		ppid, _ := strconv.Atoi(statusField(string(b), "PPid"))
		if s.ids.owns(uint32(uid)) {
			procs[pid] = proc{uid, ppid}
		}
	}
	byUID := map[int]map[int]bool{}
	for pid, p := range procs {
		spawner := pid
		for hops := 0; hops < len(procs); hops++ {
			if _, ok := procs[procs[spawner].ppid]; !ok {
				break
			}
			spawner = procs[spawner].ppid
		}
		if byUID[p.uid] == nil {
			byUID[p.uid] = map[int]bool{}
		}
		byUID[p.uid][spawner] = true
	}
	// The uids of this test's sandboxes (spawned by its two zygotes): no process of
	// theirs may belong to another sandbox, of this server or any other. The tree's top
	// is the spawner (a root server's becomes the uid) or the init under a spawner that
	// keeps the server's uid (subordinate ids).
	ours := map[int]bool{zygotePID(s): true, zygotePID(other): true}
	ppidOf := func(pid int) int {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
		n, _ := strconv.Atoi(statusField(string(b), "PPid"))
		return n
	}
	mine := 0
	for uid, spawners := range byUID {
		held := false
		for top := range spawners {
			held = held || ours[procs[top].ppid] || ours[ppidOf(procs[top].ppid)]
		}
		if !held {
			continue
		}
		mine++
		if len(spawners) > 1 {
			t.Errorf("host uid %d is shared by %d live sandboxes (spawners %v)", uid, len(spawners), spawners)
		}
	}
	if mine < n+3 {
		t.Errorf("found %d host uids of this test's sandboxes, want at least %d (%d runs, 3 waiting in the pool)", mine, n+3, n)
	}
	cancel()
	wg.Wait()
}

// TestNoProcessOutlivesItsUID plants a host process of a live sandbox's host uid (what
// an escape would leave behind): when the sandbox ends, the spawner kills it before
// the uid can go to another sandbox.
func TestNoProcessOutlivesItsUID(t *testing.T) {
	recordTier(t)
	s := testSandbox(t)
	if !s.ids.ownUID() {
		t.Skipf("SKIPPING: only a root server's spawner becomes the sandbox's uid and can clear it (scheme %s)", s.ids.scheme)
	}
	marker := newMarker()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan sandbox.Result, 1)
	go func() {
		res, _ := s.Run(ctx, withDefaults(pySpec("import time; time.sleep(30)", marker)))
		done <- res
	}()
	uid, gid := hostIDsOf(t, waitHostProc(t, marker, 20*time.Second))
	left := exec.Command("/bin/sleep", "60")
	left.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	if err := left.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- left.Wait() }()
	cancel()
	<-done
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("the planted process of uid %d ended with %v, want SIGKILL", uid, err)
		}
	case <-time.After(10 * time.Second):
		_ = left.Process.Kill()
		t.Fatalf("a host process of uid %d survived its sandbox", uid)
	}
}

// TestAdvisoryLockResidual pins a residual that docs/tenants.md documents: advisory
// locks on the read-only system files are shared with concurrent runs and the host
// (flock needs only read access, the inode is the host's). A lock one run holds on the
// interpreter is seen by a second run and blocks a host flock -n. Closing it needs a
// private inode per sandbox (an overlay per system dir, which the measurements there
// cost); when that lands this test fails and the docs must change with it.
func TestAdvisoryLockResidual(t *testing.T) {
	s := testSandbox(t)
	target, err := filepath.EvalSymlinks(python)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	spec := pySpec(`
import fcntl, sys, time
f = open(sys.argv[2], "rb")
fcntl.flock(f, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(30)
`, newMarker())
	spec.Argv = append(spec.Argv, target)
	done := runPrinting(t, ctx, s, spec, "the locking run")
	probe := pySpec(`
import fcntl, sys
f = open(sys.argv[2], "rb")
try:
    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("free")
except BlockingIOError:
    print("locked")
`, newMarker())
	probe.Argv = append(probe.Argv, target)
	seen := strings.TrimSpace(string(run(t, probe).Stdout.Bytes()))
	host := exec.Command("/usr/bin/flock", "-n", target, "true").Run()
	cancel()
	<-done
	t.Logf("lock held in one run: a concurrent run sees %q; host flock -n (root): %v", seen, host)
	if seen != "locked" || host == nil {
		t.Errorf("the advisory-lock channel changed (concurrent run: %q, host flock -n: %v): update docs/tenants.md and this test", seen, host)
	}
}

// TestSubordinateIDs runs the tenant tests as an unprivileged server that has
// subordinate ids: each sandbox must get one of them through newuidmap/newgidmap. The
// test gives nobody a block in /etc/subuid and /etc/subgid for its duration.
func TestSubordinateIDs(t *testing.T) {
	if os.Getenv("AIRLOCK_UNPRIV_CHILD") == "1" || !isRoot() {
		t.Skip("needs root to give nobody subordinate ids; the root run covers it")
	}
	for _, tool := range []string{"newuidmap", "newgidmap"} {
		if _, err := exec.LookPath(tool); err != nil {
			sandboxtest.Require(t, fmt.Errorf("%w: %s is not installed (apt-get install uidmap)", sandbox.ErrUnavailable, tool))
		}
	}
	// Just above the default block, which a root server checks against these files.
	const entry = "nobody:1879113728:65536\n"
	for _, f := range []string{"/etc/subuid", "/etc/subgid"} {
		old, err := os.ReadFile(f)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		if strings.Contains(string(old), "\nnobody:") || strings.HasPrefix(string(old), "nobody:") {
			t.Skipf("%s already has a range for nobody; not touching it", f)
		}
		if err := os.WriteFile(f, append(append([]byte{}, old...), entry...), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := os.WriteFile(f, old, 0o644); err != nil {
				t.Errorf("restore %s: %v", f, err)
			}
		})
	}
	// The bounding set stays: newuidmap is setuid root and needs CAP_SETUID to map ids
	// that are not the caller's own, as it has for any ordinary user.
	tests := "TestTenantBudgets|TestHostUIDsDistinct|TestIdentity|TestSubordinateIDsScheme"
	if !boundingHas(unix.CAP_SYS_ADMIN) {
		// A container's bounding set without CAP_SYS_ADMIN keeps newuidmap from mapping
		// them: what is checked there is the server's refusal, with the cause.
		t.Log("no CAP_SYS_ADMIN in the bounding set: checking that the server refuses, naming it")
		tests = "TestSubordinateIDsScheme"
	}
	runAsNobody(t, "the tenant tests with subordinate ids", tests, "--inh-caps=-all")
}

// TestSubordinateIDsScheme is the check TestSubordinateIDs runs as nobody.
func TestSubordinateIDsScheme(t *testing.T) {
	if os.Getenv("AIRLOCK_UNPRIV_CHILD") != "1" || !strings.Contains(flagValue("test.run"), "TestSubordinateIDsScheme") {
		t.Skip("runs inside TestSubordinateIDs")
	}
	if !boundingHas(unix.CAP_SYS_ADMIN) {
		_, err := New(sandbox.Options{})
		if err == nil || !strings.Contains(err.Error(), "CAP_SYS_ADMIN") || !strings.Contains(err.Error(), "newuidmap") {
			t.Fatalf("without CAP_SYS_ADMIN in the bounding set, want a refusal naming newuidmap and CAP_SYS_ADMIN, got %v", err)
		}
		t.Logf("refusal: %v", err)
		return
	}
	if s := testSandbox(t); s.ids.scheme != schemeSubID || s.ids.uid != 1879113728 {
		t.Fatalf("scheme %s from %d, want subordinate ids from 1879113728", s.ids.scheme, s.ids.uid)
	}
}

// TestBusyUIDIsSkipped plants a host process of the uid the next sandbox would get (what
// another server's sandbox is, when that server's /run is not this one's: a container
// without a user namespace of its own): the sandbox gets another uid, and the process
// is left alone.
func TestBusyUIDIsSkipped(t *testing.T) {
	s := testSandbox(t)
	if !s.ids.ownUID() {
		t.Skipf("SKIPPING: only a root server's spawner becomes the sandbox's uid and can check it (scheme %s)", s.ids.scheme)
	}
	s.ids.mu.Lock()
	next := s.ids.next
	s.ids.mu.Unlock()
	if next+8 > s.ids.size {
		t.Skipf("SKIPPING: the block is used up to %d of %d; the next id is not predictable", next, s.ids.size)
	}
	// The next few ids, in case another run of this process takes one meanwhile.
	var planted []*exec.Cmd
	for off := next; off < next+2; off++ {
		p := exec.Command("/bin/sleep", "60")
		p.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: s.ids.uid + off, Gid: s.ids.gid + off, Groups: []uint32{}}}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		planted = append(planted, p)
		defer func() { _ = p.Process.Kill(); _ = p.Wait() }()
	}
	marker := newMarker()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan sandbox.Result, 1)
	go func() {
		res, _ := s.Run(ctx, withDefaults(pySpec("import time; time.sleep(30)", marker)))
		done <- res
	}()
	uid, _ := hostIDsOf(t, waitHostProc(t, marker, 20*time.Second))
	for _, p := range planted {
		if uint32(uid) == p.SysProcAttr.Credential.Uid {
			t.Errorf("the sandbox got host uid %d, which a host process already has", uid)
		}
	}
	cancel()
	if res := <-done; res.Status != sandbox.StatusCancelled {
		t.Errorf("the sandbox ended %s, want cancelled: %s", res.Status, brief(res))
	}
	s.Wait()
	for _, p := range planted {
		if err := p.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("the planted process of uid %d did not survive: %v", p.SysProcAttr.Credential.Uid, err)
		}
	}
}
