package linux

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/airlock-mcp/airlock/sandbox"
)

// A finished sandbox's v1 cgroups are kept for the next sandbox instead of removed and
// made again: a mkdir and an rmdir per controller are the dearest cgroup operations (a
// memory cgroup's allocation, its teardown behind an RCU grace period, and each dead
// one lingering as a zombie while its page cache is charged to it). A cgroup is reused
// only once nothing is left of its sandbox:
//   - no process in any of its controllers' dirs (its tasks files are empty; a process
//     outside cannot join: the tasks files are the host root's);
//   - its memory charge, when it is taken, is under reuseMaxCharge: what a run leaves
//     charged stays with the cgroup (page cache it read first; kernel memory of its
//     namespaces, freed lazily, ~0.5 MiB here), and a cgroup holding more is removed
//     instead. What it holds is the next run's base: its peak is reported above it;
//   - then every limit is set again, the CPU quota too (stop lifts it), the memory peak
//     is reset, and the counters that cannot be reset (OOM kills, pids.max hits) are
//     read as the base the next run's are counted from;
//   - it is renamed after the new run, so a cgroup still says whose it is.
// Cgroup v2 cgroups are not reused: memory.peak resets only per open file there.

// reuseMaxCharge is the most memory a cgroup may still have charged to be reused.
const reuseMaxCharge = 2 << 20

// reuseMax bounds the cgroups kept for reuse (the rest are removed).
const reuseMax = 32

// cgroupPool holds emptied cgroups ready for reuse.
type cgroupPool struct {
	mu   sync.Mutex
	free []*cgroup
}

func (p *cgroupPool) get() *cgroup {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) == 0 {
		return nil
	}
	c := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	return c
}

func (p *cgroupPool) put(c *cgroup) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) >= reuseMax {
		return false
	}
	p.free = append(p.free, c)
	return true
}

// drain empties the pool (Close removes the dirs themselves).
func (p *cgroupPool) drain() {
	p.mu.Lock()
	p.free = nil
	p.mu.Unlock()
}

// reuse takes an emptied cgroup, renames it after run id and sets it up for limits l,
// or returns nil when there is none (or it cannot be set up: it is removed then).
func (m *cgroups) reuse(id string, l sandbox.Limits) *cgroup {
	if m.version != 1 {
		return nil
	}
	for {
		c := m.reused.get()
		if c == nil {
			return nil
		}
		if err := c.renew(runName(id), l); err != nil {
			_ = c.destroy()
			continue
		}
		return c
	}
}

// renew renames an emptied v1 cgroup to name and sets its limits and counters for a new
// run.
func (c *cgroup) renew(name string, l sandbox.Limits) error {
	if !c.empty() {
		return errors.New("not empty")
	}
	for ctrl, d := range c.dirs {
		to := filepath.Join(filepath.Dir(d), name)
		if err := os.Rename(d, to); err != nil {
			return err
		}
		c.dirs[ctrl] = to
	}
	if err := c.setLimits(l); err != nil {
		return err
	}
	if d, ok := c.dirs["memory"]; ok {
		// Resets the peak to the current charge (under reuseMaxCharge).
		if err := writeCgroupFile(filepath.Join(d, "memory.max_usage_in_bytes"), "0"); err != nil {
			return err
		}
	}
	c.base = c.counters()
	c.base.PeakMemory = readInt(filepath.Join(c.dirs["memory"], "memory.usage_in_bytes"))
	return nil
}

// recycle keeps a finished sandbox's cgroup for reuse if no process of the sandbox is
// left in it (its memory charge is checked when it is taken: kernel memory is freed
// lazily), and removes it otherwise.
func (m *cgroups) recycle(c *cgroup) error {
	if m.version != 1 || !c.noTasks() || !m.reused.put(c) {
		return c.destroy()
	}
	return nil
}

// noTasks reports whether no process is left in any of the cgroup's dirs.
func (c *cgroup) noTasks() bool {
	for _, d := range c.dirs {
		b, err := readCgroupFile(filepath.Join(d, "tasks"))
		if err != nil || strings.TrimSpace(string(b)) != "" {
			return false
		}
	}
	return true
}

// empty reports whether the cgroup has no process and so little memory charged that it
// can be handed on.
func (c *cgroup) empty() bool {
	if !c.noTasks() {
		return false
	}
	if d, ok := c.dirs["memory"]; ok {
		return readInt(filepath.Join(d, "memory.usage_in_bytes")) < reuseMaxCharge
	}
	return true
}

// counters are the cumulative counts a reused cgroup starts from.
func (c *cgroup) counters() cgroupStats {
	return cgroupStats{
		OOMKills:   readKey(filepath.Join(c.dirs["memory"], "memory.oom_control"), "oom_kill"),
		PidsMaxHit: readKey(filepath.Join(c.dirs["pids"], "pids.events"), "max"),
	}
}

// setLimits sets a v1 cgroup's limits: memory without swap, pids (the init's threads
// count too), and a quota of one CPU.
func (c *cgroup) setLimits(l sandbox.Limits) error {
	pids := fmt.Sprint(max(l.Pids, 1) + initProcs)
	mem := fmt.Sprint(l.Memory)
	sets := []struct{ ctrl, file, val string }{
		{"memory", "memory.limit_in_bytes", mem},
		{"memory", "memory.memsw.limit_in_bytes", mem}, // absent without swap accounting
		{"memory", "memory.swappiness", "0"},
		{"pids", "pids.max", pids},
		{"cpu", "cpu.cfs_period_us", "100000"},
		{"cpu", "cpu.cfs_quota_us", "100000"},
	}
	if d, ok := c.dirs["memory"]; ok && readInt(filepath.Join(d, "memory.limit_in_bytes")) < l.Memory {
		// memory.limit_in_bytes must stay ≤ memsw.limit_in_bytes: raise memsw first.
		sets[0], sets[1] = sets[1], sets[0]
	}
	for _, s := range sets {
		d, ok := c.dirs[s.ctrl]
		if !ok {
			continue
		}
		err := writeCgroupFile(filepath.Join(d, s.file), s.val)
		if err != nil && !(s.file == "memory.memsw.limit_in_bytes" && errors.Is(err, os.ErrNotExist)) {
			return fmt.Errorf("set %s=%s: %w", s.file, s.val, err)
		}
	}
	return nil
}
