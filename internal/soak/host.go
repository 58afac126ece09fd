package soak

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// initName is the argv[0] of every sandbox's init (sandbox/linux's initName), and
// spawnerName the name of the process that clones it and waits for it (init_linux.c).
const (
	initName    = "airlock-sandbox-init"
	spawnerName = "airlock-spawner"
)

// Proc is a process found on the host.
type Proc struct {
	PID     int
	Cmdline string
}

// Procs lists the processes whose command line contains marker, and the sandbox inits
// that belong to the server serverPID: those whose cgroup is named after it, or whose
// parent chain reaches it. Other servers' sandboxes (tests running alongside) are not
// counted.
func Procs(marker string, serverPID int) (marked, inits []Proc) {
	marked, inits, _ = scan(marker, serverPID)
	return marked, inits
}

// scan reads every command line in /proc once and sorts the processes into marked ones
// and the server's sandbox inits and spawners. A finished sandbox's spawner and init
// linger a few milliseconds after its result, and a pool refill has a spawner before it
// has an init: equal counts of both mean no sandbox is coming or going.
func scan(marker string, serverPID int) (marked, inits, spawners []Proc) {
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		cmd := string(bytes.ReplaceAll(bytes.TrimRight(b, "\x00"), []byte{0}, []byte{' '}))
		switch {
		case marker != "" && strings.Contains(cmd, marker):
			marked = append(marked, Proc{pid, cmd})
		case strings.HasPrefix(cmd, initName) && ownedBy(pid, serverPID):
			inits = append(inits, Proc{pid, cmd})
		case strings.HasPrefix(cmd, spawnerName) && ownedBy(pid, serverPID):
			spawners = append(spawners, Proc{pid, cmd})
		}
	}
	return marked, inits, spawners
}

func ownedBy(pid, serverPID int) bool {
	cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	// In the server's own dir (<pid>.…, its owner name), or a cgroup older versions made in the base.
	if strings.Contains(string(cg), fmt.Sprintf("/%s/%d.", cgroupDir, serverPID)) ||
		strings.Contains(string(cg), fmt.Sprintf("/%s/%d-", cgroupDir, serverPID)) {
		return true
	}
	for i := 0; i < 64 && pid > 1; i++ {
		if pid == serverPID {
			return true
		}
		pid = ppid(pid)
	}
	return false
}

func ppid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name in field 2 may hold spaces and parentheses; fields restart after
	// the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// cgroupDir is the directory airlock creates its cgroups in (sandbox/linux's cgroupDir).
const cgroupDir = "airlock"

// CgroupBases are the directories the server pid creates sandbox cgroups in: its own
// dirs <mount>/<its own cgroup>/airlock/<pid>.… in each hierarchy it belongs to.
func CgroupBases(pid int) []string {
	var own []string
	prefix := strconv.Itoa(pid) + "."
	for _, b := range SharedCgroupBases(pid) {
		entries, _ := os.ReadDir(b)
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
				own = append(own, filepath.Join(b, e.Name()))
			}
		}
	}
	return own
}

// SharedCgroupBases are the airlock dirs every airlock process in pid's cgroups makes its
// own dir in: <mount>/<its own cgroup>/airlock for each hierarchy it belongs to.
func SharedCgroupBases(pid int) []string {
	seen := map[string]bool{}
	var bases []string
	for _, h := range hierarchies(pid) {
		d := filepath.Join(h.mount, h.path, cgroupDir)
		if st, err := os.Stat(d); err == nil && st.IsDir() && !seen[d] {
			seen[d] = true
			bases = append(bases, d)
		}
	}
	return bases
}

// CgroupParents are the cgroups of pid in the v1 hierarchies airlock uses (memory,
// pids, cpu, cpuacct): where a server started there makes its bases. Unlike CgroupBases
// it does not need a base to exist already (an airlock process removes the base it made,
// empty, when it exits).
func CgroupParents(pid int) []string {
	var out []string
	for _, h := range hierarchies(pid) {
		if slices.ContainsFunc(h.controllers, func(c string) bool {
			return c == "memory" || c == "pids" || c == "cpu" || c == "cpuacct"
		}) {
			out = append(out, filepath.Join(h.mount, h.path))
		}
	}
	return out
}

// hierarchy is one cgroup hierarchy a process belongs to.
type hierarchy struct {
	controllers []string // empty for cgroup2
	mount       string
	path        string // the process's cgroup in it
}

// hierarchies lists the mounted cgroup hierarchies of pid.
func hierarchies(pid int) []hierarchy {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	mounts := map[string]string{}
	for _, line := range strings.Split(string(mi), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		switch g[0] {
		case "cgroup2":
			mounts[""] = f[4]
		case "cgroup":
			for _, opt := range strings.Split(g[2], ",") {
				mounts[opt] = f[4]
			}
		}
	}
	own, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil
	}
	var out []hierarchy
	for _, line := range strings.Split(strings.TrimSpace(string(own)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var ctrls []string
		if parts[1] != "" {
			ctrls = strings.Split(parts[1], ",")
		}
		for _, c := range append(ctrls, "") {
			if mnt, ok := mounts[c]; ok && (c != "" || len(ctrls) == 0) {
				out = append(out, hierarchy{controllers: ctrls, mount: mnt, path: parts[2]})
				break
			}
		}
	}
	return out
}

// PrivateCgroup moves this process into a new child cgroup, named name, of its own cgroup
// in each v1 hierarchy airlock uses (memory, pids, cpu), so the airlock servers it starts
// from then on keep their sandbox cgroups under a base that no other airlock process
// scans. Every airlock start removes the cgroups of dead servers under its own base:
// without this, a check that the next start after a crash cleans up and says so races
// with any other airlock starting on the host meanwhile (in CI, the other test packages'
// sandboxes, many a second), which may clean them first. The returned function moves the
// process back and removes what is left. Without root or with no v1 hierarchy (airlock
// then uses cgroup v2 or none), it does nothing.
func PrivateCgroup(name string) (restore func() error, err error) {
	type moved struct{ parent, dir string }
	var done []moved
	pid := []byte(strconv.Itoa(os.Getpid()))
	restore = func() error {
		var errs []error
		for _, m := range done {
			if err := os.WriteFile(filepath.Join(m.parent, "cgroup.procs"), pid, 0); err != nil {
				errs = append(errs, err)
			}
			base := filepath.Join(m.dir, cgroupDir)
			entries, _ := os.ReadDir(base)
			for _, e := range entries {
				if e.IsDir() {
					errs = append(errs, fmt.Errorf("left behind: %s", filepath.Join(base, e.Name())))
				}
			}
			for _, d := range []string{base, m.dir} {
				if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
					errs = append(errs, err)
				}
			}
		}
		return errors.Join(errs...)
	}
	if os.Geteuid() != 0 {
		return restore, nil
	}
	for _, h := range hierarchies(os.Getpid()) {
		if !slices.ContainsFunc(h.controllers, func(c string) bool { return c == "memory" || c == "pids" || c == "cpu" }) {
			continue
		}
		parent := filepath.Join(h.mount, h.path)
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o750); err != nil {
			_ = restore()
			return nil, fmt.Errorf("private cgroup: %w", err)
		}
		done = append(done, moved{parent, dir})
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), pid, 0); err != nil {
			_ = restore()
			return nil, fmt.Errorf("private cgroup: join %s: %w", dir, err)
		}
	}
	return restore, nil
}

// Cgroups lists the cgroup directories of serverPID's sandboxes under bases: named
// after serverPID, less the spares, the empty cgroups a running server keeps made ahead
// of its calls (sandbox/linux spares_linux.go).
func Cgroups(bases []string, serverPID int) []string {
	var out []string
	for _, d := range AllCgroups(bases, serverPID) {
		if !strings.HasPrefix(filepath.Base(d), strconv.Itoa(serverPID)+"-"+spareMark) {
			out = append(out, d)
		}
	}
	return out
}

// AllCgroups lists every cgroup directory named after serverPID under bases, its
// spares included: none may be left once the server is gone.
func AllCgroups(bases []string, serverPID int) []string {
	var out []string
	prefix := strconv.Itoa(serverPID) + "-"
	for _, b := range bases {
		entries, _ := os.ReadDir(b)
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
				out = append(out, filepath.Join(b, e.Name()))
			}
		}
	}
	return out
}

// spareMark follows the pid in a spare cgroup's name (sandbox/linux spareMark).
const spareMark = "spare-"

// Mounts returns the host's mount table as a set of "mountpoint fstype source" entries
// (mount ids change on every mount, so they are left out).
func Mounts() map[string]int {
	out := map[string]int{}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 2 {
			continue
		}
		out[f[4]+" "+g[0]+" "+g[1]]++
	}
	return out
}

// MountDiff lists the entries of after that were not in before.
func MountDiff(before, after map[string]int) []string {
	var out []string
	for k, n := range after {
		if n > before[k] {
			out = append(out, k)
		}
	}
	return out
}

// Stats is what the host sees of a process.
type Stats struct {
	FDs     int
	Threads int
	RSS     int64 // bytes
}

// StatsOf reads pid's open fd count, thread count and resident set size.
func StatsOf(pid int) (Stats, error) {
	var s Stats
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, fmt.Errorf("read fds: %w", err)
	}
	s.FDs = len(fds)
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, fmt.Errorf("read status: %w", err)
	}
	for _, line := range strings.Split(string(st), "\n") {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "Threads":
			s.Threads = int(n)
		case "VmRSS":
			s.RSS = n << 10
		}
	}
	return s, nil
}

// Entries lists the names in dir (for temp-dir leftovers).
func Entries(dir string) []string {
	entries, _ := os.ReadDir(dir)
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
