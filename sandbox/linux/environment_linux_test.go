package linux

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-mcp/airlock/sandbox"
)

// probeEnvironment attacks the environment mounted at /env: every way to write into it,
// remount or unmount it, or reach its host path. It prints {attempt: "ok" | errno name}
// and what it read.
const probeEnvironment = pyAttempt + `
import ctypes
host = sys.stdin.read()
def write(p, mode):
    with open(p, mode) as f:
        f.write("pwned")
attempt("append /env/lib/open.txt", lambda: write("/env/lib/open.txt", "a"))
attempt("create /env/lib/new.txt", lambda: write("/env/lib/new.txt", "w"))
attempt("create /env/new.txt", lambda: write("/env/new.txt", "w"))
attempt("create via /proc/self/root", lambda: write("/proc/self/root/env/lib/new.txt", "w"))
attempt("mkdir /env/lib/dir", lambda: os.mkdir("/env/lib/dir"))
attempt("chmod /env/lib/open.txt", lambda: os.chmod("/env/lib/open.txt", 0o777))
attempt("utime /env/lib/open.txt", lambda: os.utime("/env/lib/open.txt", (0, 0)))
attempt("rename /env/lib/open.txt", lambda: os.rename("/env/lib/open.txt", "/env/lib/moved.txt"))
attempt("unlink /env/lib/data.txt", lambda: os.unlink("/env/lib/data.txt"))
attempt("symlink in /env/lib", lambda: os.symlink("/workspace", "/env/lib/link"))
attempt("rename out to /workspace", lambda: os.rename("/env/lib/open.txt", "/workspace/stolen"))
attempt("open host path", lambda: open(host + "/lib/data.txt").read())
libc = ctypes.CDLL(None, use_errno=True)
def syscall(fn):
    def call():
        if fn() != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    return call
MS_REMOUNT, MS_BIND = 32, 4096
attempt("remount /env read-write", syscall(lambda: libc.mount(None, b"/env", None, MS_REMOUNT | MS_BIND, None)))
attempt("umount /env", syscall(lambda: libc.umount2(b"/env", 2)))
attempt("mount tmpfs over /env", syscall(lambda: libc.mount(b"x", b"/env", b"tmpfs", 0, None)))
out["read"] = open("/env/lib/data.txt").read()
if os.path.exists("/proc/self/mountinfo"):
    for line in open("/proc/self/mountinfo"):
        f = line.split()
        if f[4] == "/env":
            out["flags"] = f[5]
# The mount's own flags as the kernel reports them, with or without a /proc.
v = os.statvfs("/env").f_flag
out["statvfs"] = ",".join(n for n, bit in (("ro", os.ST_RDONLY), ("nosuid", os.ST_NOSUID), ("nodev", os.ST_NODEV)) if v & bit)
tree = []
for d, dirs, files in os.walk("/env"):
    tree += [os.path.relpath(os.path.join(d, x), "/env") for x in dirs + files]
out["tree"] = sorted(tree)
print(json.dumps(out))
`

// hashTree is a host directory's names, modes and contents as one digest.
func hashTree(t *testing.T, root string) (string, []string) {
	t.Helper()
	h := sha256.New()
	var names []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		names = append(names, rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		h.Write([]byte(rel + "\x00" + fi.Mode().String() + "\x00" + fi.ModTime().String() + "\x00"))
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	return hex.EncodeToString(h.Sum(nil)), names
}

// TestEnvironmentReadOnly mounts an environment into two sandboxes at once and attacks
// it from both: it is visible and readable at /env, nothing can be written, renamed,
// remounted or unmounted there, its host path is not reachable, and the host directory
// is bit for bit what it was. Permissions are wide open on purpose (a world-writable
// file in a world-writable directory): only the read-only mount may stop the writes.
func TestEnvironmentReadOnly(t *testing.T) {
	testSandbox(t)
	env, err := os.MkdirTemp("/var/tmp", "airlock-env-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(env) })
	lib := filepath.Join(env, "lib")
	if err := os.Mkdir(lib, 0o777); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"data.txt": "original", "open.txt": "writable"} {
		if err := os.WriteFile(filepath.Join(lib, name), []byte(content), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{env, lib, filepath.Join(lib, "open.txt")} {
		os.Chmod(p, 0o777) // past the umask
	}
	os.Chmod(env, 0o755)
	before, names := hashTree(t, env)

	want := map[string]string{
		"append /env/lib/open.txt":   "EROFS",
		"create /env/lib/new.txt":    "EROFS",
		"create /env/new.txt":        "EROFS",
		"create via /proc/self/root": "EROFS",
		"mkdir /env/lib/dir":         "EROFS",
		"chmod /env/lib/open.txt":    "EROFS",
		"utime /env/lib/open.txt":    "EROFS",
		"rename /env/lib/open.txt":   "EROFS",
		"unlink /env/lib/data.txt":   "EROFS",
		"symlink in /env/lib":        "EROFS",
		"rename out to /workspace":   "EXDEV",
		"open host path":             "ENOENT",
		// No capability in the sandbox's user namespace, and seccomp denies mount.
		"remount /env read-write": "EPERM",
		"umount /env":             "EPERM",
		"mount tmpfs over /env":   "EPERM",
	}
	noProc := testSandbox(t).adapt.noProc
	if noProc {
		// A container's sandboxes get an empty /proc: no way to the root through it.
		want["create via /proc/self/root"] = "ENOENT"
	}
	var wg sync.WaitGroup
	results := make([]map[string]any, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			spec := pySpec(probeEnvironment, newMarker())
			spec.Environment = env
			spec.Stdin = []byte(env)
			res := run(t, spec)
			if res.Status != sandbox.StatusOK {
				t.Errorf("run %d ended %s: %s", i, res.Status, brief(res))
				return
			}
			if err := json.Unmarshal(res.Stdout.Bytes(), &results[i]); err != nil {
				t.Errorf("run %d: %v: %s", i, err, brief(res))
			}
		}()
	}
	wg.Wait()
	for i, got := range results {
		if got == nil {
			continue
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("run %d: %s: got %v, want %s", i, k, got[k], w)
			}
		}
		if got["read"] != "original" {
			t.Errorf("run %d read %v from /env/lib/data.txt", i, got["read"])
		}
		flags, _ := got["flags"].(string)
		vfs, _ := got["statvfs"].(string)
		for _, f := range []string{"ro", "nosuid", "nodev"} {
			if !noProc && !contains(strings.Split(flags, ","), f) {
				t.Errorf("run %d: /env mounted %q (mountinfo), want %s", i, flags, f)
			}
			if !contains(strings.Split(vfs, ","), f) {
				t.Errorf("run %d: /env mounted %q (statvfs), want %s", i, vfs, f)
			}
		}
		var tree []string
		for _, n := range got["tree"].([]any) {
			tree = append(tree, n.(string))
		}
		if strings.Join(tree, " ") != strings.Join(names, " ") {
			t.Errorf("run %d saw /env as %v, the host has %v", i, tree, names)
		}
	}
	if after, _ := hashTree(t, env); after != before {
		t.Fatal("the environment changed on the host")
	}
}

// TestEscapesWithEnvironment runs the file escape probes (escape_linux_test.go) with an
// environment mounted: no host secret becomes readable and nothing but /dev/null becomes
// writable, /env included, through any path.
func TestEscapesWithEnvironment(t *testing.T) {
	testSandbox(t)
	env, err := os.MkdirTemp("/var/tmp", "airlock-env-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(env) })
	os.Chmod(env, 0o777)
	secret := "airlock-secret-" + randHex(16)
	// A secret next to the environment on the host: its parent is not bound.
	hostFile := filepath.Join(filepath.Dir(env), filepath.Base(env)+"-secret.txt")
	if err := os.WriteFile(hostFile, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(hostFile) })
	if err := os.WriteFile(filepath.Join(env, "lib.py"), []byte("X = 1\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(env, "lib.py"), 0o666)

	reads := []string{hostFile, "/env/../" + filepath.Base(hostFile), "/proc/1/root" + hostFile,
		"/env/../../.." + hostFile, "/etc/shadow", "/proc/1/environ"}
	stdin, _ := json.Marshal(reads)
	spec := pySpec(probeOpen, newMarker())
	spec.Environment, spec.Stdin = env, stdin
	var opened map[string]string
	res := runJSON(t, spec, &opened)
	if strings.Contains(string(res.Stdout.Bytes()), secret) {
		t.Fatalf("the program read a host secret:\n%s", brief(res))
	}
	for p, v := range opened {
		if strings.HasPrefix(v, "ok:") {
			t.Errorf("the program opened %s", p)
		}
	}

	writes := []string{"/env/lib.py", "/env/new.py", "/proc/self/root/env/new.py", "/env/../pwned",
		"/pwned", "/usr/pwned", "/etc/pwned", hostFile, "/dev/null"}
	stdin, _ = json.Marshal(writes)
	spec = pySpec(probeWrite, newMarker())
	spec.Environment, spec.Stdin = env, stdin
	var wrote map[string]string
	runJSON(t, spec, &wrote)
	for _, p := range writes {
		if v := wrote[p]; (v == "ok") != (p == "/dev/null") {
			t.Errorf("write %s: %q", p, v)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(env, "lib.py")); string(b) != "X = 1\n" {
		t.Fatalf("the environment's file changed: %q", b)
	}
	if entries, _ := os.ReadDir(env); len(entries) != 1 {
		t.Fatalf("the environment holds %d entries, want its one file", len(entries))
	}
}
