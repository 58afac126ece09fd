package linux

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/airlock-mcp/airlock/internal/sandboxtest"
	"github.com/airlock-mcp/airlock/sandbox"
)

// A run's cgroup is made, limited and removed relative to a descriptor of the own dir
// (cgroupfd_linux.go). An own dir removed from outside (a host's cleanup of empty
// cgroups) and made again under the same path is a new dir: the descriptor held named
// the old one, and a cgroup made through it would fail for good. After such a removal,
// and after Close and a reuse, each new cgroup must be in the own dir as it is now, at
// its path, with the limits asked for there, reached through a descriptor of that dir,
// and gone from there once destroyed.
func TestCgroupsFollowARemadeOwnDir(t *testing.T) {
	s, err := New(sandbox.Options{Isolation: testTier()})
	sandboxtest.Require(t, err)
	defer s.Close()
	if s.cg.version == 0 {
		t.Skipf("SKIPPING: no cgroups here (%s)", s.cg.reason)
	}
	m := s.cg
	lim := withDefaults(sandbox.Spec{}).Limits
	lim.Memory = 80 << 20
	lim.Pids = 11

	check := func(when string) {
		t.Helper()
		cg, err := m.create("fd-"+randHex(4), lim)
		if err != nil {
			t.Fatalf("%s: create: %v", when, err)
		}
		for ctrl, own := range m.own() {
			d := cg.dirs[ctrl]
			if m.version == 2 {
				d = cg.dir
			}
			if filepath.Dir(d) != own {
				t.Fatalf("%s: cgroup %s is not in the own dir %s", when, d, own)
			}
			if _, err := os.Stat(d); err != nil {
				t.Fatalf("%s: cgroup %s is not at its path: %v", when, d, err)
			}
		}
		memFile, pidsFile := filepath.Join(cg.dirs["memory"], "memory.limit_in_bytes"), filepath.Join(cg.dirs["pids"], "pids.max")
		if m.version == 2 {
			memFile, pidsFile = filepath.Join(cg.dir, "memory.max"), filepath.Join(cg.dir, "pids.max")
		}
		wantMem, wantPids := limitValues(lim)
		for file, want := range map[string]string{memFile: wantMem, pidsFile: wantPids} {
			b, err := os.ReadFile(file)
			if err != nil || strings.TrimSpace(string(b)) != want {
				t.Fatalf("%s: %s reads %q (%v), want %s", when, file, b, err, want)
			}
		}
		// And it was reached through a descriptor of that own dir, not by path.
		m.fds.mu.RLock()
		for ctrl, own := range m.own() {
			fd, ok := m.fds.fd[ctrl]
			link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
			if !ok || err != nil || link != own {
				t.Errorf("%s: controller %q: own dir descriptor %d (held: %v) is %q (%v), want %s", when, ctrl, fd, ok, link, err, own)
			}
		}
		m.fds.mu.RUnlock()
		if err := cg.destroy(); err != nil {
			t.Fatalf("%s: destroy: %v", when, err)
		}
		gone := []string{cg.dir}
		for _, d := range cg.dirs {
			gone = append(gone, d)
		}
		for _, d := range gone {
			if d == "" {
				continue
			}
			if _, err := os.Stat(d); !os.IsNotExist(err) {
				t.Fatalf("%s: cgroup %s still there after destroy (%v)", when, d, err)
			}
		}
	}

	check("as made")
	// A host's cleanup: every empty cgroup of the own dirs (the spares; the self-check's
	// may still be on its way out), then the own dirs themselves; once the self-check's
	// release and the refill it asked for are done, so no spare is made meanwhile.
	s.Wait()
	m.spares.wg.Wait()
	for _, own := range m.own() {
		entries, _ := os.ReadDir(own)
		for _, e := range entries {
			if e.IsDir() {
				if err := removeCgroupDir(filepath.Join(own, e.Name())); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := removeCgroupDir(own); err != nil {
			t.Fatal(err)
		}
	}
	check("after the own dirs were removed from outside")
	check("once more")
	m.removeAll()
	check("after Close")
}
