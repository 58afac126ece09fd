package linux

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
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
		case strings.HasPrefix(p, "/dev/shm/") || strings.HasPrefix(p, "/tmp/"):
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
// trace it; nor signal, trace or read the server's /proc entries.
func TestLandlockTwoRunsInFlight(t *testing.T) {
	if !inLandlockTier() {
		t.Skip("the Landlock tier's own test: TestLandlockTier runs it there")
	}
	const victim = `
import os, socket, sys, time, json
secret = sys.argv[2]
open("secret.txt", "w").write(secret)
open(os.environ["TMPDIR"] + "/secret.txt", "w").write(secret)
s = socket.socket(socket.AF_UNIX)
s.bind(os.environ["TMPDIR"] + "/sock")
s.listen(1)
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
try_("list run dirs", lambda: os.listdir(os.path.dirname(os.path.dirname(t["cwd"]))))
def conn():
    s = socket.socket(socket.AF_UNIX)
    s.connect(t["tmp"] + "/sock")
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
print(json.dumps(out))
`
	secret := "airlock-secret-" + randHex(8)
	vspec := pySpec(victim, newMarker())
	vspec.Argv = append(vspec.Argv, secret)
	vspec.Limits = sandbox.Limits{Wall: 10 * time.Second}
	s := testSandbox(t)
	first := make(chan sandbox.Result, 1)
	go func() {
		res, _ := s.Run(t.Context(), vspec)
		first <- res
	}()
	// The victim prints its facts before it sleeps; the host finds it by its marker.
	marker := vspec.Argv[len(vspec.Argv)-2]
	vpid := waitHostProc(t, marker, 5*time.Second)
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(vpid) + "/cwd")
	if err != nil {
		t.Fatal(err)
	}
	var facts = map[string]any{"victim": vpid, "server": os.Getpid(), "cwd": cwd, "tmp": strings.TrimSuffix(cwd, "/workspace") + "/tmp"}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(facts["tmp"].(string) + "/sock"); err == nil {
			break
		}
	}
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
	if res := <-first; res.Status != sandbox.StatusOK {
		t.Errorf("the victim run: %s", brief(res))
	}
}
