package linux

import (
	"os"
	"path/filepath"
	"testing"
)

// A base removed by another airlock process (empty, at its Close) is made again when the
// next sandbox's cgroup is created in it. Plain directories stand in for the hierarchy.
func TestMakeInRemakesARemovedBase(t *testing.T) {
	base := filepath.Join(t.TempDir(), cgroupDir)
	m := &cgroups{version: 1, v1: map[string]string{"memory": base}}
	if err := m.makeIn(base, filepath.Join(base, "1-a")); err != nil {
		t.Fatalf("with the base gone: %v", err)
	}
	if err := m.makeIn(base, filepath.Join(base, "1-b")); err != nil {
		t.Fatalf("with the base there: %v", err)
	}
	if err := m.makeIn(base, filepath.Join(base, "1-b")); !os.IsExist(err) {
		t.Fatalf("an existing cgroup: %v, want EEXIST", err)
	}
}

// Close removes only the bases this process made, and only when empty.
func TestRemoveBasesOnlyOwnAndEmpty(t *testing.T) {
	dir := t.TempDir()
	own, busy, foreign := filepath.Join(dir, "own"), filepath.Join(dir, "busy"), filepath.Join(dir, "foreign")
	for _, d := range []string{own, busy, foreign, filepath.Join(busy, "1-x")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	m := &cgroups{version: 1, created: []string{own, busy}}
	m.removeBases()
	for d, want := range map[string]bool{own: false, busy: true, foreign: true} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s: exists %t, want %t", d, err == nil, want)
		}
	}
}
