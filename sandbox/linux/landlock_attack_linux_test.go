package linux

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/internal/sandboxtest"
	"github.com/airlock-mcp/airlock/sandbox"
)

// victimFiles leaves what a run's files say about it where a run of the same host uid
// could stat them: a file whose size is its secret's, and a symlink whose target is
// the secret itself, in its workspace and its tmp. Then it waits.
const victimFiles = `
import os, sys, time
secret = sys.argv[2]
for d in (os.getcwd(), os.environ["TMPDIR"]):
    open(d + "/secret.txt", "w").write(secret * 100)
    os.symlink("/target/" + secret, d + "/link")
open(os.environ["TMPDIR"] + "/ready", "w").close()
time.sleep(3)
`

// findsRunFiles looks for another run's files the way a run can, without being told
// where they are: the mount points in the host's mount table under its own directory of
// run directories (a root server mounts each run's workspace and tmp), and the run
// directory named after the cgroup of each process of the victim's tree (its cgroup is
// named after the run's ID). In each it stats, statx's, access()es and readlinks the
// victim's file names: Landlock checks opens, not lookups.
const findsRunFiles = `
import ctypes, errno, json, os, sys
vpid = int(sys.argv[2])
base = os.path.dirname(os.path.dirname(os.getcwd()))
own = os.path.dirname(os.getcwd())
found = set()
for line in open("/proc/self/mountinfo"):
    mp = line.split()[4]
    if mp.startswith(base + "/") and not mp.startswith(own + "/"):
        found.add(mp)
pid = vpid
for _ in range(4):
    try:
        for line in open("/proc/%d/cgroup" % pid):
            name = line.strip().rsplit("/", 1)[-1]
            if "-" in name:
                run = name.split("-", 1)[1]
                for d in ("workspace", "tmp"):
                    found.add(base + "/" + run + "/" + d)
        pid = int(open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        break
libc = ctypes.CDLL(None, use_errno=True)
out = {"found": sorted(found), "seen": {}}
def statx(p):
    buf = ctypes.create_string_buffer(256)
    if libc.statx(-100, p.encode(), 0x100, 0xfff, buf) != 0:
        raise OSError(ctypes.get_errno(), "statx")
    return int.from_bytes(buf.raw[40:48], "little")
for d in found:
    for name, f in [("stat", lambda p: os.stat(p + "/secret.txt").st_size),
                    ("statx", lambda p: statx(p + "/secret.txt")),
                    ("access", lambda p: os.access(p + "/secret.txt", os.F_OK) or os.strerror(errno.ENOENT)),
                    ("readlink", lambda p: os.readlink(p + "/link"))]:
        try:
            out["seen"][name + " " + d] = str(f(d))
        except OSError as e:
            out["seen"][name + " " + d] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(out))
`

// TestLandlockRunFilesUnfound: a run cannot find another run's files in flight, not
// even their metadata. Landlock checks opens, not lookups, so where the runs share a
// host uid (an unprivileged server; a root server with sandbox.uid_range = "off") a
// run that knows a path in another run's workspace may stat it and read where a
// symlink points; and the paths were in the open: the host's mount table lists each
// run's workspace and tmp mount, and /proc/PID/cgroup each run's ID, its directory's
// name. The run's own directories are named by a secret no /proc file holds.
func TestLandlockRunFilesUnfound(t *testing.T) {
	configs := map[string]sandbox.Options{"the server's uid scheme": {Isolation: sandbox.IsolationLandlock}}
	if isRoot() {
		configs["a shared uid (uid_range off)"] = sandbox.Options{Isolation: sandbox.IsolationLandlock, UIDRange: "off"}
	}
	for name, opts := range configs {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			s, err := New(opts)
			sandboxtest.Require(t, err)
			t.Cleanup(func() { _ = s.Close() })
			secret := "airlock-secret-" + randHex(8)
			vspec := pySpec(victimFiles, newMarker())
			vspec.Argv = append(vspec.Argv, secret)
			vspec.Limits = sandbox.Limits{Wall: 10 * time.Second}
			done := make(chan sandbox.Result, 1)
			go func() {
				res, _ := s.Run(t.Context(), withDefaults(vspec))
				done <- res
			}()
			vpid := waitHostProc(t, vspec.Argv[len(vspec.Argv)-2], 5*time.Second)
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				a, _ := filepath.Glob(s.ll.base + "/*/tmp/ready")
				b, _ := filepath.Glob(s.ll.base + "/*/tmp/*/ready")
				if len(a)+len(b) > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the victim's ready file did not appear in %s", s.ll.base)
				}
			}
			aspec := withDefaults(pySpec(findsRunFiles, newMarker()))
			aspec.Argv = append(aspec.Argv, strconv.Itoa(vpid))
			res, err := s.Run(t.Context(), aspec)
			if err != nil || res.Status != sandbox.StatusOK {
				t.Fatalf("attacker: %v %s", err, brief(res))
			}
			var got struct {
				Found []string          `json:"found"`
				Seen  map[string]string `json:"seen"`
			}
			out := strings.TrimSpace(string(res.Stdout.Bytes()))
			if err := json.Unmarshal([]byte(out[strings.LastIndexByte(out, '\n')+1:]), &got); err != nil {
				t.Fatalf("attacker output: %v\n%s", err, brief(res))
			}
			t.Logf("found %v; attempts %v", got.Found, got.Seen)
			// A root server mounts the run's directories and makes its cgroups: both
			// name them, so the attack has somewhere to look.
			if isRoot() && len(got.Found) == 0 {
				t.Errorf("the attacker found no candidate for the other run's directories: the test lost its teeth")
			}
			for k, v := range got.Seen {
				// Another uid's directory (EACCES), or no such file (ENOENT): either way
				// nothing of the victim. A size, a link target: found.
				if v != "EACCES" && v != "ENOENT" && v != "No such file or directory" {
					t.Errorf("%s: %q: the other run's file was found", k, v)
				}
				if strings.Contains(v, secret) {
					t.Errorf("%s: the other run's secret leaked", k)
				}
			}
			if vres := <-done; vres.Status != sandbox.StatusOK {
				t.Errorf("the victim run: %s", brief(vres))
			}
		})
	}
}

// TestLandlockPidfdInfoRefused: a run holds a pidfd of another run in flight (there is
// no pid namespace to hide it) and asks the kernel about it with PIDFD_GET_INFO, while
// it runs and once it has exited: its uids, its cgroup, its exit status. The program
// filter answers as a kernel without the ioctl does. Its namespaces through the pidfd
// stay closed as well (the kernel's ptrace check, which Landlock refuses).
func TestLandlockPidfdInfoRefused(t *testing.T) {
	s, err := New(sandbox.Options{Isolation: sandbox.IsolationLandlock})
	sandboxtest.Require(t, err)
	t.Cleanup(func() { _ = s.Close() })
	const victim = `
import sys, time
time.sleep(1)
sys.exit(7)
`
	const attacker = `
import ctypes, json, os, select, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
fd = os.pidfd_open(int(sys.argv[2]))
def info():
    out = {}
    # struct pidfd_info: 64 bytes in 6.13, 72 since 6.16; the size is in the command.
    for size in (64, 72):
        buf = ctypes.create_string_buffer(size)
        struct.pack_into("=Q", buf, 0, 0xf)  # PID, CREDS, CGROUPID, EXIT
        if libc.ioctl(fd, 0xc000ff0b | size << 16, buf) != 0:
            out[size] = os.strerror(ctypes.get_errno())
        else:
            mask, cgroup, pid, tgid, ppid, ruid = struct.unpack_from("=QQIIII", buf.raw)
            out[size] = "mask %#x pid %d ruid %d cgroup %d exit %d" % (mask, pid, ruid, cgroup, struct.unpack_from("=i", buf.raw, 60)[0])
    return out
running = info()
# PIDFD_GET_{CGROUP,IPC,MNT,NET,PID,PID_FOR_CHILDREN,TIME,TIME_FOR_CHILDREN,USER,UTS}_NAMESPACE:
# a namespace descriptor of the other run's (the host's) would be a way in.
ns = {}
for nr in range(1, 11):
    r = libc.ioctl(fd, 0xff00 | nr, 0)
    ns[str(nr)] = "fd" if r >= 0 else os.strerror(ctypes.get_errno())
running["namespaces"] = json.dumps(ns)
select.select([fd], [], [], 5)
time.sleep(0.3)  # reaped by its init
print(json.dumps({"running": running, "exited": info()}))
`
	vspec := withDefaults(pySpec(victim, newMarker()))
	done := make(chan sandbox.Result, 1)
	go func() {
		res, _ := s.Run(t.Context(), vspec)
		done <- res
	}()
	vpid := waitHostProc(t, vspec.Argv[len(vspec.Argv)-1], 5*time.Second)
	aspec := withDefaults(pySpec(attacker, newMarker()))
	aspec.Argv = append(aspec.Argv, strconv.Itoa(vpid))
	res, err := s.Run(t.Context(), aspec)
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("attacker: %v %s", err, brief(res))
	}
	var got map[string]map[string]string
	out := strings.TrimSpace(string(res.Stdout.Bytes()))
	if err := json.Unmarshal([]byte(out[strings.LastIndexByte(out, '\n')+1:]), &got); err != nil {
		t.Fatalf("attacker output: %v\n%s", err, brief(res))
	}
	t.Logf("PIDFD_GET_INFO on the other run: %v", got)
	for when, sizes := range got {
		if ns := sizes["namespaces"]; when == "running" && (ns == "" || strings.Contains(ns, `"fd"`)) {
			t.Errorf("a namespace of the other run through its pidfd: %s", ns)
		}
		delete(sizes, "namespaces")
		for size, v := range sizes {
			if v != "Inappropriate ioctl for device" {
				t.Errorf("%s, a %s-byte struct: %s, want ENOTTY", when, size, v)
			}
		}
	}
	if vres := <-done; vres.Status != sandbox.StatusError || vres.ExitCode != 7 {
		t.Errorf("the victim run: %s", brief(vres))
	}
}

// TestLandlockRefusesNetwork: the tier has no network namespace to bridge or share, so
// a spec asking for a network is refused before anything runs (config refuses the
// setting too: "runs only with network = none"), whatever filters the backend was made
// with; the call's program never starts (TestNetworkDenied covers network "none").
func TestLandlockRefusesNetwork(t *testing.T) {
	s, err := New(sandbox.Options{Isolation: sandbox.IsolationLandlock, Networks: []sandbox.Network{sandbox.NetworkNone, sandbox.NetworkHost, sandbox.NetworkAllowlist}})
	sandboxtest.Require(t, err)
	t.Cleanup(func() { _ = s.Close() })
	for _, n := range []sandbox.Network{sandbox.NetworkHost, sandbox.NetworkAllowlist} {
		marker := newMarker()
		spec := withDefaults(pySpec("import socket; socket.create_connection(('127.0.0.1', 9)); print('reached')", marker))
		spec.Network = n
		if n == sandbox.NetworkAllowlist {
			spec.Egress = &sandbox.Egress{Domains: []string{"localhost"}, Ports: []int{9}, AllowLoopback: true, MaxBytes: 1 << 20, MaxConnections: 4}
		}
		res, err := s.Run(t.Context(), spec)
		if !errors.Is(err, sandbox.ErrInvalidSpec) || res.Status != sandbox.StatusSandboxError || !strings.Contains(res.Detail, "namespace tier") {
			t.Errorf("network %q in the Landlock tier: %v, %s; want ErrInvalidSpec naming the namespace tier", n, err, brief(res))
		}
		if strings.Contains(string(res.Stdout.Bytes()), "reached") {
			t.Errorf("network %q: the program ran", n)
		}
	}
}

// TestLandlockSpawnerKilledLeavesNoProcess: the kernel may kill a run's spawner on its
// own (the OOM killer's first choice is a sandbox process: oom_score_adj 1000), and with
// no pid namespace nothing then ended the program's processes: the init died with its
// spawner by SIGKILL, before any sweep, and a setsid'd grandchild ran on, reparented to
// the host's pid 1, past the run's wall time. The test kills the spawner as the OOM
// killer would; the run's processes must all be gone once Run returns.
func TestLandlockSpawnerKilledLeavesNoProcess(t *testing.T) {
	s, err := New(sandbox.Options{Isolation: sandbox.IsolationLandlock})
	sandboxtest.Require(t, err)
	t.Cleanup(func() { _ = s.Close() })
	const prog = `
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(30)
    os._exit(0)
time.sleep(30)
`
	marker := newMarker()
	spec := withDefaults(pySpec(prog, marker))
	spec.Limits.Wall = 20 * time.Second
	done := make(chan sandbox.Result, 1)
	go func() {
		res, _ := s.Run(t.Context(), spec)
		done <- res
	}()
	program := waitHostProc(t, marker, 5*time.Second)
	for deadline := time.Now().Add(5 * time.Second); len(hostProcsWith(marker)) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the grandchild did not start: %v", hostProcsWith(marker))
		}
	}
	parent := func(pid int) int {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 2 {
			t.Fatalf("/proc/%d/stat: %q", pid, b)
		}
		p, _ := strconv.Atoi(f[1])
		return p
	}
	spawner := parent(parent(program))
	if spawner <= 1 || spawner == os.Getpid() {
		t.Fatalf("the program's grandparent is %d, not a spawner", spawner)
	}
	if err := syscall.Kill(spawner, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res := <-done
	t.Logf("run: %s", brief(res))
	for deadline := time.Now().Add(2 * time.Second); len(hostProcsWith(marker)) > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	assertNoSurvivors(t, marker)
}
