package linux

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/sandbox"
)

// probeOpen tries every path from stdin (a JSON list) for reading, and for every
// process visible in /proc also through its cwd and root links, and prints
// {path: "ok:<content>" | errno name}.
const probeOpen = `
import json, os, sys, errno
paths = json.load(sys.stdin)
extra = []
for p in list(paths):
    if not p.startswith("/tmp/") and not p.startswith("/root/"):
        continue
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            extra += ["/proc/%s/cwd/../../../..%s" % (pid, p), "/proc/%s/root%s" % (pid, p)]
out = {}
for p in paths + extra:
    try:
        with open(p, "rb") as f:
            out[p] = "ok:" + f.read(4096).decode("latin-1")
    except OSError as e:
        out[p] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(out))
`

func TestHostFilesUnreachable(t *testing.T) {
	recordTier(t)
	secret := "airlock-secret-" + randHex(16)
	var hostFiles []string
	tmpFile := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(tmpFile, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	// World-readable on purpose: only the sandbox may keep the program from it.
	os.Chmod(filepath.Dir(tmpFile), 0o755)
	hostFiles = append(hostFiles, tmpFile)
	// Host canaries in the other shared scratch places, and in the server's state dir.
	for _, dir := range []string{"/var/tmp", "/dev/shm", lockDir()} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, "airlock-canary-"+randHex(4))
		if err := os.WriteFile(f, []byte(secret), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(f) })
		hostFiles = append(hostFiles, f)
	}
	if isRoot() {
		rootFile := "/root/airlock-secret-" + randHex(4)
		if err := os.WriteFile(rootFile, []byte(secret), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(rootFile) })
		hostFiles = append(hostFiles, rootFile)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range hostFiles {
		paths = append(paths, f, "/proc/1/root"+f, "/proc/self/root"+f, "/../../../.."+f,
			"/workspace/../../.."+f, "/proc/1/cwd/../.."+f, "/proc/self/cwd/../../.."+f)
	}
	// The server's own binary, by its host path and through the init's /proc entries.
	paths = append(paths, self, "/proc/1/exe", "/proc/1/environ", "/proc/1/mem", "/proc/1/fd/0",
		"/proc/1/fd/4", "/proc/1/root/etc/shadow", "/etc/shadow", "/etc/gshadow",
		"/etc/sudoers", "/etc/ssh/ssh_host_ed25519_key", "/root/.bash_history", "/etc/machine-id", "/home")
	stdin, _ := json.Marshal(paths)
	spec := pySpec(probeOpen, newMarker())
	spec.Stdin = stdin
	var got map[string]string
	res := runJSON(t, spec, &got)
	if strings.Contains(string(res.Stdout.Bytes()), secret) {
		t.Fatalf("the program read a host secret:\n%s", brief(res))
	}
	for _, p := range paths {
		if _, ok := got[p]; !ok {
			t.Errorf("probe did not try %s", p)
		}
	}
	want := map[string]string{
		// Not in the sandbox's /etc at all: no such file, not merely unreadable.
		"/etc/shadow": "ENOENT", "/etc/gshadow": "ENOENT", "/etc/sudoers": "ENOENT",
		"/etc/machine-id": "ENOENT", "/root/.bash_history": "ENOENT", self: "ENOENT", "/home": "ENOENT",
		// The init is not dumpable: its /proc entries are closed to the program.
		"/proc/1/exe": "EACCES", "/proc/1/environ": "EACCES", "/proc/1/mem": "EACCES",
		"/proc/1/fd/0": "EACCES", "/proc/1/fd/4": "EACCES",
	}
	noProcExpect(t, want, "ENOENT")
	if inLandlockTier() {
		// The host's tree is there, and Landlock refuses every path it does not allow;
		// /proc/1 is the host's init, closed by Landlock's ptrace rule.
		for p := range want {
			want[p] = "EACCES"
			if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
				// Not on this host: the lookup fails before Landlock is asked, with
				// ENOENT or the DAC's EACCES; either way nothing is read.
				delete(want, p)
			}
		}
		for _, f := range hostFiles {
			want[f] = "EACCES"
		}
	}
	if mountPoint(t, self) && !inLandlockTier() {
		// A file a container engine bound under /usr comes along with /usr, covered
		// (root_linux.c, cover_submounts): there, but nothing can be read from it.
		want[self] = "EACCES"
	}
	for p, v := range got {
		if strings.HasPrefix(v, "ok:") {
			t.Errorf("the program opened %s", p)
			continue
		}
		if w, ok := want[p]; ok && v != w {
			t.Errorf("open %s: %s, want %s", p, v, w)
		}
	}
	t.Logf("%d paths tried, none readable", len(got))
}

// TestNoServerFilesInTree walks the sandbox's whole tree outside the read-only system
// dirs: nothing of the server (its binary, config, a Go build dir) may be there.
func TestNoServerFilesInTree(t *testing.T) {
	recordTier(t)
	const walk = `
import os, json
seen = []
try:
    tops = os.listdir("/")
except OSError:
    # The Landlock tier: / is not listable; walk what a host could have there.
    tops = ["etc", "dev", "tmp", "var", "home", "root", "run", "opt", "srv", "mnt", "media", "workspace", "sys", "boot"]
for top in sorted(tops):
    if top in ("proc", "usr", "lib", "lib64", "lib32", "libx32", "bin", "sbin"):
        continue
    for d, dirs, files in os.walk("/" + top):
        seen += [os.path.join(d, x) for x in dirs + files]
print(json.dumps({"root": sorted(tops), "seen": seen}))
`
	var got struct {
		Root []string `json:"root"`
		Seen []string `json:"seen"`
	}
	runJSON(t, pySpec(walk, newMarker()), &got)
	want := []string{"bin", "dev", "etc", "lib", "lib64", "proc", "sbin", "tmp", "usr", "workspace"}
	if inLandlockTier() {
		want = append(want, "boot", "home", "media", "mnt", "opt", "root", "run", "srv", "sys", "var")
	}
	for _, name := range got.Root {
		if !contains(want, name) {
			t.Errorf("unexpected top-level entry /%s", name)
		}
	}
	for _, p := range got.Seen {
		low := strings.ToLower(p)
		if strings.Contains(low, "airlock") || strings.Contains(low, ".test") ||
			strings.Contains(low, "go-build") || strings.Contains(low, "shadow") {
			t.Errorf("server or host file visible: %s", p)
		}
	}
	t.Logf("%d entries outside system dirs, none from the server", len(got.Seen))
}

// probeMetadata tries to change the metadata of a host file and its directory (argv[2],
// argv[3]) by every syscall that can, and prints {attempt: "ok" or errno}.
const probeMetadata = pyAttempt + `
f, d = sys.argv[2], sys.argv[3]
attempt("chmod file", lambda: os.chmod(f, 0o666))
attempt("chmod dir", lambda: os.chmod(d, 0o777))
attempt("lchmod file (fchmodat)", lambda: os.chmod(f, 0o666, follow_symlinks=False))
attempt("chown file", lambda: os.chown(f, -1, os.getgid()))
attempt("lchown file", lambda: os.lchown(f, -1, os.getgid()))
attempt("utime file", lambda: os.utime(f, (0, 0)))
attempt("utime dir", lambda: os.utime(d, (0, 0)))
attempt("setxattr file", lambda: os.setxattr(f, "user.airlock", b"pwned"))
attempt("removexattr file", lambda: os.removexattr(f, "user.kept"))
def by_path_fd():
    fd = os.open(f, os.O_PATH)
    try:
        os.chmod(fd, 0o666)
    finally:
        os.close(fd)
attempt("fchmod O_PATH", by_path_fd)
print(json.dumps(out))
`

// TestMetadataOutsideWorkspace: a program cannot change the mode, owner, times or
// extended attributes of a host file or directory outside the workspace. The namespace
// tier does not show them; the Landlock tier shows the host's tree but does not cover
// metadata, and under an unprivileged server the runs have the server's uid, which owns
// this file: the kernel's owner check passes, so seccomp must refuse.
func TestMetadataOutsideWorkspace(t *testing.T) {
	recordTier(t)
	dir := filepath.Join(t.TempDir(), "host")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// The sandbox's uid must reach the directory to try, as it could an unprivileged
	// server's state directory or its user's home.
	os.Chmod(filepath.Dir(dir), 0o755)
	file := filepath.Join(dir, "state")
	if err := os.WriteFile(file, []byte("host"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(file, "user.kept", []byte("1"), 0); err != nil {
		t.Fatalf("set an xattr on the host file: %v", err)
	}
	stat := func(p string) unix.Stat_t {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	fileBefore, dirBefore := stat(file), stat(dir)
	spec := pySpec(probeMetadata, newMarker())
	spec.Argv = append(spec.Argv, file, dir)
	var got map[string]string
	runJSON(t, spec, &got)
	t.Logf("as uid %d: %v", os.Geteuid(), got)
	for name, v := range got {
		if v == "ok" {
			t.Errorf("%s: the program changed a host file's metadata", name)
		}
	}
	if len(got) != 10 {
		t.Errorf("%d attempts reported, want 10: %v", len(got), got)
	}
	for _, c := range []struct {
		path          string
		before, after unix.Stat_t
	}{{file, fileBefore, stat(file)}, {dir, dirBefore, stat(dir)}} {
		if c.after.Mode != c.before.Mode || c.after.Uid != c.before.Uid || c.after.Gid != c.before.Gid || c.after.Mtim != c.before.Mtim {
			t.Errorf("%s changed: mode %o → %o, owner %d:%d → %d:%d, mtime %v → %v", c.path, c.before.Mode, c.after.Mode,
				c.before.Uid, c.before.Gid, c.after.Uid, c.after.Gid, c.before.Mtim, c.after.Mtim)
		}
	}
	buf := make([]byte, 16)
	if _, err := unix.Getxattr(file, "user.airlock", buf); err == nil {
		t.Errorf("the program set an xattr on the host file")
	}
	if _, err := unix.Getxattr(file, "user.kept", buf); err != nil {
		t.Errorf("the program removed the host file's xattr: %v", err)
	}
}

// probeWorldWritable tries what the kernel lets anyone who may write a file do without
// opening it: set and remove its user extended attributes (argv[2] a file, argv[3] a
// directory; the file again through a read-only descriptor, where the tier lets it be
// opened). It prints {attempt: "ok" or errno}.
const probeWorldWritable = pyAttempt + `
f, d = sys.argv[2], sys.argv[3]
attempt("setxattr file", lambda: os.setxattr(f, "user.airlock", b"a run's data" * 300))
attempt("setxattr dir", lambda: os.setxattr(d, "user.airlock", b"a run's data"))
attempt("lsetxattr file", lambda: os.setxattr(f, "user.airlock", b"x", follow_symlinks=False))
attempt("removexattr file", lambda: os.removexattr(f, "user.kept"))
attempt("removexattr dir", lambda: os.removexattr(d, "user.kept"))
def by_fd():
    fd = os.open(f, os.O_RDONLY)
    try:
        os.setxattr(fd, "user.airlock", b"x")
    finally:
        os.close(fd)
attempt("fsetxattr read-only fd", by_fd)
print(json.dumps(out))
`

// searchableTempDir is a test directory every uid may search, as /tmp and /dev/shm
// are: a run's own uid must reach what the test puts there.
func searchableTempDir(t *testing.T) string {
	t.Helper()
	top := t.TempDir()
	for _, d := range []string{filepath.Dir(top), top} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return top
}

// runAttempts runs a pyAttempt probe with args and returns its {attempt: outcome},
// failing the test unless all n attempts reported.
func runAttempts(t *testing.T, probe string, n int, args ...string) map[string]string {
	t.Helper()
	spec := pySpec(probe, newMarker())
	spec.Argv = append(spec.Argv, args...)
	var got map[string]string
	runJSON(t, spec, &got)
	t.Logf("as uid %d: %v", os.Geteuid(), got)
	if len(got) != n {
		t.Errorf("%d attempts reported, want %d: %v", len(got), n, got)
	}
	return got
}

// TestWorldWritableHostFiles: a program cannot store data in, or take it from, the
// extended attributes of a host file or directory anyone may write (a 0666 file in
// /tmp or /dev/shm, a 0777 directory). The kernel asks only for write permission to
// set a user xattr, and Landlock checks opens, not xattrs: under a root server, where
// each run has a uid of its own and the metadata refusals of a shared uid do not apply,
// a run could write 64 KiB per name into such a host file, and a later run of another
// tenant read it back. The namespace tier does not show the host's files.
func TestWorldWritableHostFiles(t *testing.T) {
	recordTier(t)
	top := searchableTempDir(t)
	file, dir := filepath.Join(top, "shared"), filepath.Join(top, "drop")
	if err := os.WriteFile(file, []byte("host"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	// Chmod, not the umask's modes.
	for p, mode := range map[string]os.FileMode{file: 0o666, dir: 0o777} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := unix.Setxattr(p, "user.kept", []byte("1"), 0); err != nil {
			t.Skipf("this file system has no user extended attributes (%v): nothing to attempt", err)
		}
	}
	got := runAttempts(t, probeWorldWritable, 6, file, dir)
	for name, v := range got {
		if v == "ok" {
			t.Errorf("%s: the program changed a world-writable host file's extended attributes", name)
		}
	}
	buf := make([]byte, 8)
	for _, p := range []string{file, dir} {
		if _, err := unix.Getxattr(p, "user.airlock", buf); err == nil {
			t.Errorf("%s: the program set an xattr on it", p)
		}
		if _, err := unix.Getxattr(p, "user.kept", buf); err != nil {
			t.Errorf("%s: the program removed its xattr: %v", p, err)
		}
	}
}

// probeXattrRead tries to read the extended attributes of a host file (argv[2]) by
// path, without following a symlink, and through an O_PATH descriptor, which Landlock
// does not check. It prints {attempt: what came back, or errno}.
const probeXattrRead = `
import errno, json, os, sys
f = sys.argv[2]
out = {}
def attempt(name, fn):
    try:
        out[name] = repr(fn())
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
attempt("getxattr", lambda: os.getxattr(f, "user.origin"))
attempt("lgetxattr", lambda: os.getxattr(f, "user.origin", follow_symlinks=False))
attempt("listxattr", lambda: os.listxattr(f))
attempt("llistxattr", lambda: os.listxattr(f, follow_symlinks=False))
def by_path_fd(fn):
    def go():
        fd = os.open(f, os.O_PATH)
        try:
            return fn(fd)
        finally:
            os.close(fd)
    return go
attempt("fgetxattr O_PATH", by_path_fd(lambda fd: os.getxattr(fd, "user.origin")))
attempt("flistxattr O_PATH", by_path_fd(os.listxattr))
print(json.dumps(out))
`

// TestHostXattrsUnreadable: a program cannot read the extended attributes of a host
// file it may not read, or list them. Landlock checks opens, and getxattr and
// listxattr open nothing: in the Landlock tier a run read a world-readable host file's
// user xattrs outside the granted paths (a browser's user.xdg.origin.url on a download:
// the URL it came from, a token with it), and under an unprivileged server those of
// every file of the server's user, mode 0600 or not. The namespace tier does not show
// the host's files.
func TestHostXattrsUnreadable(t *testing.T) {
	recordTier(t)
	top := searchableTempDir(t)
	file := filepath.Join(top, "download.pdf")
	if err := os.WriteFile(file, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	const origin = "https://intranet.example/report?token=airlock-secret"
	if err := unix.Setxattr(file, "user.origin", []byte(origin), 0); err != nil {
		t.Skipf("this file system has no user extended attributes (%v): nothing to attempt", err)
	}
	got := runAttempts(t, probeXattrRead, 6, file)
	for name, v := range got {
		if strings.Contains(v, "airlock-secret") || strings.Contains(v, "user.origin") {
			t.Errorf("%s: the program read a host file's extended attributes: %s", name, v)
		}
	}
}

// probeInodeFlags tries, through a descriptor of a readable file (argv[2]) that the
// run's uid may own, what the kernel lets a file's owner do with any descriptor: set
// its inode flags (FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR) and take a lease, which holds
// every other opener for writing or truncating for lease-break-time (45 s by default).
// It prints {attempt: "ok" or errno}.
const probeInodeFlags = pyAttempt + `
import array, fcntl, struct
f = sys.argv[2]
def with_fd(fn):
    def go():
        fd = os.open(f, os.O_RDONLY)
        try:
            fn(fd)
        finally:
            os.close(fd)
    return go
def setflags(fd):
    buf = array.array("i", [0, 0])
    fcntl.ioctl(fd, 0x80086601, buf, True)  # FS_IOC_GETFLAGS
    buf[0] |= 0x40 | 0x8                    # FS_NODUMP_FL, FS_SYNC_FL
    fcntl.ioctl(fd, 0x40086602, buf)        # FS_IOC_SETFLAGS
def fssetxattr(fd):
    buf = bytearray(28)
    fcntl.ioctl(fd, 0x801c581f, buf, True)  # FS_IOC_FSGETXATTR
    x = struct.unpack_from("I", buf)[0] | 0x80 | 0x40  # FS_XFLAG_NODUMP, FS_XFLAG_NOATIME
    struct.pack_into("I", buf, 0, x)
    fcntl.ioctl(fd, 0x401c5820, bytes(buf))  # FS_IOC_FSSETXATTR
def lease(fd):
    fcntl.fcntl(fd, 1024, fcntl.F_RDLCK)     # F_SETLEASE
    if fcntl.fcntl(fd, 1025) != fcntl.F_RDLCK:  # F_GETLEASE
        raise OSError(errno.EINVAL, "no lease")
def lease_high_bits(fd):
    # The command with garbage above its 32 bits, which the kernel ignores.
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.syscall(72, fd, ctypes.c_ulong((1 << 32) | 1024), 0) != 0:  # SYS_fcntl (amd64)
        raise OSError(ctypes.get_errno(), "fcntl")
attempt("FS_IOC_SETFLAGS", with_fd(setflags))
attempt("FS_IOC_FSSETXATTR", with_fd(fssetxattr))
attempt("F_SETLEASE", with_fd(lease))
if os.uname().machine == "x86_64":
    attempt("F_SETLEASE high bits", with_fd(lease_high_bits))
print(json.dumps(out))
`

// TestInodeFlagsOutsideWorkspace: a program cannot set the inode flags of a host file it
// can read, nor take a lease on it. The file sits in a directory granted read-only, as
// an interpreter's prefix outside the system dirs is (nvm's or pyenv's, in the home of
// the user an unprivileged server runs as). The namespace tier binds it read-only, which
// refuses flags (EROFS); the Landlock tier grants it read-only, which Landlock checks at
// open only, and where the runs have the server's uid, which owns the file, the kernel's
// owner check passes: a run could mark the user's files nodump (gone from backups) or
// sync, or lease one so that whatever writes it next waits. Seccomp must refuse.
func TestInodeFlagsOutsideWorkspace(t *testing.T) {
	recordTier(t)
	// Not under /tmp: the namespace tier's /tmp is the sandbox's own, over any bind.
	dir, err := os.MkdirTemp("/var/tmp", "airlock-prefix-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "lib.py")
	if err := os.WriteFile(file, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	flags := func() (uint32, uint32) {
		fd, err := unix.Open(file, unix.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		fl, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
		if err != nil {
			t.Fatalf("FS_IOC_GETFLAGS on the host file: %v", err)
		}
		var fsx [28]byte
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), 0x801c581f, uintptr(unsafe.Pointer(&fsx[0]))); e != 0 {
			t.Fatalf("FS_IOC_FSGETXATTR on the host file: %v", e)
		}
		return fl, binary.NativeEndian.Uint32(fsx[:4])
	}
	flagsBefore, xflagsBefore := flags()
	spec := pySpec(probeInodeFlags, newMarker())
	spec.Argv = append(spec.Argv, file)
	spec.Mounts = []string{dir}
	var got map[string]string
	runJSON(t, spec, &got)
	t.Logf("as uid %d: %v", os.Geteuid(), got)
	want := 3
	if runtime.GOARCH == "amd64" {
		want = 4
	}
	if len(got) != want {
		t.Errorf("%d attempts reported, want %d: %v", len(got), want, got)
	}
	for name, v := range got {
		if v == "ok" {
			t.Errorf("%s: the program changed a host file's inode flags or leased it", name)
		}
	}
	if fl, xfl := flags(); fl != flagsBefore || xfl != xflagsBefore {
		t.Errorf("the host file's flags changed: %#x → %#x, xflags %#x → %#x", flagsBefore, fl, xflagsBefore, xfl)
	}
}

// probeDevices uses each device node of the sandbox's /dev as a program would (write,
// read) and tries to change its times, mode and extended attributes; it prints
// {attempt: "ok" or errno}.
const probeDevices = pyAttempt + `
def write(p):
    fd = os.open(p, os.O_WRONLY)
    try:
        os.write(fd, b"x")
    finally:
        os.close(fd)
def read(p):
    with open(p, "rb") as f:
        if len(f.read(8)) != 8:
            raise OSError(errno.EIO, "short read")
for n in ("null", "zero", "full", "random", "urandom"):
    p = "/dev/" + n
    if n == "null":
        attempt("write " + p, lambda: write(p))
    else:
        attempt("read " + p, lambda: read(p))
    attempt("utime now " + p, lambda: os.utime(p))
    attempt("utime " + p, lambda: os.utime(p, (0, 0)))
    attempt("chmod " + p, lambda: os.chmod(p, 0o600))
    attempt("setxattr " + p, lambda: os.setxattr(p, "user.airlock", b"1"))
print(json.dumps(out))
`

// TestDeviceNodesUnchanged: the sandbox's /dev/null and the like are the host's device
// nodes (binds: a device cannot be created in a user namespace), and the program must
// be able to write and read them but not change them. A writable bind let it set the
// host's /dev/null, /dev/urandom, ... times to now, which the kernel allows anyone who
// may write a file: a change on the host, seen by every other run (a channel between
// two runs in flight). A read-only bind keeps the nodes usable (the kernel's read-only
// checks spare devices) and refuses the times with EROFS.
func TestDeviceNodesUnchanged(t *testing.T) {
	recordTier(t)
	notInTier(t, "the host's own /dev: a root server's run may set the time of a world-writable host file to now (utimensat needs only write permission, which Landlock does not check)")
	type times struct{ m, c unix.Timespec }
	stat := func() map[string]times {
		got := map[string]times{}
		for _, n := range devNodes {
			var st unix.Stat_t
			if err := unix.Stat("/dev/"+n, &st); err != nil {
				t.Fatal(err)
			}
			got[n] = times{st.Mtim, st.Ctim}
		}
		return got
	}
	before := stat()
	var got map[string]string
	runJSON(t, pySpec(probeDevices, newMarker()), &got)
	t.Logf("%v", got)
	if len(got) != 5*len(devNodes) {
		t.Errorf("%d attempts reported, want %d: %v", len(got), 5*len(devNodes), got)
	}
	for name, v := range got {
		usable := strings.HasPrefix(name, "write ") || strings.HasPrefix(name, "read ")
		if usable && v != "ok" {
			t.Errorf("%s: %s, want ok: the node must stay usable", name, v)
		}
		if !usable && v == "ok" {
			t.Errorf("%s: the program changed a host device node", name)
		}
	}
	after := stat()
	for _, n := range devNodes {
		if after[n] != before[n] {
			t.Errorf("the host's /dev/%s changed: times %+v → %+v", n, before[n], after[n])
		}
	}
}

// probeWrite tries to create or modify each path from stdin and prints {path: errno}.
const probeWrite = `
import json, os, sys, errno
out = {}
for p in json.load(sys.stdin):
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(fd, b"pwned")
        os.close(fd)
        out[p] = "ok"
    except OSError as e:
        out[p] = errno.errorcode.get(e.errno, str(e.errno))
for p in ["/pwned-dir", "/usr/pwned-dir", "/etc/pwned-dir", "/dev/pwned-dir", "/proc/pwned-dir"]:
    try:
        os.mkdir(p)
        out["mkdir " + p] = "ok"
    except OSError as e:
        out["mkdir " + p] = errno.errorcode.get(e.errno, str(e.errno))
for p in ["/etc/passwd", "/usr/bin/python3", "/etc/hosts"]:
    try:
        os.rename(p, os.getcwd() + "/stolen")
        out["rename " + p] = "ok"
    except OSError as e:
        out["rename " + p] = errno.errorcode.get(e.errno, str(e.errno))
try:
    os.link("/etc/passwd", os.getcwd() + "/passwd-link")
    out["link /etc/passwd"] = "ok"
except OSError as e:
    out["link /etc/passwd"] = errno.errorcode.get(e.errno, str(e.errno))
try:
    os.mknod(os.getcwd() + "/mem", 0o600 | 0o020000, os.makedev(1, 1))
    out["mknod /dev/mem"] = "ok"
except OSError as e:
    out["mknod /dev/mem"] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(out))
`

func TestWriteOutsideWorkspace(t *testing.T) {
	recordTier(t)
	hostFile := filepath.Join(t.TempDir(), "host.txt")
	if err := os.WriteFile(hostFile, []byte("original"), 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(hostFile), 0o777)
	want := map[string]string{
		"/pwned":                        "EROFS",
		"/usr/pwned":                    "EROFS",
		"/usr/bin/python3":              "EACCES", // root-owned: permission fails first
		"/etc/passwd":                   "EROFS",
		"/etc/pwned":                    "EROFS",
		"/etc/ssl/pwned":                "EROFS",
		"/bin/pwned":                    "EROFS",
		"/proc/sys/kernel/hostname":     "EACCES",
		"/proc/sys/kernel/core_pattern": "EACCES",
		"/proc/sysrq-trigger":           "ENOENT", // hidden in a non-initial user namespace
		"/proc/1/oom_score_adj":         "EACCES",
		"/dev/pwned":                    "EROFS",
		"/dev/null":                     "ok", // a device, not a file: writing discards
		// The host's /tmp is not the sandbox's /tmp: the host directory is not there.
		hostFile:                  "ENOENT",
		"mkdir /pwned-dir":        "EROFS",
		"mkdir /usr/pwned-dir":    "EROFS",
		"mkdir /etc/pwned-dir":    "EROFS",
		"mkdir /dev/pwned-dir":    "EROFS",
		"mkdir /proc/pwned-dir":   "ENOENT",
		"rename /etc/passwd":      "EXDEV",
		"rename /usr/bin/python3": "EXDEV",
		"rename /etc/hosts":       "EXDEV",
		"link /etc/passwd":        "EXDEV",
		"mknod /dev/mem":          "EPERM",
	}
	noProcExpect(t, want, "ENOENT")
	if testSandbox(t).adapt.noProc {
		// The empty /proc is a read-only tmpfs: creating in it fails as in any.
		want["mkdir /proc/pwned-dir"], want["/proc/sysrq-trigger"] = "EROFS", "EROFS"
	}
	if inLandlockTier() {
		// The host's own tree, writable only in the run's directories: Landlock refuses
		// the rest (a rename or link out of a directory without the right: EXDEV).
		for p := range want {
			want[p] = "EACCES"
		}
		want[hostFile] = "EACCES"
		want["/dev/null"] = "ok"
		if _, err := os.Lstat("/proc/sysrq-trigger"); err != nil {
			want["/proc/sysrq-trigger"] = "ENOENT"
		}
		// proc has no mkdir at all; a hard link to another uid's file is refused by
		// protected_hardlinks before Landlock's refer check.
		want["mkdir /proc/pwned-dir"], want["link /etc/passwd"], want["mknod /dev/mem"] = "ENOENT", "EPERM", "EPERM"
		if testSandbox(t).ll.unsized == "" {
			// The workspace is a tmpfs of its own (runDirs): nothing crosses into it.
			for p := range want {
				if strings.HasPrefix(p, "rename ") || strings.HasPrefix(p, "link ") {
					want[p] = "EXDEV"
				}
			}
		}
	}
	var paths []string
	for p := range want {
		if strings.HasPrefix(p, "/") {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	stdin, _ := json.Marshal(paths)
	spec := pySpec(probeWrite, newMarker())
	spec.Stdin = stdin
	var got map[string]string
	runJSON(t, spec, &got)
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: got %q, want %q", p, got[p], w)
		}
	}
	if b, _ := os.ReadFile(hostFile); string(b) != "original" {
		t.Fatalf("host file changed: %q", b)
	}
}

// TestMountFlags reads the sandbox's own mount table: everything but the size-capped
// scratch mounts is read-only, and nothing writable allows setuid or devices.
func TestMountFlags(t *testing.T) {
	recordTier(t)
	notInTier(t, "no own mount table: the program sees the host's (probe: mount-namespace); Landlock, not mount flags, keeps it read-only")
	const code = `
import json, os, stat
out = {}
for line in open("/proc/self/mountinfo"):
    pre, _, post = line.partition(" - ")
    f = pre.split()
    # Per-mount flags only: the superblock's own "rw" says nothing about this mount.
    out[f[4]] = f[5].split(",") + [o for o in post.split()[2].split(",") if o.startswith("size=")]
    if f[4].startswith("/dev/") and f[4] != "/dev/shm" and not stat.S_ISCHR(os.stat(f[4]).st_mode):
        out[f[4]].append("NOT-A-DEVICE")
print(json.dumps(out))
`
	needProc(t)
	var got map[string][]string
	runJSON(t, pySpec(code, newMarker()), &got)
	for _, p := range []string{"/", "/usr", "/proc", "/tmp", "/dev/shm", "/etc/ssl", "/dev/null"} {
		if _, ok := got[p]; !ok {
			t.Errorf("no mount at %s: %v", p, got)
		}
	}
	for p, opts := range got {
		writable := contains(opts, "rw")
		switch {
		case p == "/workspace" || p == "/tmp" || p == "/dev/shm":
			if !writable || !contains(opts, "nosuid") || !contains(opts, "nodev") {
				t.Errorf("%s: %v, want rw,nosuid,nodev", p, opts)
			}
			if !strings.Contains(strings.Join(opts, ","), "size=") {
				t.Errorf("%s has no size cap: %v", p, opts)
			}
		case strings.HasPrefix(p, "/dev/"):
			// Device nodes stay writable (writing /dev/null must work); a bind of a
			// single character device holds nothing to execute or create.
			if contains(opts, "NOT-A-DEVICE") {
				t.Errorf("%s is not a character device: %v", p, opts)
			}
		default:
			if writable || !contains(opts, "ro") {
				t.Errorf("%s is writable: %v", p, opts)
			}
			if !contains(opts, "nosuid") {
				t.Errorf("%s allows setuid: %v", p, opts)
			}
		}
	}
}

// TestScratchReachesNothingElse: /tmp and /dev/shm are directories of the root's own
// tmpfs (opScratch), the one superblock the program can write to besides the
// workspace. Through them it must reach nothing else of that superblock: no hard link
// or rename between them and the read-only skeleton (/etc) or each other, no write
// to the skeleton by a path that leaves the bind, and their own paths in the root
// (under /proc, like the empty directory the /proc masks bind) hidden. Two runs in
// flight each leave a file in both: it shows up nowhere else in its own root and
// nowhere in the other's.
func TestScratchReachesNothingElse(t *testing.T) {
	notInTier(t, "no root of its own: /tmp and /dev/shm are unreachable (TestHostFilesUnreachable)")
	const code = `
import errno, json, os, sys, time
out = {}
def try_(name, f, *a):
    try:
        f(*a)
        out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
m, other = sys.argv[1], sys.argv[2]
for d in ["/tmp", "/dev/shm"]:
    with open(d + "/" + m, "w") as f:
        f.write(m)
time.sleep(0.3)  # the other run has left its files now
try_("link /etc/passwd /tmp", os.link, "/etc/passwd", "/tmp/passwd")
try_("link /etc/hosts /dev/shm", os.link, "/etc/hosts", "/dev/shm/hosts")
try_("link /tmp /dev/shm", os.link, "/tmp/" + m, "/dev/shm/" + m + ".l")
try_("link /tmp /etc", os.link, "/tmp/" + m, "/etc/" + m)
try_("rename /etc/hosts /tmp", os.rename, "/etc/hosts", "/tmp/hosts")
try_("rename /tmp /etc", os.rename, "/tmp/" + m, "/etc/" + m)
try_("rename /tmp /dev", os.rename, "/tmp/" + m, "/dev/" + m)
try_("rename /dev/shm /tmp", os.rename, "/dev/shm/" + m, "/tmp/" + m + ".r")
try_("write /tmp/../etc/passwd", lambda: os.close(os.open("/tmp/../etc/passwd", os.O_WRONLY)))
try_("create /dev/shm/../x", lambda: os.close(os.open("/dev/shm/../" + m, os.O_WRONLY | os.O_CREAT, 0o644)))
try_("list /proc/tmp", os.listdir, "/proc/tmp")
try_("list /proc/shm", os.listdir, "/proc/shm")
try_("list /proc/empty", os.listdir, "/proc/empty")
# The root's superblock as the root mount shows it (its other mounts pruned):
# the marker must be in none of its directories.
seen, root = [], os.stat("/").st_dev
for d, dirs, files in os.walk("/"):
    dirs[:] = [n for n in dirs if os.path.join(d, n) not in ("/tmp", "/dev/shm") and os.lstat(os.path.join(d, n)).st_dev == root]
    seen += [os.path.join(d, n) for n in dirs + files if m in n or other in n]
for d in ["/tmp", "/dev/shm"]:
    seen += [d + "/" + n for n in os.listdir(d) if n != m]
out["seen"] = " ".join(sorted(seen))
print(json.dumps(out))
`
	marker := newMarker()
	want := map[string]string{
		"link /etc/passwd /tmp":    "EXDEV",
		"link /etc/hosts /dev/shm": "EXDEV",
		"link /tmp /dev/shm":       "EXDEV",
		"link /tmp /etc":           "EROFS", // the new name's mount is checked first
		"rename /etc/hosts /tmp":   "EXDEV",
		"rename /tmp /etc":         "EXDEV",
		"rename /tmp /dev":         "EXDEV",
		"rename /dev/shm /tmp":     "EXDEV",
		"write /tmp/../etc/passwd": "EROFS",
		"create /dev/shm/../x":     "EROFS",
		"list /proc/tmp":           "ENOENT",
		"list /proc/shm":           "ENOENT",
		"list /proc/empty":         "ENOENT", // the directory masks' source
		"seen":                     "",
	}
	s := testSandbox(t)
	markers := []string{marker, newMarker()}
	runs := make([]sandbox.Result, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range runs {
		spec := pySpec(code, markers[i])
		spec.Argv = append(spec.Argv, markers[1-i])
		wg.Go(func() { runs[i], errs[i] = s.Run(context.Background(), withDefaults(spec)) })
	}
	wg.Wait()
	for i, res := range runs {
		if errs[i] != nil || res.Status != sandbox.StatusOK {
			t.Fatalf("run %d: %v %s", i, errs[i], brief(res))
		}
		lines := strings.Split(strings.TrimSpace(string(res.Stdout.Bytes())), "\n")
		var got map[string]string
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
			t.Fatalf("run %d: %v: %s", i, err, brief(res))
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("run %d: %s: got %q, want %q", i, k, got[k], w)
			}
		}
	}
}

func TestHostPidsHidden(t *testing.T) {
	recordTier(t)
	notInTier(t, "no own pid view: host processes are listable (probe: pid-namespace); TestLandlockTwoRunsInFlight checks they cannot be signalled or traced")
	// A host process the program must not see, under a pid it could guess.
	sleeper := startHostSleeper(t)
	const code = `
import errno, os, json, sys
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
try:
    os.kill(int(sys.argv[2]), 0)
    signal = "ok"
except OSError as e:
    signal = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps({"pids": pids, "self": os.getpid(), "ppid": os.getppid(), "signal": signal}))
`
	var got struct {
		Pids   []int  `json:"pids"`
		Self   int    `json:"self"`
		PPid   int    `json:"ppid"`
		Signal string `json:"signal"`
	}
	spec := pySpec(code, newMarker())
	spec.Argv = append(spec.Argv, strconv.Itoa(sleeper))
	runJSON(t, spec, &got)
	// By number, as a program guesses: no such process in its pid namespace (the
	// sleeper's number may exist there by chance only if it is 1 or the program's own).
	if got.Signal != "ESRCH" && sleeper != 1 && sleeper != got.Self {
		t.Errorf("kill(%d, 0) of the host sleeper: %s, want ESRCH", sleeper, got.Signal)
	}
	if testSandbox(t).adapt.noProc {
		if len(got.Pids) != 0 {
			t.Fatalf("the empty /proc lists pids %v", got.Pids)
		}
		return
	}
	want := []int{1, got.Self}
	sort.Ints(want)
	if len(got.Pids) != 2 || got.Pids[0] != want[0] || got.Pids[1] != want[1] {
		t.Fatalf("program sees pids %v, want exactly %v (init and itself)", got.Pids, want)
	}
	if got.PPid != 1 {
		t.Errorf("program's parent is %d, want the init (1)", got.PPid)
	}
	for _, p := range got.Pids {
		if p == sleeper {
			t.Errorf("host sleeper pid %d visible", sleeper)
		}
	}
}

func startHostSleeper(t *testing.T) int {
	t.Helper()
	p, err := os.StartProcess("/bin/sleep", []string{"sleep", "60"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(); p.Wait() })
	return p.Pid
}

// socketProbe creates sockets of many families and connects where it can.
const socketProbe = `
import json, os, socket, sys, errno
port = int(sys.stdin.read())
def e(x):
    return errno.errorcode.get(x.errno, str(x.errno))
out = {}
def sock(name, fam, typ, proto=0, addr=None):
    try:
        s = socket.socket(fam, typ, proto)
    except OSError as x:
        out[name] = e(x)
        return
    if addr is None:
        out[name] = "created"
        s.close()
        return
    try:
        s.settimeout(2)
        if typ == socket.SOCK_DGRAM:
            s.sendto(b"x", addr)
            out[name] = "sent"
        else:
            s.connect(addr)
            out[name] = "connected"
    except OSError as x:
        out[name] = e(x)
    s.close()
sock("tcp4", socket.AF_INET, socket.SOCK_STREAM, 0, ("127.0.0.1", port))
sock("tcp4-remote", socket.AF_INET, socket.SOCK_STREAM, 0, ("1.1.1.1", 80))
sock("udp4", socket.AF_INET, socket.SOCK_DGRAM, 0, ("127.0.0.1", port))
sock("tcp6", socket.AF_INET6, socket.SOCK_STREAM, 0, ("::1", port))
sock("raw4", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
sock("netlink", socket.AF_NETLINK, socket.SOCK_RAW, 0)
sock("packet", socket.AF_PACKET, socket.SOCK_RAW, 0)
sock("vsock", 40, socket.SOCK_STREAM, 0)
sock("bluetooth", 31, socket.SOCK_RAW, 0)
sock("alg", 38, socket.SOCK_SEQPACKET, 0)
sock("unix", socket.AF_UNIX, socket.SOCK_STREAM, 0)
try:
    socket.socketpair(socket.AF_INET, socket.SOCK_STREAM)
    out["socketpair-inet"] = "created"
except OSError as x:
    out["socketpair-inet"] = e(x)
abstract = os.environ["ABSTRACT"]
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\0" + abstract)
    out["abstract"] = "connected"
except OSError as x:
    out["abstract"] = e(x)
print(json.dumps(out))
`

func TestNetworkDenied(t *testing.T) {
	recordTier(t)
	tcp, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	udp, err := net.ListenPacket("udp4", tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	abstract := "airlock-test-" + randHex(8)
	ul, err := net.Listen("unix", "@"+abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	leaked := make(chan string, 3)
	go func() {
		if c, err := tcp.Accept(); err == nil {
			c.Close()
			leaked <- "tcp"
		}
	}()
	go func() {
		if c, err := ul.Accept(); err == nil {
			c.Close()
			leaked <- "abstract unix"
		}
	}()
	go func() {
		buf := make([]byte, 16)
		if n, _, err := udp.ReadFrom(buf); err == nil && n > 0 {
			leaked <- "udp"
		}
	}()
	port := strconv.Itoa(tcp.Addr().(*net.TCPAddr).Port)

	// With seccomp, only AF_UNIX sockets exist; every other family fails at socket().
	withSeccomp := map[string]string{
		"tcp4": "EAFNOSUPPORT", "tcp4-remote": "EAFNOSUPPORT", "udp4": "EAFNOSUPPORT",
		"tcp6": "EAFNOSUPPORT", "raw4": "EAFNOSUPPORT", "netlink": "EAFNOSUPPORT",
		"packet": "EAFNOSUPPORT", "vsock": "EAFNOSUPPORT", "bluetooth": "EAFNOSUPPORT",
		"alg": "EAFNOSUPPORT", "unix": "created", "socketpair-inet": "EAFNOSUPPORT",
		// The abstract socket namespace belongs to the network namespace.
		"abstract": "ECONNREFUSED",
	}
	// Without seccomp the network namespace alone must hold: no interface is up, raw
	// and packet sockets need CAP_NET_RAW in the host namespace.
	withoutSeccomp := map[string]string{
		"tcp4": "ENETUNREACH", "tcp4-remote": "ENETUNREACH", "udp4": "ENETUNREACH",
		"tcp6": "EADDRNOTAVAIL", "raw4": "EPERM", "packet": "EPERM",
		"unix": "created", "abstract": "ECONNREFUSED",
	}
	layers := []struct {
		name    string
		seccomp bool
		want    map[string]string
	}{{"seccomp+netns", true, withSeccomp}, {"netns-only", false, withoutSeccomp}}
	if inLandlockTier() {
		// No network namespace: the host's loopback is there. Seccomp refuses every
		// family but AF_UNIX; beneath it Landlock refuses TCP bind and connect (UDP and
		// raw sockets have no second layer: the CAP_NET_RAW check for raw); the abstract
		// socket namespace is scoped.
		withSeccomp["abstract"] = "EPERM"
		withoutLayer := map[string]string{
			"tcp4": "EACCES", "tcp4-remote": "EACCES", "tcp6": "EACCES", "raw4": "EPERM",
			"packet": "EPERM", "unix": "created", "abstract": "EPERM",
		}
		layers = append(layers[:1], struct {
			name    string
			seccomp bool
			want    map[string]string
		}{"landlock-only", false, withoutLayer})
		// Without seccomp, UDP reaches the host listener: that layer is seccomp alone
		// in this tier, which the seccomp+landlock row proves refuses it.
		udp.Close()
	}
	for _, tc := range layers {
		t.Run(tc.name, func(t *testing.T) {
			spec := pySpec(socketProbe, newMarker())
			spec.Stdin = []byte(port)
			spec.Env = append(spec.Env, "ABSTRACT="+abstract)
			var got map[string]string
			res := runLayers(t, spec, tc.seccomp)
			decodeLast(t, res, &got)
			for k, w := range tc.want {
				if got[k] != w {
					t.Errorf("%s: got %q, want %q", k, got[k], w)
				}
			}
			for k, v := range got {
				if v == "connected" || v == "sent" && k != "udp4" || v == "sent" && tc.seccomp {
					t.Errorf("%s: %s", k, v)
				}
			}
		})
	}
	select {
	case what := <-leaked:
		t.Fatalf("the host %s listener received a connection from the sandbox", what)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestAbstractListenerUnreachable: a host process that connects to an abstract unix
// socket name (one a host service uses: @/tmp/.X11-unix/X0, say) never reaches a
// program listening at it. The namespace tier's names are its network namespace's; the
// Landlock tier shares the host's, and its scoping only keeps the program from
// connecting out, so there the program may not bind or listen at all.
func TestAbstractListenerUnreachable(t *testing.T) {
	recordTier(t)
	s := testSandbox(t)
	name := "airlock-squat-" + randHex(8)
	spec := pySpec(`
import errno, json, socket, sys
out = {}
s = socket.socket(socket.AF_UNIX)
try:
    s.bind("\0" + sys.argv[2])
    s.listen(1)
    print("listening", flush=True)
    s.settimeout(3)
    c, _ = s.accept()
    out["host"] = c.recv(100).decode()
except OSError as e:
    out["listen"] = "timeout" if isinstance(e, TimeoutError) else errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(out))
`, newMarker())
	spec.Argv = append(spec.Argv, name)
	done := make(chan sandbox.Result, 1)
	go func() {
		res, _ := s.Run(t.Context(), withDefaults(spec))
		done <- res
	}()
	reached := false
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && !reached; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("unix", "@"+name); err == nil {
			_, _ = c.Write([]byte("host data"))
			c.Close()
			reached = true
		}
	}
	res := <-done
	var got map[string]string
	decodeLast(t, res, &got)
	if reached || got["host"] != "" {
		t.Errorf("a host process reached the program's abstract listener (it read %q)", got["host"])
	}
	want := "timeout" // its own network namespace's name: nobody on the host sees it
	if inLandlockTier() {
		want = "EPERM"
	}
	if got["listen"] != want {
		t.Errorf("bind and listen at an abstract name: %q, want %q", got["listen"], want)
	}
}

// runLayers runs spec through the engine's own launch path with seccomp on or off, to
// test the other layers on their own.
func runLayers(t *testing.T, spec sandbox.Spec, seccomp bool) sandbox.Result {
	t.Helper()
	s := testSandbox(t)
	spec = withDefaults(spec)
	spec.ID = newID()
	if err := validate(spec); err != nil {
		t.Fatal(err)
	}
	cfg := s.config(spec)
	if !seccomp {
		cfg.Filter, cfg.FilterRules = nil, 0
	}
	res, err := s.run(t.Context(), spec, cfg)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

func decodeLast(t *testing.T, res sandbox.Result, out any) {
	t.Helper()
	if res.Status != sandbox.StatusOK {
		t.Fatalf("program ended %s: %s", res.Status, brief(res))
	}
	lines := strings.Split(strings.TrimSpace(string(res.Stdout.Bytes())), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), out); err != nil {
		t.Fatalf("decode: %v\n%s", err, brief(res))
	}
}

// syscallProbe calls each syscall from stdin ({name: [nr, args...]}) through libc with
// harmless arguments (bad pointers, bad fds, bad magic) chosen so that a call the filter
// let through would fail with a different errno, and prints {name: errno name or
// "ret=N"}. A clone or unshare that succeeds must not continue as a second program.
const syscallProbe = `
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
out = {}
calls = json.load(sys.stdin)
for name in sorted(calls):
    nr, *args = calls[name]
    if isinstance(nr, str):
        continue
    cargs = [ctypes.c_ulong(a & 0xffffffffffffffff) for a in args]
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *cargs)
    if r == 0 and name.startswith("clone"):
        os._exit(0)
    if r < 0:
        err = ctypes.get_errno()
        out[name] = errno.errorcode.get(err, str(err))
    else:
        out[name] = "ret=%d" % r
print(json.dumps(out))
`

// unifiedSyscalls is where the kernel's syscall numbers became the same on every
// architecture (pidfd_send_signal, Linux 5.1).
const unifiedSyscalls = 424

// TestSyscallsDenied calls each dangerous syscall for real. The table has x86_64's
// numbers; on another architecture each is looked up by name (syscallNumber), and a
// syscall that architecture lacks (iopl, vserver, inotify_init on arm64) is left out.
func TestSyscallsDenied(t *testing.T) {
	recordTier(t)
	const (
		cloneNewUser  = 0x10000000
		cloneNewNS    = 0x00020000
		cloneNewPID   = 0x20000000
		cloneNewNet   = 0x40000000
		cloneNewIPC   = 0x08000000
		cloneNewUTS   = 0x04000000
		cloneNewCG    = 0x02000000
		cloneNewTime  = 0x00000080
		sigchld       = 17
		allNS         = cloneNewUser | cloneNewNS | cloneNewPID | cloneNewNet | cloneNewIPC | cloneNewUTS | cloneNewCG | cloneNewTime
		bad           = 0x10 // an address no mapping covers: EFAULT if the call got through
		tiocsti       = 0x5412
		garbageHigh   = 0x7ead_beef_0000_0000
		ptraceAttach  = 16
		ptracePeek    = 2
		readImplExec  = 0x0400000
		addrNoRandom  = 0x0040000
		syslogSizeBuf = 10
	)
	type call struct {
		nr   int64
		args []int64
		want string
	}
	calls := map[string]call{
		"mount":             {165, []int64{bad, bad, bad, 0, 0}, "EPERM"},
		"umount2":           {166, []int64{bad, 0}, "EPERM"},
		"pivot_root":        {155, []int64{bad, bad}, "EPERM"},
		"chroot":            {161, []int64{bad}, "EPERM"},
		"unshare-all":       {272, []int64{allNS}, "EPERM"},
		"unshare-user":      {272, []int64{cloneNewUser}, "EPERM"},
		"unshare-mnt":       {272, []int64{cloneNewNS}, "EPERM"},
		"unshare-net":       {272, []int64{cloneNewNet}, "EPERM"},
		"unshare-time":      {272, []int64{cloneNewTime}, "EPERM"},
		"clone-newuser":     {56, []int64{cloneNewUser | sigchld, 0, 0, 0, 0}, "EPERM"},
		"clone-newns":       {56, []int64{cloneNewNS | sigchld, 0, 0, 0, 0}, "EPERM"},
		"clone-newpid":      {56, []int64{cloneNewPID | sigchld, 0, 0, 0, 0}, "EPERM"},
		"clone-parent":      {56, []int64{0x8000 | sigchld, 0, 0, 0, 0}, "EPERM"}, // CLONE_PARENT
		"clone3":            {435, []int64{bad, 88}, "ENOSYS"},
		"setns":             {308, []int64{-1, 0}, "EPERM"},
		"ptrace-attach":     {101, []int64{ptraceAttach, 1, 0, 0}, "ENOSYS"},
		"ptrace-peekdata":   {101, []int64{ptracePeek, 1, bad, 0}, "ENOSYS"},
		"ptrace-seize":      {101, []int64{0x4206, 1, 0, 0}, "ENOSYS"},
		"ptrace-traceme":    {101, []int64{0, 0, 0, 0}, "ENOSYS"},
		"process_vm_readv":  {310, []int64{1, bad, 1, bad, 1, 0}, "EPERM"},
		"process_vm_writev": {311, []int64{1, bad, 1, bad, 1, 0}, "EPERM"},
		"pidfd_getfd":       {438, []int64{-1, 0, 0}, "EPERM"},
		"kcmp":              {312, []int64{1, 1, 0, 0, 0}, "EPERM"},
		"keyctl":            {250, []int64{0, -3, 0}, "EPERM"},
		"add_key":           {248, []int64{bad, bad, bad, 0, -3}, "EPERM"},
		"request_key":       {249, []int64{bad, bad, bad, 0}, "EPERM"},
		"bpf":               {321, []int64{5, bad, 8}, "EPERM"},
		"perf_event_open":   {298, []int64{bad, 0, -1, -1, 0}, "EPERM"},
		"userfaultfd":       {323, []int64{0}, "EPERM"},
		"io_uring_setup":    {425, []int64{1, bad}, "EPERM"},
		"io_setup":          {206, []int64{1, bad}, "EPERM"},
		"kexec_load":        {246, []int64{0, 0, bad, 0}, "EPERM"},
		"kexec_file_load":   {320, []int64{-1, -1, 0, bad, 0}, "EPERM"},
		"init_module":       {175, []int64{bad, 0, bad}, "EPERM"},
		"finit_module":      {313, []int64{-1, bad, 0}, "EPERM"},
		"delete_module":     {176, []int64{bad, 0}, "EPERM"},
		"open_by_handle_at": {304, []int64{-1, bad, 0}, "EPERM"},
		"name_to_handle_at": {303, []int64{-1, bad, bad, bad, 0}, "EPERM"},
		"swapon":            {167, []int64{bad, 0}, "EPERM"},
		"swapoff":           {168, []int64{bad}, "EPERM"},
		"reboot":            {169, []int64{0, 0, 0, 0}, "EPERM"},
		"syslog":            {103, []int64{syslogSizeBuf, 0, 0}, "EPERM"},
		"acct":              {163, []int64{bad}, "EPERM"},
		"iopl":              {172, []int64{3}, "EPERM"},
		"ioperm":            {173, []int64{0, 1024, 1}, "EPERM"},
		"settimeofday":      {164, []int64{bad, bad}, "EPERM"},
		"clock_settime":     {227, []int64{0, bad}, "EPERM"},
		"sethostname":       {170, []int64{bad, 4}, "EPERM"},
		"fsopen":            {430, []int64{bad, 0}, "EPERM"},
		"open_tree":         {428, []int64{-1, bad, 0}, "EPERM"},
		"move_mount":        {429, []int64{-1, bad, -1, bad, 0}, "EPERM"},
		"mount_setattr":     {442, []int64{-1, bad, 0, bad, 32}, "EPERM"},
		"fanotify_init":     {300, []int64{0, 0}, "EPERM"},
		"inotify_init":      {253, nil, "EPERM"},
		"inotify_init1":     {294, []int64{0}, "EPERM"},
		"inotify_add_watch": {254, []int64{-1, bad, 0x20}, "EPERM"},
		"memfd_secret":      {447, []int64{0}, "EPERM"},
		"quotactl":          {179, []int64{0, bad, 0, bad}, "EPERM"},
		// personality: only the values Docker allows; anything else is unlisted.
		"personality-read-implies-exec": {135, []int64{readImplExec}, "ENOSYS"},
		"personality-no-aslr":           {135, []int64{addrNoRandom}, "ENOSYS"},
		"personality-query":             {135, []int64{0xffffffff}, "ret=0"},
		// TIOCSTI pushes input into a terminal; the command is compared as 32 bits.
		"ioctl-tiocsti":         {16, []int64{0, tiocsti, bad}, "EPERM"},
		"ioctl-tiocsti-garbage": {16, []int64{0, garbageHigh | tiocsti, bad}, "EPERM"},
		"ioctl-tioclinux":       {16, []int64{0, 0x541C, bad}, "EPERM"},
		// Allowed ioctls still work (stdin is not a terminal: ENOTTY from the kernel).
		"ioctl-tcgets": {16, []int64{0, 0x5401, bad}, "ENOTTY"},
		// Socket families other than AF_UNIX.
		"socket-inet":           {41, []int64{2, 1, 0}, "EAFNOSUPPORT"},
		"socket-inet6":          {41, []int64{10, 1, 0}, "EAFNOSUPPORT"},
		"socket-netlink":        {41, []int64{16, 3, 0}, "EAFNOSUPPORT"},
		"socket-packet":         {41, []int64{17, 3, 0}, "EAFNOSUPPORT"},
		"socket-vsock":          {41, []int64{40, 1, 0}, "EAFNOSUPPORT"},
		"socket-xdp":            {41, []int64{44, 3, 0}, "EAFNOSUPPORT"},
		"socket-family-255":     {41, []int64{255, 1, 0}, "EAFNOSUPPORT"},
		"socket-family-garbage": {41, []int64{garbageHigh | 2, 1, 0}, "EAFNOSUPPORT"},
		// Unlisted syscalls: ENOSYS, as if the kernel lacked them.
		"vserver":          {236, nil, "ENOSYS"},
		"lookup_dcookie":   {212, []int64{0, bad, 0}, "EPERM"},
		"pkey_alloc":       {330, []int64{0, 0}, "ENOSYS"},
		"listmount":        {458, []int64{bad, bad, 0, 0}, "ENOSYS"},
		"nr-1000":          {1000, nil, "ENOSYS"},
		"process_mrelease": {448, []int64{-1, 0}, "ENOSYS"},
	}
	// On x86_64 the lookup by name must give the table's own numbers: that checks the
	// names the other architectures rely on.
	for key, c := range calls {
		if key == "nr-1000" {
			continue // unassigned everywhere
		}
		name, _, _ := strings.Cut(key, "-")
		nr, ok := syscallNumber(name)
		if !ok && c.nr >= unifiedSyscalls {
			continue // newer than this libseccomp, and numbered alike everywhere
		}
		switch {
		case runtime.GOARCH == "amd64" && (!ok || int64(nr) != c.nr):
			t.Errorf("%s: libseccomp numbers %s %d (ok %v), the table %d", key, name, nr, ok, c.nr)
		case runtime.GOARCH == "amd64":
		case !ok:
			t.Logf("%s: no %s syscall on %s", key, name, runtime.GOARCH)
			delete(calls, key)
		default:
			c.nr = int64(nr)
			calls[key] = c
		}
	}
	stdin := map[string][]int64{}
	for name, c := range calls {
		stdin[name] = append([]int64{c.nr}, c.args...)
	}
	b, _ := json.Marshal(stdin)
	spec := pySpec(syscallProbe, newMarker())
	spec.Stdin = b
	var got map[string]string
	runJSON(t, spec, &got)
	for name, c := range calls {
		if got[name] != c.want {
			t.Errorf("%s (nr %d): got %s, want %s", name, c.nr, got[name], c.want)
		}
	}
}

// hostActivityWatcher watches the host's own files the sandbox can read (its read-only
// system directories) for opens and reads, with inotify and with dnotify (fcntl
// F_NOTIFY, the older interface: a signal per read in a watched directory), for argv[2]
// seconds (it waits that long even when it cannot watch), and prints {"events": n,
// "dnotify": n, "errors": [...]}. Any event means the program saw someone else use them.
const hostActivityWatcher = `
import ctypes, fcntl, json, os, select, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
out = {"events": 0, "dnotify": 0, "errors": []}
def seen(sig, frame):
    out["dnotify"] += 1
signal.signal(signal.SIGIO, seen)
for path in ("/usr/bin", "/etc/ssl"):
    try:
        d = os.open(path, os.O_RDONLY)
        fcntl.fcntl(d, fcntl.F_NOTIFY, fcntl.DN_ACCESS | fcntl.DN_MULTISHOT)
    except OSError as e:
        out["errors"].append("dnotify %s: %s" % (path, e.strerror))
end = time.time() + float(sys.argv[2])
fd = libc.inotify_init1(0)
if fd < 0:
    out["errors"].append("inotify_init1: " + os.strerror(ctypes.get_errno()))
else:
    for path in (b"/usr/bin/true", b"/usr/bin", b"/etc/ssl"):
        if libc.inotify_add_watch(fd, path, 0x1 | 0x20 | 0x10) < 0:  # ACCESS, OPEN, CLOSE_NOWRITE
            out["errors"].append("watch %s: %s" % (path.decode(), os.strerror(ctypes.get_errno())))
while time.time() < end:
    if fd >= 0 and select.select([fd], [], [], 0.1)[0]:
        os.read(fd, 65536)
        out["events"] += 1
    elif fd < 0:
        time.sleep(0.1)
print(json.dumps(out))
`

// The read-only system files are the host's: the sandbox must not see the host, or
// other runs, use them. (With inotify it could learn when the host runs git or ssh, or
// which modules another run imports.) The host execs /usr/bin/true throughout.
func TestHostActivityInvisible(t *testing.T) {
	recordTier(t)
	stop := make(chan struct{})
	ran := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				ran <- n
				return
			case <-time.After(20 * time.Millisecond):
				// A read of a file there, as another run's import is (dnotify sees
				// reads, not an exec's mapping).
				_, rerr := os.ReadFile("/usr/bin/true")
				if exec.Command("/usr/bin/true").Run() == nil && rerr == nil {
					n++
				}
			}
		}
	}()
	spec := pySpec(hostActivityWatcher, newMarker())
	spec.Argv = append(spec.Argv, "1.5")
	var got struct {
		Events  int      `json:"events"`
		Dnotify int      `json:"dnotify"`
		Errors  []string `json:"errors"`
	}
	runJSON(t, spec, &got)
	close(stop)
	if n := <-ran; n < 10 {
		t.Fatalf("the host read and ran /usr/bin/true only %d times while the program watched", n)
	}
	if got.Events > 0 {
		t.Errorf("the sandbox saw %d inotify events from the host's use of its files", got.Events)
	}
	if got.Dnotify > 0 {
		t.Errorf("the sandbox saw %d dnotify signals from the host's use of its files", got.Dnotify)
	}
	t.Logf("watch attempts: %v", got.Errors)
}

// pageCacheSender reads one byte of each slot of the file whose bit is 1 in the
// pattern (argv[5]), without readahead, then says so and waits to be killed.
const pageCacheSender = `
import os, sys, time
path, stride, pattern = sys.argv[2], int(sys.argv[3]), sys.argv[5]
fd = os.open(path, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
for i, bit in enumerate(pattern):
    if bit == "1":
        os.pread(fd, 1, i * stride)
print("sent", flush=True)
time.sleep(30)
`

// pageCacheReceiver asks, for each slot of the file, whether its page is in the page
// cache, by every answer the kernel gives without a timing: a read that must not wait
// (preadv2 RWF_NOWAIT: EAGAIN when it would read the disk), mincore on a mapping of it,
// cachestat. Each answer is a string of bits, or the errno it was refused with.
const pageCacheReceiver = `
import ctypes, errno, json, os, sys
path, stride, n = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
fd = os.open(path, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
out = {}
def bits(probe):
    try:
        out[probe.__name__] = "".join("1" if probe(i * stride) else "0" for i in range(n))
    except OSError as e:
        # ENOTSUP and EOPNOTSUPP are one number on Linux: the kernel's name.
        out[probe.__name__] = "EOPNOTSUPP" if e.errno == errno.EOPNOTSUPP else errno.errorcode.get(e.errno, str(e.errno))
def preadv2_nowait(off):
    try:
        os.preadv(fd, [bytearray(1)], off, os.RWF_NOWAIT)
        return True
    except BlockingIOError:
        return False
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
size = os.fstat(fd).st_size
addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
pages = (size + 4095) // 4096
vec = (ctypes.c_ubyte * pages)()
def mincore(off):
    if libc.mincore(ctypes.c_void_p(addr), ctypes.c_size_t(size), vec) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return vec[off // 4096] & 1
class Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]
class Stat(ctypes.Structure):
    _fields_ = [(f, ctypes.c_uint64) for f in ("cache", "dirty", "writeback", "evicted", "recently_evicted")]
def cachestat(off):
    st = Stat()
    if libc.syscall(451, fd, ctypes.byref(Range(off, 4096)), ctypes.byref(st), 0) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return st.cache > 0
bits(preadv2_nowait)
bits(mincore)
bits(cachestat)
print(json.dumps(out))
`

// TestPageCacheUnobservable: the read-only system files are the host's, and so are
// their pages in the page cache. A run must not learn which of them another run (or the
// host) has read: a read that refuses to wait (preadv2 RWF_NOWAIT) answers EAGAIN
// exactly when the page is not cached, without a timing, so one run could read which
// modules another imports, or take a message from it, one bit per page, while both are
// in flight. The host drops the file's pages, one run reads a random pattern of them,
// and a second run probes every page. (mincore reports every page of a file the caller
// cannot write as resident since Linux 5.0, and cachestat refuses it since 6.14, which
// the filter refuses everywhere; both are probed too.)
func TestPageCacheUnobservable(t *testing.T) {
	recordTier(t)
	s := testSandbox(t)
	files, _ := filepath.Glob("/usr/lib/python3*/pydoc_data/topics.py")
	if len(files) == 0 {
		t.Fatal("no pydoc_data/topics.py under /usr/lib/python3*: the test needs a large stdlib file no run imports")
	}
	target := files[0]
	const stride = 64 << 10
	fi, err := os.Stat(target)
	if err != nil {
		t.Fatal(err)
	}
	n := int(fi.Size() / stride)
	if n < 4 {
		t.Fatalf("%s has %d bytes: too few for a pattern of pages", target, fi.Size())
	}
	pattern := make([]byte, n)
	for i := range pattern {
		pattern[i] = '0' + randHex(1)[0]%2
	}
	pattern[0], pattern[1] = '1', '0'
	f, err := os.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	f.Close()
	if err != nil {
		t.Fatalf("drop the pages of %s: %v", target, err)
	}
	args := []string{target, strconv.Itoa(stride), strconv.Itoa(n), string(pattern)}
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	sender := pySpec(pageCacheSender, newMarker())
	sender.Argv = append(sender.Argv, args...)
	done := runPrinting(t, ctx, s, sender, "the sending run")
	receiver := pySpec(pageCacheReceiver, newMarker())
	receiver.Argv = append(receiver.Argv, args[:3]...)
	var got map[string]string
	runJSON(t, receiver, &got)
	cancel()
	<-done
	t.Logf("pattern %s; the concurrent run's probes: %v", pattern, got)
	for probe, v := range got {
		if v == string(pattern) {
			t.Errorf("%s showed the concurrent run's reads of %s: %s", probe, target, v)
		}
	}
	if got["preadv2_nowait"] != "EOPNOTSUPP" {
		t.Errorf("preadv2 with RWF_NOWAIT answered %q, want EOPNOTSUPP (refused by the filter)", got["preadv2_nowait"])
	}
	if got["cachestat"] != "ENOSYS" {
		t.Errorf("cachestat answered %q, want ENOSYS (left out of the filter)", got["cachestat"])
	}
}

// TestForeignArchSyscallKills runs a 32-bit int 0x80 getpid and an x32-ABI syscall
// number from a 64-bit process: the filter only knows the native ABI, so both must kill
// the process with SIGSYS instead of reaching an unfiltered table. x86_64 only: an arm64
// process has no instruction that enters the AArch32 table (only a 32-bit program does),
// and TestFilterPerArch checks that the arm64 program admits AUDIT_ARCH_AARCH64 alone.
func TestForeignArchSyscallKills(t *testing.T) {
	recordTier(t)
	if runtime.GOARCH != "amd64" {
		t.Skipf("not applicable on %s: int 0x80 and x32 are x86_64's foreign entry points", runtime.GOARCH)
	}
	const code = `
import ctypes, mmap, os, sys
def child(fn):
    pid = os.fork()
    if pid == 0:
        fn()
        os._exit(0)
    _, st = os.waitpid(pid, 0)
    return os.WTERMSIG(st) if os.WIFSIGNALED(st) else -os.WEXITSTATUS(st) - 1000
def int80():
    buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    buf.write(bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3]))  # mov eax,20; int 0x80; ret
    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    ctypes.CFUNCTYPE(ctypes.c_int)(addr)()
def x32():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall(ctypes.c_long(0x40000000 | 39))
print(child(int80), child(x32))
if sys.argv[-1] == "self":
    x32()
`
	res := run(t, pySpec(code, newMarker()))
	if res.Status != sandbox.StatusOK {
		t.Fatalf("probe failed: %s", brief(res))
	}
	if got := strings.TrimSpace(string(res.Stdout.Bytes())); got != "31 31" {
		t.Fatalf("int 0x80 and x32 syscalls: child signals %q, want \"31 31\" (SIGSYS)", got)
	}
	spec := pySpec(code, newMarker())
	spec.Argv = append(spec.Argv, "self")
	res = run(t, spec)
	if res.Status != sandbox.StatusKilled || res.Signal != "SIGSYS" {
		t.Fatalf("program killed by the filter: got %s", brief(res))
	}
}

func TestIdentity(t *testing.T) {
	recordTier(t)
	needProc(t)
	const code = `
import os, json, sys, time
st = {}
for line in open("/proc/self/status"):
    k, _, v = line.partition(":")
    st[k] = v.strip()
print(json.dumps({"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(),
    "groups": os.getgroups(), "status": st}), flush=True)
time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 0)
`
	marker := newMarker()
	spec := pySpec(code, marker)
	spec.Argv = append(spec.Argv, "0.6")
	done := make(chan sandbox.Result, 1)
	go func() {
		res, _ := testSandbox(t).Run(t.Context(), withDefaults(spec))
		done <- res
	}()
	// From the host, while it sleeps: the program runs as the unprivileged host id.
	pid := waitHostProc(t, marker, 3*time.Second)
	hostStatus, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	hostUID := statusField(string(hostStatus), "Uid")
	res := <-done
	var got struct {
		UID, EUID, GID int
		Groups         []int
		Status         map[string]string
	}
	decodeLast(t, res, &got)
	inside := 1000
	if inLandlockTier() {
		// No user namespace: the program's ids are its host ids.
		inside, _ = strconv.Atoi(strings.Fields(hostUID)[0])
		if inside == 0 {
			t.Fatalf("the program runs as host root")
		}
	}
	if got.UID != inside || got.EUID != inside || got.GID != inside {
		t.Errorf("inside ids: uid %d euid %d gid %d, want %d", got.UID, got.EUID, got.GID, inside)
	}
	for _, g := range got.Groups {
		if g != inside && g != 65534 {
			t.Errorf("supplementary group %d", g)
		}
	}
	if isRoot() && len(got.Groups) != 0 {
		t.Errorf("root server: groups %v, want none", got.Groups)
	}
	for k, want := range map[string]string{
		"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
		"CapBnd": "0000000000000000", "CapAmb": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2",
	} {
		if k == "CapBnd" && inLandlockTier() && !isRoot() {
			continue // only a root server's spawner can empty it; no_new_privs makes it inert
		}
		if got.Status[k] != want {
			t.Errorf("/proc/self/status %s = %q, want %q", k, got.Status[k], want)
		}
	}
	s := testSandbox(t)
	fields := strings.Fields(hostUID)
	for _, f := range fields {
		if f != fields[0] {
			t.Errorf("host sees the program as uid %q, want one id on every field", hostUID)
			break
		}
	}
	uid, _ := strconv.Atoi(fields[0])
	if !s.ids.owns(uint32(uid)) {
		t.Errorf("host sees the program as uid %d, outside the sandbox ids (%s)", uid, s.ids.describe())
	}
	if isRoot() && s.ids.scheme != schemeRange {
		t.Errorf("root server's id scheme is %s, want a uid per sandbox", s.ids.scheme)
	}
}

func statusField(status, key string) string {
	for _, line := range strings.Split(status, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestSetuidGainsNothing runs setuid-root binaries: the mounts are nosuid, no_new_privs
// is set and host root is not even mapped, so they run as uid 1000 and fail.
func TestSetuidGainsNothing(t *testing.T) {
	recordTier(t)
	t.Parallel()
	for _, p := range []string{"/usr/bin/su", "/usr/bin/passwd"} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode()&os.ModeSetuid == 0 {
			t.Fatalf("%s is not a setuid binary on this host: the test cannot prove anything", p)
		}
	}
	const code = `
import os, subprocess, json
out = {}
r = subprocess.run(["/usr/bin/su", "-c", "echo PWNED; id -u", "root"], input=b"\n", capture_output=True)
out["su"] = [r.returncode, r.stdout.decode(), r.stderr.decode()]
r = subprocess.run(["/usr/bin/passwd", "-S", "root"], capture_output=True)
out["passwd"] = [r.returncode, r.stdout.decode(), r.stderr.decode()]
# Python's own view after exec of a setuid binary: euid stays 1000.
r = subprocess.run(["/usr/bin/newgrp", "root"], input=b"id -u\n", capture_output=True)
out["newgrp"] = [r.returncode, r.stdout.decode(), r.stderr.decode()]
print(json.dumps(out))
`
	var got map[string][3]any
	res := runJSON(t, pySpec(code, newMarker()), &got)
	if strings.Contains(string(res.Stdout.Bytes()), "PWNED") {
		t.Fatalf("su ran a command: %s", brief(res))
	}
	for name, r := range got {
		if rc, _ := r[0].(float64); rc == 0 {
			t.Errorf("%s succeeded: %v", name, r)
		}
		if out, _ := r[1].(string); strings.TrimSpace(out) == "0" {
			t.Errorf("%s ran as root: %v", name, r)
		}
	}
	t.Logf("setuid attempts: %v", got)
}

func TestEnvDoesNotLeak(t *testing.T) {
	recordTier(t)
	secret := "airlock-env-secret-" + randHex(12)
	t.Setenv("AIRLOCK_TEST_SECRET", secret)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	const code = `
import os, json
out = {"env": dict(os.environ)}
for p in ["/proc/1/environ", "/proc/self/environ"]:
    try:
        out[p] = open(p, "rb").read().decode("latin-1")
    except OSError as e:
        out[p] = "error %d" % e.errno
print(json.dumps(out))
`
	spec := pySpec(code, newMarker())
	spec.Env = append(spec.Env, "LANGUAGE_VAR=1")
	var got struct {
		Env map[string]string `json:"env"`
	}
	res := runJSON(t, spec, &got)
	if strings.Contains(string(res.Stdout.Bytes()), secret) {
		t.Fatalf("the server's environment reached the sandbox:\n%s", brief(res))
	}
	var keys []string
	for k := range got.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := "AIRLOCK_MARK HOME LANG LANGUAGE_VAR LOGNAME PATH TMPDIR USER"
	if strings.Join(keys, " ") != want {
		t.Errorf("program environment %v, want exactly %s", keys, want)
	}
	denied := `"/proc/1/environ": "error 13"`
	if testSandbox(t).adapt.noProc {
		denied = `"/proc/1/environ": "error 2"`
	}
	if !strings.Contains(string(res.Stdout.Bytes()), denied) {
		t.Errorf("init's environ readable: %s", brief(res))
	}
}

func TestFDsDoNotLeak(t *testing.T) {
	recordTier(t)
	secretFile := filepath.Join(t.TempDir(), "fd-secret")
	if err := os.WriteFile(secretFile, []byte("fd-secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Without O_CLOEXEC on purpose: a careless server leaks such descriptors.
	fd, err := syscall.Open(secretFile, syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	syscall.Syscall(syscall.SYS_FCNTL, w.Fd(), syscall.F_SETFD, 0)
	needProc(t)
	const code = `
import os, json
listed = sorted(int(x) for x in os.listdir("/proc/self/fd"))
open_fds = []
for fd in range(3, 65536):
    try:
        os.fstat(fd)
        open_fds.append([fd, os.readlink("/proc/self/fd/%d" % fd)])
    except OSError:
        pass
print(json.dumps({"listed": listed, "open": open_fds}))
`
	var got struct {
		Listed []int   `json:"listed"`
		Open   [][]any `json:"open"`
	}
	runJSON(t, pySpec(code, newMarker()), &got)
	if len(got.Open) != 0 {
		t.Fatalf("the program inherited descriptors beyond 0-2: %v (server leaked fd %d, pipe %d)", got.Open, fd, w.Fd())
	}
	// listdir's own descriptor shows up while it lists.
	if len(got.Listed) != 4 || got.Listed[0] != 0 || got.Listed[1] != 1 || got.Listed[2] != 2 {
		t.Fatalf("/proc/self/fd lists %v, want 0 1 2 and the listing's own fd", got.Listed)
	}
}

// pageEvicter drops a host file's pages from the page cache, argv[2], with
// posix_fadvise(POSIX_FADV_DONTNEED), and again through the raw syscall with garbage in
// the upper half of the advice (the kernel reads an int). It prints each outcome.
const pageEvicter = `
import ctypes, errno, json, os, platform, sys
fd = os.open(sys.argv[2], os.O_RDONLY)
out = {}
try:
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    out["posix_fadvise"] = "ok"
except OSError as e:
    out["posix_fadvise"] = errno.errorcode[e.errno]
nr = {"x86_64": 221, "aarch64": 223}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(ctypes.c_long(nr), ctypes.c_long(fd), ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0x7eadbeef00000004))
out["garbage_high"] = "ok" if r == 0 else errno.errorcode[ctypes.get_errno()]
print(json.dumps(out))
`

// residentPages counts the pages of path in the page cache, as the host (root, the
// file's owner, for whom mincore tells the truth) sees them.
func residentPages(t *testing.T, path string) (resident, total int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatalf("mincore: %v", e)
	}
	for _, v := range vec {
		resident += int(v & 1)
	}
	return resident, len(vec)
}

// TestHostPageCacheKept: a run may not drop the host's system files from the page
// cache. They are the host's own inodes, shared by every run and the host: evicted,
// every other tenant's next start reads them from disk, and a run that flushes a page
// before timing its reload reads another run's file accesses page by page (the timing
// channel of TestPageCacheUnobservable made exact). Without the filter's rule the run's
// fadvise dropped every page of the file (the stdlib's, all 1,405 files, in one walk).
func TestHostPageCacheKept(t *testing.T) {
	recordTier(t)
	if !isRoot() {
		t.Skip("SKIPPING: mincore reports the pages of a file the caller may not write as all resident: the host observer must own the stdlib file (root)")
	}
	files, _ := filepath.Glob("/usr/lib/python3*/pydoc_data/topics.py")
	if len(files) == 0 {
		t.Fatal("no pydoc_data/topics.py under /usr/lib/python3*: the test needs a large stdlib file no run imports")
	}
	target := files[0]
	if _, err := os.ReadFile(target); err != nil {
		t.Fatal(err)
	}
	if in, n := residentPages(t, target); in < n {
		t.Fatalf("%s: %d of %d pages resident after the host read it: the test would prove nothing", target, in, n)
	}
	spec := pySpec(pageEvicter, newMarker())
	spec.Argv = append(spec.Argv, target)
	var got map[string]string
	runJSON(t, spec, &got)
	in, n := residentPages(t, target)
	t.Logf("the run: %v; %s: %d of %d pages resident after it", got, target, in, n)
	if in < n {
		t.Errorf("a run dropped %d of %d pages of the host's %s from the page cache (%v)", n-in, n, target, got)
	}
	if got["posix_fadvise"] != "ok" || got["garbage_high"] != "ok" {
		t.Errorf("fadvise(DONTNEED) answered %v, want ok (a no-op, as on tmpfs)", got)
	}
}
