package darwin

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// proc identifies a process across pid reuse: the pid plus its start time.
type proc struct {
	pid   int
	start int64 // microseconds since the epoch
}

// tracker remembers every process that descends from the sandbox's root process. macOS
// has no PID namespace and no cgroup, so a process that setsid()s leaves the process
// group; it is still found here while its ancestry leads to the root. The residual risk:
// a double-forked daemon whose middle process exits between two scans is re-parented to
// launchd before it is seen, and survives.
type tracker struct {
	root  int
	known map[int]proc
}

func newTracker(root int) *tracker {
	return &tracker{root: root, known: map[int]proc{}}
}

// scan takes one snapshot of the process table and adds the root's descendants.
func (t *tracker) scan() {
	procs, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return
	}
	children := map[int][]proc{}
	for i := range procs {
		p := &procs[i]
		pid := int(p.Proc.P_pid)
		start := p.Proc.P_starttime.Sec*1_000_000 + int64(p.Proc.P_starttime.Usec)
		children[int(p.Eproc.Ppid)] = append(children[int(p.Eproc.Ppid)], proc{pid: pid, start: start})
	}
	// Walk from the root and from every process seen before: a tracked parent may have
	// left the root's subtree (re-parented) while its own children are still attached.
	queue := []int{t.root}
	for pid := range t.known {
		queue = append(queue, pid)
	}
	seen := map[int]bool{}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		for _, c := range children[pid] {
			if old, ok := t.known[c.pid]; ok && old.start != c.start {
				continue // pid reused by an unrelated process
			}
			t.known[c.pid] = c
			queue = append(queue, c.pid)
		}
	}
}

// killAll SIGKILLs the process group and every tracked descendant still alive with the
// same start time, rescanning a few times for children forked during the kill.
func (t *tracker) killAll() {
	_ = syscall.Kill(-t.root, syscall.SIGKILL)
	for range 3 {
		t.scan()
		alive := false
		for _, p := range t.known {
			if sameProcess(p) {
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
				alive = true
			}
		}
		if !alive {
			return
		}
	}
}

// sameProcess reports whether p still runs and is the process first seen under that pid.
func sameProcess(p proc) bool {
	k, err := unix.SysctlKinfoProc("kern.proc.pid", p.pid)
	if err != nil || int(k.Proc.P_pid) != p.pid {
		return false
	}
	start := k.Proc.P_starttime.Sec*1_000_000 + int64(k.Proc.P_starttime.Usec)
	// A zombie still has its pid but can do nothing; SIGKILL to it is harmless.
	return start == p.start
}

// countUserProcs is the number of processes whose real uid is uid: RLIMIT_NPROC counts
// all of them, not just the sandbox's, so the limit is set to this count plus Pids.
func countUserProcs(uid int) (int, error) {
	procs, err := unix.SysctlKinfoProcSlice("kern.proc.ruid", uid)
	if err != nil {
		return 0, err
	}
	return len(procs), nil
}
