package linux

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/internal/sysfile"
	"github.com/airlock-mcp/airlock/sandbox"
)

// cgroupDir is the directory airlock creates under its own cgroup. Each Sandbox (each
// server) makes a directory of its own in it, named by instanceName, and its sandboxes'
// cgroups go there: a server's limits, counters and usage are its own, and it removes
// its directory when it closes.
const cgroupDir = "airlock"

// instances numbers the Sandboxes of this process (tests start several).
var instances atomic.Int64

// instanceName names a Sandbox's own cgroup directory: its server (ownerName: the pid
// first, then what proves it alive or gone), so that a later server can tell a dead
// server's leftovers (cleanStale), then a '.' and a number.
func instanceName() string { return fmt.Sprintf("%s.%d", ownerName(), instances.Add(1)) }

// v1Controllers are the cgroup v1 controllers airlock uses: memory and pids are the ones
// that matter, cpu adds the CPU quota, cpuacct counts the run's CPU time. The count is
// worth its join on every run: no rusage holds the time of a child reaped unwaited-for
// (its parent ignores SIGCHLD), so without it the reported CPU missed such children and
// the CPU-time limit held per process only (TestCPULimitUnwaitedChildren: 15 s of CPU
// reported as 0 s). Where cpu and cpuacct share a hierarchy ("cpu,cpuacct") the cpu
// dir has the count and nothing more is joined.
var v1Controllers = []string{"memory", "pids", "cpu", "cpuacct"}

// cgroups creates one cgroup per sandbox. Exactly one of v1/v2 is set when enabled.
type cgroups struct {
	version int               // 0: none, 1: v1 controllers, 2: unified hierarchy
	v1      map[string]string // controller → this Sandbox's own dir
	v2      string            // this Sandbox's own dir in the unified hierarchy
	shared  []string          // the airlock dirs the own dirs are in, one per hierarchy
	created []string          // the shared dirs this process made, removed at Close if empty
	// removed: Close removed the own dirs; a Sandbox stays usable after Close (the
	// pool's), so the next create makes them again.
	ownMu   sync.Mutex
	removed bool
	reason  string // why cgroups are not used (version 0)
	// acct is the v1 controller whose dirs have cpuacct.usage ("cpuacct", or "cpu"
	// where the two are mounted together); "" where no v1 cgroup counts CPU time.
	acct   string
	ctrls  []string // controllers in use, for the report
	spares spares
	// fds are the own dirs' descriptors, which a run's cgroup files are reached
	// relative to (cgroupfd_linux.go).
	fds ownFDs
}

// detectCgroups finds a hierarchy airlock may create cgroups in: a delegated cgroup v2
// subtree with the memory and pids controllers, or else the v1 controllers when
// running as root. It never fails; version 0 carries the reason.
func detectCgroups() *cgroups {
	info, err := sysfile.Read("/proc/self/mountinfo")
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
	b, err := sysfile.Read("/proc/self/cgroup")
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
	name := instanceName()
	for _, c := range v1Controllers {
		dir, ok := dirs[c]
		if c == "cpuacct" && ok && dir == dirs["cpu"] {
			if _, ok := cg.v1["cpu"]; ok {
				cg.acct = "cpu"
			}
			continue
		}
		if !ok {
			if c == "memory" || c == "pids" {
				return nil, fmt.Errorf("controller %s not mounted", c)
			}
			continue
		}
		base := filepath.Join(dir, cgroupDir)
		own, made, err := ownDir(base, name, nil)
		if made {
			cg.created = append(cg.created, base)
		}
		if err == nil {
			cg.v1[c] = own // from here on removed with the others if this fails
			err = cg.ownSettings(c, own)
		}
		if err != nil {
			if c == "memory" || c == "pids" {
				_ = cg.removeAll()
				return nil, err
			}
			if _, ok := cg.v1[c]; ok {
				_ = removeCgroupDir(own)
				delete(cg.v1, c)
			}
			continue
		}
		cg.setOwnFD(c, own)
		cg.shared = append(cg.shared, base)
		cg.ctrls = append(cg.ctrls, c)
		if c == "cpuacct" {
			cg.acct = c
		}
	}
	return cg, nil
}

// ownDir creates airlock's base cgroup dir (or accepts one left by an earlier server)
// and this Sandbox's own dir in it; on v2 it enables v2ctrls in the base. A root of a
// user namespace whose host uid is not the base's owner (unshare -r, rootless podman)
// finds the base but cannot create in it. made says this process created the base. A
// base another airlock process removed, empty, in between (removeBases) is made again.
func ownDir(base, name string, v2ctrls []string) (own string, made bool, err error) {
	own = filepath.Join(base, name)
	for try := 1; ; try++ {
		switch err := os.Mkdir(base, 0o755); {
		case err == nil:
			made = true
		case !errors.Is(err, os.ErrExist):
			return "", made, fmt.Errorf("create %s: %w", base, err)
		}
		if v2ctrls != nil {
			// Without its controllers a cgroup made in it has no memory.max or pids.max
			// (create refuses such a cgroup: fail closed, never a sandbox without limits).
			if err := enableV2(base, v2ctrls); err != nil && (!errors.Is(err, os.ErrNotExist) || try == baseTries) {
				return "", made, err
			}
		}
		err := os.Mkdir(own, 0o755)
		if err == nil {
			return own, made, nil
		}
		if !errors.Is(err, os.ErrNotExist) || try == baseTries {
			return "", made, fmt.Errorf("create a cgroup in %s: %w", base, err)
		}
	}
}

// removeOwn removes this Sandbox's own dirs (Close, or a failed New). Every sandbox's
// cgroup in them is gone by then, unless its removal failed (logged then): those go
// first.
func (m *cgroups) removeOwn() error {
	m.dropSpares()
	m.ownMu.Lock()
	defer m.ownMu.Unlock()
	m.removed = true
	var errs []error
	for _, d := range m.ownDirs() {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.IsDir() {
				errs = append(errs, removeCgroupDir(filepath.Join(d, e.Name())))
			}
		}
		errs = append(errs, removeCgroupDir(d))
	}
	m.closeOwnFDs()
	return errors.Join(errs...)
}

// ensureOwn makes the own dirs again after Close removed them. A dir that vanished
// otherwise (a host's cleanup) is not made again: runs fail, naming the cgroup.
func (m *cgroups) ensureOwn() error {
	m.ownMu.Lock()
	defer m.ownMu.Unlock()
	if !m.removed {
		return nil
	}
	for ctrl, d := range m.own() {
		base := filepath.Dir(d)
		_, made, err := ownDir(base, filepath.Base(d), m.v2ctrls())
		if made && !slices.Contains(m.created, base) {
			m.created = append(m.created, base)
		}
		if err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create cgroup %s: %w", d, err)
		}
		if err := m.ownSettings(ctrl, d); err != nil {
			return err
		}
		m.setOwnFD(ctrl, d)
	}
	m.removed = false
	m.spares.reopen()
	return nil
}

// mkRun makes a run's cgroup dir in own, this Sandbox's dir for controller ctrl ("" on
// v2), making own (and its base) again if it vanished: a host's cleanup, or the base
// removed, empty, by another airlock process's exit in between. Own is set up again
// (ownSettings): without it a run's cgroup made in it would lack limits it inherits.
func (m *cgroups) mkRun(ctrl, own, dir string) error {
	err := m.mkdirCg(dir)
	if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	m.ownMu.Lock()
	base := filepath.Dir(own)
	_, made, err := ownDir(base, filepath.Base(own), m.v2ctrls())
	if made && !slices.Contains(m.created, base) {
		m.created = append(m.created, base)
	}
	m.ownMu.Unlock()
	if err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := m.ownSettings(ctrl, own); err != nil {
		return err
	}
	m.setOwnFD(ctrl, own) // the descriptor held was of the dir that vanished
	return m.mkdirCg(dir)
}

// ownSettings sets up a Sandbox's own dir for controller ctrl ("" on v2) with what every
// run's cgroup made in it takes from it when the kernel creates it, so create does not
// write it per run. On v2 that is the controllers, enabled for its children: without
// them a cgroup made in it has no memory.max or pids.max, which create refuses (fail
// closed). On v1 it is the memory controller's swappiness of 0, which a new memory
// cgroup copies from its parent (mem_cgroup_css_alloc): a file opened and written per
// run less.
func (m *cgroups) ownSettings(ctrl, own string) error {
	switch {
	case m.version == 2:
		return enableV2(own, m.ctrls)
	case ctrl == "memory":
		if err := writeCgroupFile(filepath.Join(own, "memory.swappiness"), "0"); err != nil {
			return fmt.Errorf("set memory.swappiness=0 in %s: %w", own, err)
		}
	}
	return nil
}

// v2ctrls are the controllers an own dir's base enables on v2; nil on v1.
func (m *cgroups) v2ctrls() []string {
	if m.version == 2 {
		return m.ctrls
	}
	return nil
}

// own maps each controller to this Sandbox's own dir ("" to the v2 one).
func (m *cgroups) own() map[string]string {
	if m.version == 2 {
		return map[string]string{"": m.v2}
	}
	return m.v1
}

func (m *cgroups) ownDirs() []string {
	var dirs []string
	for _, d := range m.v1 {
		dirs = append(dirs, d)
	}
	if m.v2 != "" {
		dirs = append(dirs, m.v2)
	}
	return dirs
}

func setupV2(dir string) (*cgroups, error) {
	avail, err := sysfile.Read(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	have := strings.Fields(string(avail))
	if !contains(have, "memory") || !contains(have, "pids") {
		return nil, fmt.Errorf("memory and pids controllers not delegated to %s (have %q)", dir, have)
	}
	base := filepath.Join(dir, cgroupDir)
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
	own, made, err := ownDir(base, instanceName(), want)
	cg := &cgroups{version: 2, v2: own, shared: []string{base}, ctrls: want}
	if made {
		cg.created = []string{base}
	}
	if err != nil {
		_ = cg.removeAll()
		return nil, err
	}
	if err := enableV2(own, want); err != nil {
		_ = cg.removeAll()
		return nil, err
	}
	cg.setOwnFD("", own)
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
	m       *cgroups // whose own dirs it is in: its files are reached relative to them
	version int
	dirs    map[string]string // v1: controller → dir
	dir     string            // v2
	fd      int               // v2: open dir for CLONE_INTO_CGROUP, -1 otherwise
	// mem and pids are the memory and pids limits as written (limitValues), so lower
	// writes only what a call changes.
	mem, pids string
	// counters are the counter files stats reads, opened ahead (openCounters) by a
	// sandbox prepared for the pool; nil, or -1 for one, where they are read by path.
	// countersMu keeps a read off a descriptor that destroy is closing (a session's
	// watcher reads the CPU counter while its sandbox may be released): a closed
	// number can be reused by any open.
	countersMu sync.Mutex
	counters   []int
}

// The counters a run's result reads (counterFile names them per version).
const (
	cntPeak = iota
	cntOOM
	cntPids
	cntCPU
	numCounters
)

// counterFile is the path of counter i, or "" where this version has none.
func (c *cgroup) counterFile(i int) string {
	switch c.version {
	case 1:
		switch i {
		case cntPeak:
			return filepath.Join(c.dirs["memory"], "memory.max_usage_in_bytes")
		case cntOOM:
			return filepath.Join(c.dirs["memory"], "memory.oom_control")
		case cntPids:
			return filepath.Join(c.dirs["pids"], "pids.events")
		case cntCPU:
			if d, ok := c.dirs[c.m.acct]; ok {
				return filepath.Join(d, "cpuacct.usage")
			}
		}
	case 2:
		switch i {
		case cntPeak:
			return filepath.Join(c.dir, "memory.peak")
		case cntOOM:
			return filepath.Join(c.dir, "memory.events")
		case cntPids:
			return filepath.Join(c.dir, "pids.events")
		case cntCPU:
			return filepath.Join(c.dir, "cpu.stat")
		}
	}
	return ""
}

// openCounters opens the counter files ahead of the result, for a sandbox that waits in
// the pool or a program that has started: its result then reads each with one pread
// instead of a path walk through cgroupfs, an open and a close (three to four files,
// ~50 µs between the program's exit and the answer here). A file that cannot be opened is
// read by path as before. A kernfs counter read from offset 0 is generated afresh, so an
// early open reads the values at the end. Opened once: a second call does nothing.
func (c *cgroup) openCounters() {
	c.countersMu.Lock()
	defer c.countersMu.Unlock()
	if c.counters != nil {
		return
	}
	c.counters = make([]int, numCounters)
	for i := range c.counters {
		c.counters[i] = -1
		if p := c.counterFile(i); p != "" {
			if fd, err := c.m.openCg(p, unix.O_RDONLY); err == nil {
				c.counters[i] = fd
			}
		}
	}
}

// closeCounters closes what openCounters opened.
func (c *cgroup) closeCounters() {
	c.countersMu.Lock()
	defer c.countersMu.Unlock()
	for _, fd := range c.counters {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	c.counters = nil
}

// counter reads counter i into buf: through its open file, or by path.
func (c *cgroup) counter(i int, buf []byte) ([]byte, error) {
	c.countersMu.Lock()
	if c.counters != nil && c.counters[i] >= 0 {
		defer c.countersMu.Unlock()
		return preadAll(c.counters[i], buf)
	}
	c.countersMu.Unlock()
	return readCgroupFile(c.counterFile(i), buf)
}

// counterInt is readInt for counter i; counterKey is readKey for it.
func (c *cgroup) counterInt(i int) int64 {
	bp := cgroupBufs.Get().(*[]byte)
	defer cgroupBufs.Put(bp)
	b, err := c.counter(i, *bp)
	if err != nil {
		return 0
	}
	return parseInt(b)
}

func (c *cgroup) counterKey(i int, key string) int64 {
	bp := cgroupBufs.Get().(*[]byte)
	defer cgroupBufs.Put(bp)
	b, err := c.counter(i, *bp)
	if err != nil {
		return 0
	}
	return parseKey(b, key)
}

// limitValues are a run's memory and pids limits as the cgroup files take them. Pids
// count the init's threads too.
func limitValues(l sandbox.Limits) (mem, pids string) {
	return strconv.FormatInt(l.Memory, 10), strconv.Itoa(max(l.Pids, 1) + initProcs)
}

// create gives one run its cgroup, with its limits set: a spare made ahead of the call
// if one is ready (spares_linux.go), else one made now. Memory has no swap, pids count
// the init's threads too, and the CPU quota is one CPU.
func (m *cgroups) create(id string, l sandbox.Limits) (*cgroup, error) {
	cg, err := m.spare(l)
	if cg != nil || err != nil {
		return cg, err
	}
	if cg, err = m.make(runName(id)); err != nil {
		return nil, err
	}
	if err := cg.limit(l); err != nil {
		_ = cg.destroy()
		return nil, err
	}
	return cg, nil
}

// spare gives one run a spare cgroup with its limits set; nil, and no error, when none
// is ready. A spare removed from outside meanwhile (a host's cleanup of empty cgroups)
// is dropped for the next.
func (m *cgroups) spare(l sandbox.Limits) (*cgroup, error) {
	for {
		cg, err := m.takeSpare()
		if cg == nil || err != nil {
			return nil, err
		}
		err = cg.limit(l)
		if err == nil {
			return cg, nil
		}
		_ = cg.destroy()
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
}

// takeSpare hands out a spare as it was made, without a call's limits (limit sets them
// before anything runs in it); nil, and no error, when none is ready.
func (m *cgroups) takeSpare() (*cgroup, error) {
	if err := m.ensureOwn(); err != nil {
		return nil, err
	}
	return m.spares.take(), nil
}

// make makes a cgroup named name and sets what every run's cgroup has alike: the CPU
// quota, and on v2 no swap and the whole cgroup killed at an OOM. It has no memory or
// pids limit yet: limit sets the call's, before anything runs in it.
func (m *cgroups) make(name string) (*cgroup, error) {
	cg := &cgroup{m: m, version: m.version, fd: -1}
	switch m.version {
	case 1:
		cg.dirs = map[string]string{}
		for c, base := range m.v1 {
			d := filepath.Join(base, name)
			if err := m.mkRun(c, base, d); err != nil {
				_ = cg.destroy()
				return nil, fmt.Errorf("create cgroup %s: %w", d, err)
			}
			cg.dirs[c] = d
		}
		// Not written here: memory.swappiness, 0, copied from the own dir
		// (ownSettings), and cpu.cfs_period_us, 100000, the kernel's default period,
		// which every new v1 cpu cgroup starts with (it is not inherited) and nothing
		// here changes. TestRunCgroupLimits reads all of them back from a running
		// sandbox's cgroup.
		if d, ok := cg.dirs["cpu"]; ok {
			if err := m.writeCg(filepath.Join(d, "cpu.cfs_quota_us"), "100000"); err != nil {
				_ = cg.destroy()
				return nil, fmt.Errorf("set cpu.cfs_quota_us=100000: %w", err)
			}
		}
	case 2:
		cg.dir = filepath.Join(m.v2, name)
		if err := m.mkRun("", m.v2, cg.dir); err != nil {
			return nil, fmt.Errorf("create cgroup %s: %w", cg.dir, err)
		}
		// These depend on swap accounting and the cpu controller: absent is fine.
		sets := [][2]string{{"memory.swap.max", "0"}, {"memory.oom.group", "1"}, {"cpu.max", "100000 100000"}}
		for _, s := range sets {
			if err := m.writeCg(filepath.Join(cg.dir, s[0]), s[1]); err != nil && !errors.Is(err, os.ErrNotExist) {
				_ = cg.destroy()
				return nil, fmt.Errorf("set %s=%s: %w", s[0], s[1], err)
			}
		}
		fd, err := m.openCg(cg.dir, unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			_ = cg.destroy()
			return nil, fmt.Errorf("open cgroup %s: %w", cg.dir, err)
		}
		cg.fd = fd
	}
	return cg, nil
}

// limit sets a cgroup's memory and pids limits to a call's: all of them on a cgroup
// make just made (it leaves them unset), only the ones a call changes on a prepared
// sandbox's (pool, session), whose limits are never lower than a call's: most calls
// change none, and each write is a cgroup file's open, write and close on the way to the
// program's start. On v2, memory.max and pids.max exist wherever their controllers are
// enabled, which setupV2 checked: one missing is an own dir made again without them,
// never a sandbox without limits. On v1 the memory+swap limit is absent without swap
// accounting, and memory.limit_in_bytes must stay ≤ it: it is written first.
//
// v1 charges no socket buffer to memory.limit_in_bytes: only a cgroup whose
// memory.kmem.tcp.limit_in_bytes was written counts its sockets' buffers (TCP and UDP
// both), in a counter of their own. Without it a run of network "allowlist" with a
// memory limit of 256 MiB queued 2 GiB between sockets on its loopback (128 connections,
// SO_SNDBUF and SO_RCVBUF at net.core.*mem_max), near the host's net.ipv4.tcp_mem hard
// limit, which is one for the whole host: at it every TCP socket of the host, the
// server's and other runs' included, fails to grow its buffers
// (TestSocketBuffersWithinMemoryLimit). So a run's buffers get the memory limit again, on
// top of it. v2 charges them to memory.max. Absent (a kernel without v1 kmem accounting)
// is left as it is, as memsw is.
func (c *cgroup) limit(l sandbox.Limits) error {
	mem, pids := limitValues(l)
	type set struct {
		file, val string
		required  bool
	}
	var sets []set
	switch c.version {
	case 1:
		if mem != c.mem {
			d := c.dirs["memory"]
			sets = append(sets, set{filepath.Join(d, "memory.limit_in_bytes"), mem, true},
				set{filepath.Join(d, "memory.memsw.limit_in_bytes"), mem, false},
				set{filepath.Join(d, "memory.kmem.tcp.limit_in_bytes"), mem, false})
		}
		if pids != c.pids {
			sets = append(sets, set{filepath.Join(c.dirs["pids"], "pids.max"), pids, true})
		}
	case 2:
		if mem != c.mem {
			sets = append(sets, set{filepath.Join(c.dir, "memory.max"), mem, true})
		}
		if pids != c.pids {
			sets = append(sets, set{filepath.Join(c.dir, "pids.max"), pids, true})
		}
	}
	for _, s := range sets {
		err := c.m.writeCg(s.file, s.val)
		if err != nil && (s.required || !errors.Is(err, os.ErrNotExist)) {
			return fmt.Errorf("set %s=%s: %w", s.file, s.val, err)
		}
	}
	c.mem, c.pids = mem, pids
	return nil
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
			_ = c.m.writeCg(filepath.Join(d, "cpu.cfs_quota_us"), "-1")
		}
	case 2:
		_ = c.m.writeCg(filepath.Join(c.dir, "cpu.max"), "max")
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
	if c.version == 0 {
		return s
	}
	s.PeakMemory = c.counterInt(cntPeak)
	s.OOMKills = c.counterKey(cntOOM, "oom_kill")
	s.CPU = c.cpu()
	s.PidsMaxHit = c.counterKey(cntPids, "max")
	return s
}

// countsCPU reports whether the cgroup counts its processes' CPU time (cpu): always on
// v2 (cpu.stat is a core file), on v1 where cpuacct is mounted.
func (c *cgroup) countsCPU() bool {
	return c.version == 2 || (c.version == 1 && c.m.acct != "")
}

// cpuRate is how many CPUs' worth of time the cgroup's processes can use per second of
// wall clock: one under the cgroup's CPU quota; every CPU of the server's where the cpu
// controller is missing (v1 without it mounted, v2 without it delegated).
func (c *cgroup) cpuRate() int {
	if (c.version == 1 && c.dirs["cpu"] != "") || (c.version == 2 && slices.Contains(c.m.ctrls, "cpu")) {
		return 1
	}
	return max(runtime.NumCPU(), 1)
}

// cpu is the CPU time every process of the cgroup has used so far, the exited ones
// too, however they were reaped; 0 where the cgroup does not count it (countsCPU).
func (c *cgroup) cpu() time.Duration {
	switch {
	case !c.countsCPU():
		return 0
	case c.version == 1:
		return time.Duration(c.counterInt(cntCPU)) // cpuacct.usage is in nanoseconds
	}
	return time.Duration(c.counterKey(cntCPU, "usage_usec")) * time.Microsecond
}

// destroy removes the cgroup. Every process in it is dead by then (the pid namespace
// died with its init), but the kernel frees them asynchronously, so rmdir may need a
// few tries.
func (c *cgroup) destroy() error {
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
	c.closeCounters()
	var dirs []string
	for _, d := range c.dirs {
		dirs = append(dirs, d)
	}
	if c.dir != "" {
		_ = c.m.writeCg(filepath.Join(c.dir, "cgroup.kill"), "1")
		dirs = append(dirs, c.dir)
	}
	for _, d := range dirs {
		if err := c.m.removeCgroupDir(d); err != nil {
			return err
		}
	}
	return nil
}

// removeCgroupDir removes an empty cgroup, trying again while its last processes are
// still being freed.
func removeCgroupDir(d string) error { return (*cgroups)(nil).removeCgroupDir(d) }

// removeCgroupDir is removeCgroupDir for a run's cgroup, relative to its own dir.
func (m *cgroups) removeCgroupDir(d string) error {
	var last error
	for i := 0; i < 200; i++ {
		err := m.rmdirCg(d)
		if err == nil || err == unix.ENOENT {
			return nil
		}
		last = err
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w", d, last)
}

// cleanStale removes the cgroups of servers that are gone, killing anything left
// inside: a dead server's own dir with its sandboxes' cgroups. Only a server this one
// can prove gone (sweep.gone) counts: another pid namespace's, an older version's (a
// bare pid, and the sandbox cgroups older versions made straight in the base) are left
// as they are; so is the owner whose one-shot zygote still holds its lock on lock (the
// host-id lock file; nil: none), finishing its teardown. It returns the directories it
// removed.
func (m *cgroups) cleanStale(log *slog.Logger, lock *os.File) []string {
	var removed []string
	sw := sweep{lock: lock}
	for _, base := range m.shared {
		entries, err := os.ReadDir(base)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.IsDir() || !sw.staleInstance(e.Name()) {
				continue
			}
			d := filepath.Join(base, e.Name())
			inner, _ := os.ReadDir(d)
			for _, c := range inner {
				if c.IsDir() {
					removed = append(removed, removeStale(filepath.Join(d, c.Name()), log)...)
				}
			}
			removed = append(removed, removeStale(d, log)...)
		}
	}
	return removed
}

// staleInstance reports whether name is an own dir (instanceName) of a server proved
// gone.
func (s *sweep) staleInstance(name string) bool {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return false
	}
	if _, err := strconv.ParseUint(name[i+1:], 10, 64); err != nil {
		return false
	}
	o, ok := parseOwner(name[:i])
	return ok && s.gone(o)
}

// removeStale kills whatever is left in the cgroup d and removes it.
func removeStale(d string, log *slog.Logger) []string {
	killCgroup(d)
	if err := removeCgroupDir(d); err != nil {
		log.Warn("stale cgroup not removed", "component", "sandbox", "dir", d, "err", err)
		return nil
	}
	return []string{d}
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

func readInt(p string) int64 {
	bp := cgroupBufs.Get().(*[]byte)
	defer cgroupBufs.Put(bp)
	b, err := readCgroupFile(p, *bp)
	if err != nil {
		return 0
	}
	return parseInt(b)
}

func readKey(p, key string) int64 {
	bp := cgroupBufs.Get().(*[]byte)
	defer cgroupBufs.Put(bp)
	b, err := readCgroupFile(p, *bp)
	if err != nil {
		return 0
	}
	return parseKey(b, key)
}

// parseInt is a counter file's one number; parseKey the value of a "key value" line.
func parseInt(b []byte) int64 {
	n, _ := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	return n
}

func parseKey(b []byte, key string) int64 {
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		k, v, ok := bytes.Cut(line, []byte{' '})
		if ok && string(k) == key {
			n, _ := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n
		}
	}
	return 0
}

// cgroupBufs are readInt's and readKey's buffers: three counters are read per run, and a
// fresh 4 KiB for each was garbage.
var cgroupBufs = sync.Pool{New: func() any { b := make([]byte, 4096); return &b }}

// writeCgroupFile and readCgroupFile do a cgroup file's I/O with plain system calls.
// Through os.File, every cgroup file (kernfs files can be polled) is registered with the
// runtime's poller and taken off it again: an epoll_ctl pair, an fstat and fcntls
// around each of the dozen cgroup files a run touches, and the poller's wake-ups.
func writeCgroupFile(p, val string) error { return (*cgroups)(nil).writeCg(p, val) }

// writeCg is writeCgroupFile for a file of a run's cgroup, opened relative to its own
// dir (cgroupfd_linux.go).
func (m *cgroups) writeCg(p, val string) error {
	fd, err := m.openCg(p, unix.O_WRONLY)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for {
		_, err = unix.Write(fd, []byte(val))
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return &os.PathError{Op: "write", Path: p, Err: err}
	}
	return nil
}

// readCgroupFile reads a small cgroup or proc file into buf (up to its length: the
// counters and limits read here are a few lines). These files are seq_files, whose
// read fills the buffer with every line that fits: a read that returns less than it
// was asked for has reached the end, and a second read to see 0 would only cost a
// system call (three per run).
func readCgroupFile(p string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: p, Err: err}
		}
		n += m
		if m == 0 || n < len(buf) {
			break
		}
	}
	return buf[:n], nil
}

// preadAll reads an open counter file from its start into buf (up to its length); a
// short read is its end, as in readCgroupFile. The preads are plain system calls
// (internal/rawio says why): they begin the burst of work after a program's exit, which
// then woke the runtime's sysmon thread ≈ 90 µs (the result, the audit record) before
// the audit line's write, its first system call that can block. A counter read never
// waits: kernfs generates it from the cgroup's counters under the open file's own
// mutex, which only this server holds, and takes no cgroup_mutex. (pread64 with the
// offset in one argument: the 64-bit ports this builds for.)
func preadAll(fd int, buf []byte) ([]byte, error) {
	n := 0
	for n < len(buf) {
		m, _, errno := unix.RawSyscall6(unix.SYS_PREAD64, uintptr(fd), uintptr(unsafe.Pointer(&buf[n])), uintptr(len(buf)-n), uintptr(n), 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return nil, os.NewSyscallError("pread", errno)
		}
		n += int(m)
		if m == 0 || n < len(buf) {
			break
		}
	}
	return buf[:n], nil
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
