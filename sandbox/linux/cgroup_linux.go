package linux

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/sandbox"
)

// cgroupDir is the directory airlock creates under its own cgroup for its sandboxes.
const cgroupDir = "airlock"

// v1Controllers are the cgroup v1 controllers airlock uses: memory and pids are the ones
// that matter, cpu adds the CPU quota. Not cpuacct: each v1 controller costs a join (an
// RCU grace period) on every run, and the init's rusage already counts the CPU of
// everything it reaped.
var v1Controllers = []string{"memory", "pids", "cpu"}

// cgroups creates one cgroup per sandbox. Exactly one of v1/v2 is set when enabled.
type cgroups struct {
	version int               // 0: none, 1: v1 controllers, 2: unified hierarchy
	v1      map[string]string // controller → our base dir
	v2      string            // our base dir in the unified hierarchy
	reason  string            // why cgroups are not used (version 0)
	ctrls   []string          // controllers in use, for the report
	created []string          // base dirs this process made, removed at Close if empty
}

// detectCgroups finds a hierarchy airlock may create cgroups in: a delegated cgroup v2
// subtree with the memory and pids controllers, or else the v1 controllers when
// running as root. It never fails; version 0 carries the reason.
func detectCgroups() *cgroups {
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return &cgroups{reason: "cannot read mountinfo: " + err.Error()}
	}
	own, err := ownCgroups()
	if err != nil {
		return &cgroups{reason: "cannot read /proc/self/cgroup: " + err.Error()}
	}
	dirs := ownCgroupDirs(parseCgroupMounts(string(info)), own)
	var why []string
	if dir, ok := dirs[""]; ok {
		if cg, err := setupV2(dir); err == nil {
			return cg
		} else {
			why = append(why, "cgroup v2: "+err.Error())
		}
	}
	if cg, err := setupV1(dirs); err == nil {
		return cg
	} else {
		why = append(why, "cgroup v1: "+err.Error())
	}
	return &cgroups{reason: strings.Join(why, "; ")}
}

// cgroupMount is one cgroup hierarchy's mount: where it is, and which cgroup of the
// hierarchy it shows there (the mount root: "/" on a host; in a container, its own
// cgroup, or the root of its cgroup namespace).
type cgroupMount struct{ point, root string }

// parseCgroupMounts maps each v1 controller of mountinfo to its mount, and "" to the
// cgroup2 mount.
func parseCgroupMounts(mountinfo string) map[string]cgroupMount {
	out := map[string]cgroupMount{}
	for _, line := range strings.Split(mountinfo, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f := strings.Fields(pre)
		g := strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		m := cgroupMount{point: f[4], root: f[3]}
		switch g[0] {
		case "cgroup2":
			out[""] = m
		case "cgroup":
			for _, opt := range strings.Split(g[2], ",") {
				out[opt] = m
			}
		}
	}
	return out
}

// ownCgroupDirs maps each mounted controller (and "" for v2) to the directory of the
// server's own cgroup. /proc/self/cgroup gives the path from the hierarchy's root, the
// mount shows the hierarchy from its root on: inside a container without a cgroup
// namespace (podman --privileged on v1) the path repeats the mount root, which must be
// cut off. A path outside the mount root is not reachable through it.
func ownCgroupDirs(mounts map[string]cgroupMount, own map[string]string) map[string]string {
	out := map[string]string{}
	for c, m := range mounts {
		p, ok := own[c]
		if !ok {
			continue
		}
		rel, err := filepath.Rel(m.root, p)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		out[c] = filepath.Join(m.point, rel)
	}
	return out
}

// ownCgroups maps each controller (and "" for v2) to the server's own cgroup path.
func ownCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, nil
}

// setupV1 creates airlock's base in each v1 controller's own cgroup dir.
func setupV1(dirs map[string]string) (*cgroups, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("v1 controllers need root (no delegation in v1)")
	}
	cg := &cgroups{version: 1, v1: map[string]string{}}
	for _, c := range v1Controllers {
		dir, ok := dirs[c]
		if !ok {
			if c == "memory" || c == "pids" {
				return nil, fmt.Errorf("controller %s not mounted", c)
			}
			continue
		}
		base := filepath.Join(dir, cgroupDir)
		made, err := usableBase(base)
		if err != nil {
			if c == "memory" || c == "pids" {
				return nil, err
			}
			continue
		}
		if made {
			cg.created = append(cg.created, base)
		}
		cg.v1[c] = base
		cg.ctrls = append(cg.ctrls, c)
	}
	return cg, nil
}

// usableBase creates airlock's base cgroup dir, or accepts one left by an earlier server
// only if this one may create cgroups in it: a root of a user namespace whose host uid is
// not the dir's owner (unshare -r, rootless podman) finds it but cannot.
// made says this process created it.
func usableBase(base string) (made bool, err error) {
	if err := os.Mkdir(base, 0o755); err == nil {
		return true, nil
	} else if !errors.Is(err, os.ErrExist) {
		return false, fmt.Errorf("create %s: %w", base, err)
	}
	trial := filepath.Join(base, fmt.Sprintf("%d-probe", os.Getpid()))
	if err := os.Mkdir(trial, 0o755); err != nil {
		return false, fmt.Errorf("create a cgroup in %s: %w", base, err)
	}
	return false, os.Remove(trial)
}

func setupV2(dir string) (*cgroups, error) {
	avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	have := strings.Fields(string(avail))
	if !contains(have, "memory") || !contains(have, "pids") {
		return nil, fmt.Errorf("memory and pids controllers not delegated to %s (have %q)", dir, have)
	}
	base := filepath.Join(dir, cgroupDir)
	made, err := usableBase(base)
	if err != nil {
		return nil, err
	}
	want := []string{"memory", "pids"}
	if contains(have, "cpu") {
		want = append(want, "cpu")
	}
	// "No internal processes": controllers can be enabled for children only in a cgroup
	// without processes of its own. airlock's base is new and empty, so enable them there
	// after enabling them one level up, which may need moving the server into a leaf.
	if err := enableV2(dir, want); err != nil {
		leaf := filepath.Join(dir, "airlock-server")
		if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("create %s: %w", leaf, err)
		}
		if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			return nil, fmt.Errorf("move server to %s: %w", leaf, err)
		}
		if err := enableV2(dir, want); err != nil {
			return nil, err
		}
	}
	if err := enableV2(base, want); err != nil {
		return nil, err
	}
	cg := &cgroups{version: 2, v2: base, ctrls: want}
	if made {
		cg.created = []string{base}
	}
	return cg, nil
}

func enableV2(dir string, ctrls []string) error {
	var b strings.Builder
	for _, c := range ctrls {
		b.WriteString("+" + c + " ")
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(b.String()), 0); err != nil {
		return fmt.Errorf("enable %v in %s: %w", ctrls, dir, err)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// limitsMemory reports whether the sandboxes' cgroups limit memory; without, the program
// gets RLIMIT_AS instead.
func (m *cgroups) limitsMemory() bool {
	return m.version == 2 || (m.version == 1 && m.v1["memory"] != "")
}

// runName names a sandbox's cgroup after the server's pid, so a later server can tell
// which leftovers belong to a dead one.
func runName(id string) string { return fmt.Sprintf("%d-%s", os.Getpid(), id) }

// cgroup is one sandbox's cgroup.
type cgroup struct {
	version int
	dirs    map[string]string // v1: controller → dir
	dir     string            // v2
	fd      int               // v2: open dir for CLONE_INTO_CGROUP, -1 otherwise
}

// create makes the cgroup for one run and sets its limits. Memory has no swap, pids
// count the init's threads too, and the CPU quota is one CPU.
func (m *cgroups) create(id string, l sandbox.Limits) (*cgroup, error) {
	name := runName(id)
	pids := strconv.Itoa(max(l.Pids, 1) + initProcs)
	mem := strconv.FormatInt(l.Memory, 10)
	cg := &cgroup{version: m.version, fd: -1}
	switch m.version {
	case 1:
		cg.dirs = map[string]string{}
		for c, base := range m.v1 {
			d := filepath.Join(base, name)
			if err := m.makeIn(base, d); err != nil {
				_ = cg.destroy()
				return nil, fmt.Errorf("create cgroup %s: %w", d, err)
			}
			cg.dirs[c] = d
		}
		sets := []struct{ ctrl, file, val string }{
			{"memory", "memory.limit_in_bytes", mem},
			{"memory", "memory.memsw.limit_in_bytes", mem}, // absent without swap accounting
			{"memory", "memory.swappiness", "0"},
			{"pids", "pids.max", pids},
			{"cpu", "cpu.cfs_period_us", "100000"},
			{"cpu", "cpu.cfs_quota_us", "100000"},
		}
		for _, s := range sets {
			d, ok := cg.dirs[s.ctrl]
			if !ok {
				continue
			}
			err := os.WriteFile(filepath.Join(d, s.file), []byte(s.val), 0)
			if err != nil && !(s.file == "memory.memsw.limit_in_bytes" && errors.Is(err, os.ErrNotExist)) {
				_ = cg.destroy()
				return nil, fmt.Errorf("set %s=%s: %w", s.file, s.val, err)
			}
		}
	case 2:
		cg.dir = filepath.Join(m.v2, name)
		if err := m.makeIn(m.v2, cg.dir); err != nil {
			return nil, fmt.Errorf("create cgroup %s: %w", cg.dir, err)
		}
		// memory.max and pids.max exist wherever their controllers are enabled, which
		// setupV2 checked: one missing is a base made again without them (makeIn), never
		// a sandbox without limits. The others depend on swap accounting and cpu.
		sets := []struct {
			file, val string
			required  bool
		}{
			{"memory.max", mem, true},
			{"memory.swap.max", "0", false},
			{"memory.oom.group", "1", false},
			{"pids.max", pids, true},
			{"cpu.max", "100000 100000", false},
		}
		for _, s := range sets {
			err := os.WriteFile(filepath.Join(cg.dir, s.file), []byte(s.val), 0)
			if err != nil && (s.required || !errors.Is(err, os.ErrNotExist)) {
				_ = cg.destroy()
				return nil, fmt.Errorf("set %s=%s: %w", s.file, s.val, err)
			}
		}
		fd, err := unix.Open(cg.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			_ = cg.destroy()
			return nil, fmt.Errorf("open cgroup %s: %w", cg.dir, err)
		}
		cg.fd = fd
	}
	return cg, nil
}

// tasksFiles are the v1 tasks files the spawner moves itself into, so the init is born
// in the cgroup. A v2 sandbox's spawner is cloned straight into its cgroup; without
// cgroups there are none.
func (c *cgroup) tasksFiles() []string {
	if c == nil || c.version != 1 {
		return nil
	}
	var files []string
	for _, d := range c.dirs {
		files = append(files, filepath.Join(d, "tasks"))
	}
	return files
}

// unthrottle lifts the CPU quota so a tree that is being killed can exit at once.
func (c *cgroup) unthrottle() {
	switch c.version {
	case 1:
		if d, ok := c.dirs["cpu"]; ok {
			_ = os.WriteFile(filepath.Join(d, "cpu.cfs_quota_us"), []byte("-1"), 0)
		}
	case 2:
		_ = os.WriteFile(filepath.Join(c.dir, "cpu.max"), []byte("max"), 0)
	}
}

type cgroupStats struct {
	PeakMemory int64
	OOMKills   int64
	CPU        time.Duration
	PidsMaxHit int64
}

func (c *cgroup) stats() cgroupStats {
	var s cgroupStats
	switch c.version {
	case 1:
		s.PeakMemory = readInt(filepath.Join(c.dirs["memory"], "memory.max_usage_in_bytes"))
		s.OOMKills = readKey(filepath.Join(c.dirs["memory"], "memory.oom_control"), "oom_kill")
		s.PidsMaxHit = readKey(filepath.Join(c.dirs["pids"], "pids.events"), "max")
	case 2:
		s.PeakMemory = readInt(filepath.Join(c.dir, "memory.peak"))
		s.OOMKills = readKey(filepath.Join(c.dir, "memory.events"), "oom_kill")
		s.CPU = c.cpu()
		s.PidsMaxHit = readKey(filepath.Join(c.dir, "pids.events"), "max")
	}
	return s
}

// cpu is the CPU time every process of the cgroup has used so far (v2 only; 0 on v1,
// where the init's rusage is used instead).
func (c *cgroup) cpu() time.Duration {
	if c.version != 2 {
		return 0
	}
	return time.Duration(readKey(filepath.Join(c.dir, "cpu.stat"), "usage_usec")) * time.Microsecond
}

// destroy removes the cgroup. Every process in it is dead by then (the pid namespace
// died with its init), but the kernel frees them asynchronously, so rmdir may need a
// few tries.
func (c *cgroup) destroy() error {
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
	var dirs []string
	for _, d := range c.dirs {
		dirs = append(dirs, d)
	}
	if c.dir != "" {
		_ = os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0)
		dirs = append(dirs, c.dir)
	}
	var last error
	for _, d := range dirs {
		last = nil
		for i := 0; i < 200; i++ {
			err := unix.Rmdir(d)
			if err == nil || err == unix.ENOENT {
				last = nil
				break
			}
			last = err
			time.Sleep(time.Millisecond)
		}
		if last != nil {
			return fmt.Errorf("remove cgroup %s: %w", d, last)
		}
	}
	return nil
}

// cleanStale removes the cgroups of servers that are no longer running, killing anything
// left inside. It returns the directories it removed.
func (m *cgroups) cleanStale(log *slog.Logger) []string {
	var bases []string
	switch m.version {
	case 1:
		for _, b := range m.v1 {
			bases = append(bases, b)
		}
	case 2:
		bases = append(bases, m.v2)
	}
	var removed []string
	for _, base := range bases {
		entries, err := os.ReadDir(base)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			pidStr, _, ok := strings.Cut(e.Name(), "-")
			pid, err := strconv.Atoi(pidStr)
			if !ok || err != nil || pid == os.Getpid() || processAlive(pid) {
				continue
			}
			d := filepath.Join(base, e.Name())
			killCgroup(d)
			cg := &cgroup{fd: -1}
			if m.version == 2 {
				cg.dir = d
			} else {
				cg.dirs = map[string]string{"x": d}
			}
			if err := cg.destroy(); err != nil {
				log.Warn("stale cgroup not removed", "component", "sandbox", "dir", d, "err", err)
				continue
			}
			removed = append(removed, d)
		}
	}
	return removed
}

func killCgroup(d string) {
	if os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0) == nil {
		return
	}
	b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			unix.Kill(pid, unix.SIGKILL)
		}
	}
}

func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	// A recycled pid belongs to some other program; only an airlock server counts.
	return bytes.Contains(b, []byte("airlock")) || bytes.Contains(b, []byte(".test"))
}

func readInt(p string) int64 {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

func readKey(p, key string) int64 {
	f, err := os.Open(p)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// lower sets the memory and pids limits of a prepared sandbox's cgroup to a call's,
// which are never higher than the ones it was created with.
func (c *cgroup) lower(l sandbox.Limits) error {
	pids := strconv.Itoa(max(l.Pids, 1) + initProcs)
	mem := strconv.FormatInt(l.Memory, 10)
	var sets [][2]string
	switch c.version {
	case 1:
		// memory.limit_in_bytes must stay ≤ memsw.limit_in_bytes: lower it first.
		sets = [][2]string{
			{filepath.Join(c.dirs["memory"], "memory.limit_in_bytes"), mem},
			{filepath.Join(c.dirs["memory"], "memory.memsw.limit_in_bytes"), mem},
			{filepath.Join(c.dirs["pids"], "pids.max"), pids},
		}
	case 2:
		sets = [][2]string{
			{filepath.Join(c.dir, "memory.max"), mem},
			{filepath.Join(c.dir, "pids.max"), pids},
		}
	}
	for _, s := range sets {
		if err := os.WriteFile(s[0], []byte(s[1]), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("set %s=%s: %w", s[0], s[1], err)
		}
	}
	return nil
}

// usage is the memory charged to all of airlock's sandbox cgroups now.
func (m *cgroups) usage() int64 {
	switch m.version {
	case 1:
		return readInt(filepath.Join(m.v1["memory"], "memory.usage_in_bytes"))
	case 2:
		return readInt(filepath.Join(m.v2, "memory.current"))
	}
	return 0
}
