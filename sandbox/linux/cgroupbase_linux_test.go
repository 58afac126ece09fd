package linux

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// A base removed by another airlock process (empty, at its Close) is made again when the
// next Sandbox makes its own dir in it. Plain directories stand in for the hierarchy.
func TestOwnDirRemakesARemovedBase(t *testing.T) {
	base := filepath.Join(t.TempDir(), cgroupDir)
	if _, made, err := ownDir(base, "1.a", nil); err != nil || !made {
		t.Fatalf("with the base gone: made %t, %v", made, err)
	}
	if _, made, err := ownDir(base, "1.b", nil); err != nil || made {
		t.Fatalf("with the base there: made %t, %v", made, err)
	}
	if _, _, err := ownDir(base, "1.b", nil); !os.IsExist(errors.Unwrap(err)) {
		t.Fatalf("an existing own dir: %v, want EEXIST", err)
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

// readKey and readInt parse cgroup counters: a key's value among lines of "key value",
// a file's single number; 0 for what is missing.
func TestReadCgroupCounters(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "memory.events")
	if err := os.WriteFile(events, []byte("low 0\nhigh 3\nmax 17\noom 2\noom_kill 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	peak := filepath.Join(dir, "memory.peak")
	if err := os.WriteFile(peak, []byte("123456789\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key  string
		want int64
	}{{"max", 17}, {"oom_kill", 1}, {"oom", 2}, {"low", 0}, {"missing", 0}, {"oo", 0}} {
		if got := readKey(events, c.key); got != c.want {
			t.Errorf("readKey(%q) = %d, want %d", c.key, got, c.want)
		}
	}
	if got := readInt(peak); got != 123456789 {
		t.Errorf("readInt = %d, want 123456789", got)
	}
	if got := readInt(filepath.Join(dir, "absent")); got != 0 {
		t.Errorf("readInt of a missing file = %d, want 0", got)
	}
}

// A run's CPU time is checked by the rate its cgroup lets it use CPU (cpuWatch): one CPU
// under the quota, every CPU where no cpu controller sets one.
func TestCgroupCPURate(t *testing.T) {
	all := max(runtime.NumCPU(), 1)
	for _, tc := range []struct {
		name string
		cg   *cgroup
		want int
	}{
		{"v1 with cpu", &cgroup{version: 1, m: &cgroups{}, dirs: map[string]string{"memory": "/m", "pids": "/p", "cpu": "/c"}}, 1},
		{"v1 without cpu", &cgroup{version: 1, m: &cgroups{}, dirs: map[string]string{"memory": "/m", "pids": "/p"}}, all},
		{"v2 with cpu", &cgroup{version: 2, m: &cgroups{ctrls: []string{"memory", "pids", "cpu"}}}, 1},
		{"v2 without cpu", &cgroup{version: 2, m: &cgroups{ctrls: []string{"memory", "pids"}}}, all},
	} {
		if got := tc.cg.cpuRate(); got != tc.want {
			t.Errorf("%s: rate %d, want %d", tc.name, got, tc.want)
		}
	}
}
