package linux

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"github.com/airlock-mcp/airlock/internal/sandboxtest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/internal/stamp"
	"github.com/airlock-mcp/airlock/sandbox"
)

func stampStore(t *testing.T, dir string) *stamp.Store {
	t.Helper()
	st, err := stamp.Open(filepath.Join(dir, "state"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// selfChecks lists the self-check stamps in dir with their inode: a full check that
// passes replaces its stamp (a new inode); a reused one leaves it alone.
func selfChecks(t *testing.T, dir string) map[string]uint64 {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "state", checkKind+"-*.json"))
	out := map[string]uint64{}
	for _, p := range m {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = fi.Sys().(*syscall.Stat_t).Ino
	}
	return out
}

func newStamped(t *testing.T, opts sandbox.Options) *Sandbox {
	t.Helper()
	s, err := New(opts)
	sandboxtest.Require(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// A self-check that passed is stamped; the next backend with the same inputs reuses it
// (its stamp is not rewritten) and reports every layer from it; other settings are
// other inputs and check in full.
func TestSelfCheckStampReusedForSameInputsOnly(t *testing.T) {
	dir := t.TempDir()
	opts := sandbox.Options{Stamps: stampStore(t, dir)}
	first := newStamped(t, opts)
	stamps := selfChecks(t, dir)
	if len(stamps) != 1 {
		t.Fatalf("after a passing self-check: stamps %v, want one", stamps)
	}
	second := newStamped(t, opts)
	if got := selfChecks(t, dir); !equalInodes(got, stamps) {
		t.Fatalf("the second backend checked in full (stamps %v, were %v)", got, stamps)
	}
	rep, err := second.Probe(t.Context())
	if err != nil || len(rep.Missing()) > 0 {
		t.Fatalf("Probe from the stamp: %v, missing %v", err, rep.Missing())
	}
	want, _ := first.Probe(t.Context())
	if a, b := layerNames(rep), layerNames(want); a != b {
		t.Errorf("layers from the stamp %s, from the full check %s", a, b)
	}
	if got := selfChecks(t, dir); !equalInodes(got, stamps) {
		t.Fatalf("Probe with a stamp store built a sandbox again (stamps %v)", got)
	}
	res, err := second.Run(t.Context(), withDefaults(pySpec("print('ran')", newMarker())))
	if err != nil || res.Status != sandbox.StatusOK || strings.TrimSpace(string(res.Stdout.Bytes())) != "ran" {
		t.Fatalf("a run after a reused check: %v %s", err, brief(res))
	}

	other := opts
	other.Cgroups = "off"
	newStamped(t, other)
	if got := selfChecks(t, dir); len(got) != 2 {
		t.Fatalf("other settings reused the stamp: stamps %v", got)
	}
	newStamped(t, sandbox.Options{Stamps: stampStore(t, dir).Recheck()})
	for p, ino := range stamps {
		if got := selfChecks(t, dir); got[p] == ino {
			t.Fatalf("a recheck did not check in full (stamp %s unchanged)", p)
		}
	}
}

func equalInodes(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func layerNames(r sandbox.Report) string {
	var b strings.Builder
	for _, l := range r.Layers {
		b.WriteString(l.Name)
		if l.Active {
			b.WriteString("+")
		}
		b.WriteString(" ")
	}
	return b.String()
}

// A self-check that fails is never stamped, and a stamp is never written for it.
func TestFailingSelfCheckIsNeverStamped(t *testing.T) {
	t.Parallel()
	testSandbox(t) // skips loudly where no sandbox can be built at all
	dir := t.TempDir()
	checker, err := New(sandbox.Options{Stamps: stampStore(t, dir)})
	sandboxtest.Require(t, err)
	defer checker.Close()
	passed := selfChecks(t, dir)
	key := checker.checkKey()
	key.Add("test", newMarker()) // a key of its own: a stamp under it can only come from this check
	if err := checker.check(key, func(cfg *initConfig) { cfg.faultWorkspaceMount = true }); err == nil {
		t.Fatal("the self-check passed with /workspace unmountable")
	}
	if got := selfChecks(t, dir); len(got) != len(passed) {
		t.Fatalf("a failed self-check left stamps %v (were %v)", got, passed)
	}
}

// A sandboxed program cannot plant or change a stamp: the state directory is not in
// its root, and its host uid could not write there anyway. Tried with the real
// default directory (root: /run/airlock; the unprivileged suite: its own).
func TestSandboxCannotWriteStamps(t *testing.T) {
	t.Parallel()
	testSandbox(t)
	dir := stamp.DefaultDir()
	st, err := stamp.Open(dir, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	k := &stamp.Key{}
	k.Add("test", newMarker())
	if err := st.Save("escape-test", k, checkStamp{Rules: 1}); err != nil {
		t.Fatal(err)
	}
	m, _ := filepath.Glob(filepath.Join(dir, "escape-test-*.json"))
	if len(m) != 1 {
		t.Fatalf("want one test stamp, have %v", m)
	}
	target := m[0]
	t.Cleanup(func() { os.Remove(target) })
	forged, _ := json.Marshal(map[string]any{"rules": 99})
	code := pyAttempt + `
target, d, forged = sys.argv[2], sys.argv[3], sys.argv[4]
attempt("overwrite", lambda: open(target, "w").write(forged))
attempt("create", lambda: open(os.path.join(d, "selfcheck-0000000000000000.json"), "x").write(forged))
attempt("list", lambda: os.listdir(d))
attempt("via proc", lambda: open("/proc/1/root" + target, "w").write(forged))
print(json.dumps(out))
`
	spec := pySpec(code, newMarker())
	spec.Argv = append(spec.Argv, target, dir, string(forged))
	var out map[string]string
	runJSON(t, spec, &out)
	t.Logf("attempts from inside the sandbox: %v", out)
	if len(out) != 4 {
		t.Fatalf("attempts %v, want 4", out)
	}
	for name, got := range out {
		if got == "ok" {
			t.Errorf("%s succeeded inside the sandbox (all: %v)", name, out)
		}
	}
	var v checkStamp
	if err := st.Load("escape-test", k, &v); err != nil || v.Rules != 1 {
		t.Fatalf("the stamp changed under the sandbox: %+v, %v", v, err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "selfcheck-0000000000000000.json")); len(m) > 0 {
		t.Fatalf("the sandbox planted %v", m)
	}
}

// The self-check's key follows the binary's identity and the settings.
func TestCheckKeyFollowsBinaryAndSettings(t *testing.T) {
	s := testSandbox(t)
	bin := filepath.Join(t.TempDir(), "airlock")
	if err := os.WriteFile(bin, []byte("one"), 0o755); err != nil {
		t.Fatal(err)
	}
	key := func(opts sandbox.Options) string {
		return (&Sandbox{self: bin, opts: opts, root: s.root, ids: s.ids, cg: s.cg}).checkKey().Sum()
	}
	k1 := key(sandbox.Options{})
	if k1 == "" || k1 != key(sandbox.Options{}) {
		t.Fatalf("keys %q, %q: want the same, non-empty", k1, key(sandbox.Options{}))
	}
	if key(sandbox.Options{UIDRange: "off"}) == k1 || key(sandbox.Options{AllowDegraded: true}) == k1 {
		t.Fatal("another setting has the same key")
	}
	if err := os.WriteFile(bin, []byte("two"), 0o755); err != nil {
		t.Fatal(err)
	}
	if key(sandbox.Options{}) == k1 {
		t.Fatal("a rewritten binary has the same key")
	}
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	if k := key(sandbox.Options{}); k != "" {
		t.Fatalf("a missing binary gives key %q, want none (check in full)", k)
	}
}

// editCheckStamps rewrites every self-check stamp in dir in place (same file, owner and
// mode: only its value changes, as a corrupt or tampered file would).
func editCheckStamps(t *testing.T, dir string, edit func(*checkStamp)) {
	t.Helper()
	for p := range selfChecks(t, dir) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		line, att, ok := bytes.Cut(b, []byte("\n"))
		if !ok {
			t.Fatalf("%s: no record line", p)
		}
		var r map[string]json.RawMessage
		var st checkStamp
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(r["value"], &st); err != nil {
			t.Fatal(err)
		}
		if err := st.Attach(att); err != nil {
			t.Fatal(err)
		}
		edit(&st)
		for n, f := range st.Filters { // the edit's programs, whole as the store keeps them
			f.Len = len(f.Prog)
			st.Filters[n] = f
		}
		att = st.Attachment()
		if r["value"], err = json.Marshal(st); err != nil {
			t.Fatal(err)
		}
		if r["attached"], err = json.Marshal(len(att)); err != nil {
			t.Fatal(err)
		}
		if line, err = json.Marshal(r); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, append(append(line, '\n'), att...), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// ptraceCode asks for a syscall the filter leaves out (ptrace): ENOSYS under the
// filter, 0 (a successful PTRACE_TRACEME) without one.
const ptraceCode = `
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
r = libc.ptrace(0, 0, 0, 0)
print(json.dumps({"ret": r, "errno": ctypes.get_errno()}))
`

// The seccomp programs a passing self-check ran with are stamped with it: the next
// backend with the same inputs loads them instead of compiling (the same bytes, and a
// run under them is filtered); other settings, a recheck, a stamp without a program for
// a mode, a program that is not well formed or a stamp of another owner compile afresh.
func TestStampedFiltersReusedForSameInputsOnly(t *testing.T) {
	dir := t.TempDir()
	opts := sandbox.Options{Stamps: stampStore(t, dir)}
	first := newStamped(t, opts)
	if first.filtersStamped {
		t.Fatal("the first backend (no stamp yet) took its filters from a stamp")
	}
	second := newStamped(t, opts)
	if !second.filtersStamped {
		t.Fatal("a backend with a fresh stamp compiled its filters again")
	}
	for n, f := range first.filters {
		if g := second.filters[n]; g == nil || !bytes.Equal(g.prog, f.prog) || g.rules != f.rules || g.badArch != f.badArch {
			t.Fatalf("network %s: the stamped filter differs from the compiled one", n)
		}
	}
	res, err := second.Run(t.Context(), withDefaults(pySpec(ptraceCode, newMarker())))
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("a run under the stamped filter: %v %s", err, brief(res))
	}
	var got struct{ Ret, Errno int }
	if err := json.Unmarshal(res.Stdout.Bytes(), &got); err != nil || got.Ret != -1 || got.Errno != int(syscall.ENOSYS) {
		t.Fatalf("ptrace under the stamped filter: %s (%v), want -1 ENOSYS", res.Stdout.Bytes(), err)
	}

	other := opts
	other.Cgroups = "off"
	if newStamped(t, other).filtersStamped {
		t.Error("other settings took the filters of the stamp")
	}
	// The modes are not part of the key: each program is stamped under its own mode.
	host := opts
	host.Networks = []sandbox.Network{sandbox.NetworkHost}
	if s := newStamped(t, host); !s.filtersStamped || !bytes.Equal(s.filters[sandbox.NetworkHost].prog, first.filters[sandbox.NetworkHost].prog) {
		t.Error("the host mode's program was not the one stamped for it")
	}
	if newStamped(t, sandbox.Options{Stamps: stampStore(t, dir).Recheck()}).filtersStamped {
		t.Error("a recheck took the filters of the stamp")
	}

	editCheckStamps(t, dir, func(st *checkStamp) { delete(st.Filters, sandbox.NetworkNone) })
	if s := newStamped(t, opts); s.filtersStamped || s.filters[sandbox.NetworkNone] == nil {
		t.Error("a stamp without the none filter: the backend did not compile it")
	}
	cut := func(st *checkStamp) {
		for n, f := range st.Filters {
			f.Prog = f.Prog[:len(f.Prog)-3] // not whole instructions
			st.Filters[n] = f
		}
	}
	// A reused check is never restamped: a recheck writes a whole stamp again.
	newStamped(t, sandbox.Options{Stamps: stampStore(t, dir).Recheck()})
	if s := newStamped(t, opts); !s.filtersStamped {
		t.Fatal("after a recheck: the filters were not stamped again")
	}
	editCheckStamps(t, dir, cut)
	if s := newStamped(t, opts); s.filtersStamped {
		t.Error("a truncated stamped program was taken")
	}
}

// A stamp (and the filters in it) written by another user is never taken, even with
// every input matching: only this euid's own private files are trusted.
func TestStampedFiltersOfAnotherOwnerIgnored(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root to give the stamp to another owner; the root run covers it")
	}
	dir := t.TempDir()
	opts := sandbox.Options{Stamps: stampStore(t, dir)}
	newStamped(t, opts)
	for p := range selfChecks(t, dir) {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if newStamped(t, opts).filtersStamped {
		t.Fatal("a stamp owned by nobody was trusted")
	}
}

func TestWellFormedFilter(t *testing.T) {
	ret := []byte{0x06, 0, 0, 0, 0, 0, 0xff, 0x7f} // BPF_RET|BPF_K, SECCOMP_RET_ALLOW
	ld := []byte{0x20, 0, 0, 0, 0, 0, 0, 0}        // BPF_LD|BPF_W|BPF_ABS
	if binary.NativeEndian.Uint16([]byte{0x06, 0}) != 0x06 {
		ret[0], ret[1], ld[0], ld[1] = 0, 0x06, 0, 0x20 // big-endian hosts
	}
	for _, c := range []struct {
		name string
		prog []byte
		want bool
	}{
		{"empty", nil, false},
		{"one return", ret, true},
		{"a load then a return", append(slices.Clone(ld), ret...), true},
		{"ends in a load", append(slices.Clone(ret), ld...), false},
		{"part of an instruction", ret[:7], false},
		{"more than BPF_MAXINSNS", bytes.Repeat(ret, 4097), false},
	} {
		if got := wellFormed(c.prog); got != c.want {
			t.Errorf("%s: wellFormed %t, want %t", c.name, got, c.want)
		}
	}
}

// A stamp's programs come back from its attachment by their lengths, in the order they
// were written; lengths that do not add up to the attachment refuse the stamp.
func TestCheckStampAttachment(t *testing.T) {
	st := checkStamp{Filters: map[sandbox.Network]stampedFilter{
		sandbox.NetworkNone: {Prog: []byte("none-prog"), Len: 9},
		sandbox.NetworkHost: {Prog: []byte("host"), Len: 4},
	}}
	att := st.Attachment()
	got := checkStamp{Filters: map[sandbox.Network]stampedFilter{
		sandbox.NetworkNone: {Len: 9}, sandbox.NetworkHost: {Len: 4},
	}}
	if err := got.Attach(att); err != nil {
		t.Fatal(err)
	}
	for n, f := range st.Filters {
		if !bytes.Equal(got.Filters[n].Prog, f.Prog) {
			t.Errorf("%s: %q back, want %q", n, got.Filters[n].Prog, f.Prog)
		}
	}
	for _, lens := range [][2]int{{9, 3}, {9, 5}, {-1, 14}, {14, -1}, {0, 0}} {
		bad := checkStamp{Filters: map[sandbox.Network]stampedFilter{
			sandbox.NetworkNone: {Len: lens[0]}, sandbox.NetworkHost: {Len: lens[1]},
		}}
		if err := bad.Attach(att); err == nil {
			t.Errorf("lengths %v of a %d-byte attachment were taken", lens, len(att))
		}
	}
}
