package linux

import (
	"encoding/json"
	"github.com/airlock-mcp/airlock/internal/sandboxtest"
	"os"
	"path/filepath"
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
	code := `
import json, os, sys
target, d, forged = sys.argv[2], sys.argv[3], sys.argv[4]
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "ok"
    except OSError as e:
        out[name] = os.strerror(e.errno)
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
