//go:build linux

package cli

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/internal/stamp"
)

func copyBinary(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	tmp := to + ".tmp"
	if err := os.WriteFile(tmp, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, to); err != nil {
		t.Fatal(err)
	}
}

func interpreterStamps(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "interpreter-*.json"))
	return m
}

// An interpreter's probe answer is reused for the same binary only; a replaced binary
// is probed again, and a probe that fails is never stamped.
func TestStampedProbeFollowsTheBinary(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	st, err := stamp.Open(dir, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	probe := stampedProbe(st)
	interp := filepath.Join(t.TempDir(), "interp")
	copyBinary(t, "/bin/echo", interp)
	if out, err := probe(interp, []string{"one"}); err != nil || out != "one\n" {
		t.Fatalf("first probe: %q, %v", out, err)
	}
	if n := len(interpreterStamps(t, dir)); n != 1 {
		t.Fatalf("%d stamps after a probe, want 1", n)
	}
	// Same binary: the answer comes from the stamp (echo would say the same; the stamp's
	// inode stays, no new save).
	before, _ := os.Stat(interpreterStamps(t, dir)[0])
	if out, err := probe(interp, []string{"one"}); err != nil || out != "one\n" {
		t.Fatalf("stamped probe: %q, %v", out, err)
	}
	after, _ := os.Stat(interpreterStamps(t, dir)[0])
	if !os.SameFile(before, after) {
		t.Fatal("the same binary was probed again")
	}
	// Replaced by another program at the same path: probed again, its own answer.
	copyBinary(t, "/bin/true", interp)
	if out, err := probe(interp, []string{"one"}); err != nil || out != "" {
		t.Fatalf("after the binary changed: %q, %v (a stale answer?)", out, err)
	}
	// Failing: an error, and no stamp for it.
	copyBinary(t, "/bin/false", interp)
	n := len(interpreterStamps(t, dir))
	if _, err := probe(interp, []string{"one"}); err == nil {
		t.Fatal("a failing probe passed")
	}
	if got := len(interpreterStamps(t, dir)); got != n {
		t.Fatalf("a failing probe was stamped (%d stamps, were %d)", got, n)
	}
}
