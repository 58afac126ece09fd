package linux

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/sandbox"
)

// probeProc reads each path given on stdin from inside the sandbox: a file's first bytes
// (or the errno that refused it), a directory's entries. Writing is tried too, and what
// reads back after it.
const probeProc = `
import errno, json, os, sys
out = {}
for p in json.load(sys.stdin):
    r = {}
    try:
        if os.path.isdir(p):
            r["entries"] = sorted(os.listdir(p))
        else:
            with open(p, "rb") as f:
                r["bytes"] = len(f.read(1 << 16))
    except OSError as e:
        r["err"] = errno.errorcode.get(e.errno, str(e.errno))
    try:
        with open(p, "wb") as f:
            f.write(b"1")
        r["write"] = "ok"
        with open(p, "rb") as f:
            r["after"] = len(f.read(1 << 16))
    except OSError as e:
        r["write"] = errno.errorcode.get(e.errno, str(e.errno))
    out[p] = r
print(json.dumps(out))
`

type procRead struct {
	Entries []string `json:"entries"`
	Bytes   *int     `json:"bytes"`
	Err     string   `json:"err"`
	Write   string   `json:"write"`
	After   int      `json:"after"` // bytes read back after a write that succeeded
}

func readProcInside(t *testing.T, s *Sandbox, noProc bool, paths []string) map[string]procRead {
	t.Helper()
	stdin, _ := json.Marshal(paths)
	spec := withDefaults(pySpec(probeProc, newMarker()))
	spec.ID = newID()
	spec.Stdin = stdin
	cfg := s.config(spec)
	cfg.NoProc = noProc
	res, err := s.run(context.Background(), spec, cfg)
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("run: %v: %s", err, brief(res))
	}
	var got map[string]procRead
	lines := strings.Split(strings.TrimSpace(string(res.Stdout.Bytes())), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatalf("decode: %v: %s", err, brief(res))
	}
	return got
}

// TestProcFingerprintsMasked reads every masked /proc path from inside a real sandbox:
// each the host shows with content must read empty (or be refused), no directory may
// list anything, and nothing written to one reads back. Without procMasks the host's boot arguments,
// boot id, kernel config and keys read back in full.
func TestProcFingerprintsMasked(t *testing.T) {
	s := testSandbox(t)
	if s.adapt.noProc {
		t.Skip("SKIPPING: THIS HOST GIVES SANDBOXES AN EMPTY /proc (container adaptation), NOTHING TO MASK: TestNoProcSubstitute checks it")
	}
	var paths, present []string
	for _, p := range procMasks {
		paths = append(paths, "/proc/"+p)
		if fi, err := os.Stat("/proc/" + p); err == nil && (fi.IsDir() || fileHasContent("/proc/"+p)) {
			present = append(present, "/proc/"+p)
		}
	}
	// The host must show the fingerprints, or this test proves nothing.
	for _, p := range []string{"/proc/cmdline", "/proc/sys/kernel/random/boot_id", "/proc/interrupts"} {
		if !contains(present, p) {
			t.Fatalf("the host shows no %s: the test would prove nothing", p)
		}
	}
	got := readProcInside(t, s, false, paths)
	for _, p := range paths {
		r, ok := got[p]
		if !ok {
			t.Errorf("%s: not read", p)
			continue
		}
		switch {
		case r.Bytes != nil && *r.Bytes > 0:
			t.Errorf("%s: %d bytes readable inside the sandbox", p, *r.Bytes)
		case len(r.Entries) > 0:
			t.Errorf("%s: lists %v inside the sandbox", p, r.Entries)
		case r.Write == "ok" && r.After > 0:
			// A masked file is /dev/null, as runc masks: a write is accepted and lost.
			t.Errorf("%s: a write inside the sandbox reads back %d bytes", p, r.After)
		}
	}
	t.Logf("%d masked paths, %d of them with content on this host: %v", len(paths), len(present), present)
	// The counters programs need stay readable (docs/containers.md).
	kept := readProcInside(t, s, false, []string{"/proc/stat", "/proc/cpuinfo", "/proc/meminfo", "/proc/loadavg", "/proc/uptime"})
	for p, r := range kept {
		if r.Bytes == nil || *r.Bytes == 0 {
			t.Errorf("%s: unreadable inside the sandbox (%s), programs need it", p, r.Err)
		}
	}
}

// TestProcMasksReadOnly reads the sandbox's own mountinfo: every masked /proc path that
// exists on this host is a mount point there, read-only and nosuid, and a masked file is
// noexec too, each mask on its own and not only the first (all but the first file mask
// are binds of it and must carry its flags over).
func TestProcMasksReadOnly(t *testing.T) {
	s := testSandbox(t)
	if s.adapt.noProc {
		t.Skip("SKIPPING: THIS HOST GIVES SANDBOXES AN EMPTY /proc (container adaptation), NOTHING TO MASK: TestNoProcSubstitute checks it")
	}
	code := "import json\nprint(json.dumps({l.split()[4]: l.split()[5] for l in open('/proc/self/mountinfo')}))"
	var opts map[string]string
	runJSON(t, withDefaults(pySpec(code, newMarker())), &opts)
	files := 0
	for _, p := range procMasks {
		fi, err := os.Lstat("/proc/" + p)
		if err != nil {
			continue
		}
		o, ok := opts["/proc/"+p]
		if !ok {
			t.Errorf("/proc/%s: not masked (no mount point inside the sandbox)", p)
			continue
		}
		want := []string{"ro", "nosuid"}
		if !fi.IsDir() {
			want = append(want, "noexec")
			files++
		}
		for _, w := range want {
			if !slices.Contains(strings.Split(o, ","), w) {
				t.Errorf("/proc/%s: mounted %s, want %s", p, o, w)
			}
		}
	}
	if files < 2 {
		t.Fatalf("only %d masked files on this host: the test would prove nothing about the binds of the first", files)
	}
}

// TestNoProcSubstitute is the sandbox a container that masks its /proc gets: an empty,
// read-only /proc, never the container's own. Nothing of it lists, reads or writes.
func TestNoProcSubstitute(t *testing.T) {
	s := testSandbox(t)
	paths := []string{"/proc", "/proc/self/status", "/proc/1/environ", "/proc/self/mountinfo"}
	for _, p := range procMasks {
		paths = append(paths, "/proc/"+p)
	}
	got := readProcInside(t, s, true, paths)
	if r := got["/proc"]; r.Err != "" || len(r.Entries) != 0 {
		t.Fatalf("/proc: %+v, want an empty directory", r)
	}
	for _, p := range paths[1:] {
		r := got[p]
		if r.Err != "ENOENT" || r.Write == "ok" {
			t.Errorf("%s: %+v, want ENOENT and no write", p, r)
		}
	}
}

func fileHasContent(p string) bool {
	b, err := os.ReadFile(p)
	return err == nil && len(b) > 0
}

// needProc ends a test that watches the sandbox through its own /proc where sandboxes have
// none (a container that masks its /proc: adaptations.noProc), loudly. What it checks is
// checked there through syscalls instead: the probe suite's identity, no-new-privs,
// seccomp-mode and fd-leak probes ask capget, prctl and fstat (probe/programs), and
// TestNoProcSubstitute shows the empty /proc holds nothing.
func needProc(t *testing.T) {
	t.Helper()
	if testSandbox(t).adapt.noProc {
		t.Skip("SKIPPING: THIS CONTAINER'S SANDBOXES HAVE NO /proc TO WATCH THEM THROUGH (probe's syscall checks cover it)")
	}
}

// noProcExpect turns every /proc expectation in want into errno where sandboxes have no
// /proc: nothing there exists.
func noProcExpect(t *testing.T, want map[string]string, errno string) {
	t.Helper()
	if !testSandbox(t).adapt.noProc {
		return
	}
	for p := range want {
		if strings.HasPrefix(p, "/proc/") {
			want[p] = errno
		}
	}
}

// mountPoint reports whether path is a mount point of the test's own mount namespace.
func mountPoint(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}

// TestHostLocksInvisible holds an open file description lock on the host at a range
// of its own, as the server holds one per live sandbox on its host-id lock file (at the
// sandbox's host uid), and has a run read /proc/locks: the kernel lists OFD locks there
// whatever the reader's pid namespace, POSIX and flock locks only of the reader's own.
// Unmasked, the run read the range and the file's inode, and the server's host-id
// locks beside it.
func TestHostLocksInvisible(t *testing.T) {
	notInTier(t, "the host's /proc is the program's (README, the Landlock tier)")
	s := testSandbox(t)
	if s.adapt.noProc {
		t.Skip("SKIPPING: THIS HOST GIVES SANDBOXES AN EMPTY /proc (container adaptation): TestNoProcSubstitute checks it")
	}
	f, err := os.CreateTemp(t.TempDir(), "lock")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start := int64(1<<40) + int64(os.Getpid())<<8
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: start, Len: 1}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		t.Fatalf("F_OFD_SETLK: %v", err)
	}
	want := fmt.Sprintf(" %d %d", start, start)
	host, err := os.ReadFile("/proc/locks")
	if err != nil || !strings.Contains(string(host), want) {
		t.Fatalf("the host's /proc/locks does not show the lock (%v): the test would prove nothing", err)
	}
	// A mask may also refuse the read (a privileged container's /dev/null): nothing read.
	const reader = "import errno, sys\ntry:\n    sys.stdout.write(open('/proc/locks').read())\nexcept OSError as e:\n    print('refused:', errno.errorcode[e.errno])"
	res := run(t, withDefaults(pySpec(reader, newMarker())))
	if res.Status != sandbox.StatusOK {
		t.Fatalf("run: %s", brief(res))
	}
	if got := string(res.Stdout.Bytes()); got != "" && !strings.HasPrefix(got, "refused: ") {
		t.Errorf("/proc/locks in the sandbox lists the host's locks (the test's lock at%s: %v):\n%s", want, strings.Contains(got, want), got)
	}
}
