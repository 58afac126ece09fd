package darwin

import (
	"math"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Process states from <sys/proc.h> (x/sys/unix does not export them).
const (
	stateStopped = 4 // SSTOP
	stateZombie  = 5 // SZOMB
)

// freezeRounds bounds the stop-and-rescan loop of killAll; a round costs one process
// table scan (about 1 ms with 600 processes).
const freezeRounds = 100

// proc identifies a process across pid reuse: the pid plus its start time.
type proc struct {
	pid   int
	start int64 // microseconds since the epoch
}

// tracker remembers every process that descends from the sandbox's root process. macOS
// has no PID namespace and no cgroup, so a process that setsid()s leaves the process
// group; it is still found here while its ancestry leads to the root. Scans run on every
// fork a tracked process makes (kqueue NOTE_FORK, the parent held stopped meanwhile) and
// every sweepEvery besides.
//
// The residual risk: a middle process that forks and exits within the microseconds
// before the kqueue event reaches follow re-parents its child to launchd, and that child
// is lost.
type tracker struct {
	root int

	mu      sync.Mutex
	known   map[int]proc
	watched map[int]bool
	kq      int  // -1 without kqueue: periodic scans only
	frozen  bool // killAll has begun: follow must not continue a stopped process
}

func newTracker(root int) *tracker {
	t := &tracker{root: root, known: map[int]proc{}, watched: map[int]bool{}, kq: -1}
	// Under ForkLock, as the standard library creates descriptors without an atomic
	// close-on-exec: a concurrent run's child must not inherit the queue.
	syscall.ForkLock.RLock()
	kq, err := unix.Kqueue()
	if err == nil {
		unix.CloseOnExec(kq)
	}
	syscall.ForkLock.RUnlock()
	if err == nil {
		t.kq = kq
		t.watch(root)
	}
	return t
}

// close releases the kqueue; the tracker is not used afterwards.
func (t *tracker) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.kq >= 0 {
		_ = unix.Close(t.kq)
		t.kq = -1
	}
}

// watch asks for a NOTE_FORK event from pid. Called with mu held or before the tracker
// is shared.
func (t *tracker) watch(pid int) {
	if t.kq < 0 || t.watched[pid] {
		return
	}
	var ev unix.Kevent_t
	unix.SetKevent(&ev, pid, unix.EVFILT_PROC, unix.EV_ADD|unix.EV_CLEAR)
	ev.Fflags = unix.NOTE_FORK
	if _, err := unix.Kevent(t.kq, []unix.Kevent_t{ev}, nil, nil); err == nil {
		t.watched[pid] = true
	}
}

// follow scans whenever a tracked process forks, and at least every period, until stop
// is closed. The parent that forked is held with SIGSTOP until the scan has recorded its
// child, so a double-forking middle process cannot exit and re-parent the child to
// launchd unseen; a fixed period alone misses a middle process that lives a few
// milliseconds. (SIGSTOP and SIGCONT are invisible to the program but for a parent
// waiting with WUNTRACED.)
func (t *tracker) follow(period time.Duration, stop <-chan struct{}) {
	events := make([]unix.Kevent_t, 16)
	for {
		select {
		case <-stop:
			return
		default:
		}
		t.mu.Lock()
		kq := t.kq
		t.mu.Unlock()
		n := 0
		if kq < 0 {
			select {
			case <-stop:
				return
			case <-time.After(period):
			}
		} else {
			ts := unix.NsecToTimespec(period.Nanoseconds())
			// EINTR and a closed queue both just lead to the next scan or to stop.
			n, _ = unix.Kevent(kq, nil, events, &ts)
		}
		t.mu.Lock()
		if t.frozen {
			t.mu.Unlock()
			continue // killAll owns the tree now: nothing may be continued
		}
		var held []int
		for _, ev := range events[:max(n, 0)] {
			if ev.Filter != unix.EVFILT_PROC || ev.Fflags&unix.NOTE_FORK == 0 || ev.Ident > math.MaxInt32 {
				continue
			}
			if pid := int(ev.Ident); syscall.Kill(pid, syscall.SIGSTOP) == nil {
				held = append(held, pid)
			}
		}
		t.scanLocked()
		for _, pid := range held {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
		t.mu.Unlock()
	}
}

// scanLocked takes one snapshot of the process table and adds the root's descendants
// (mu held). It returns the processes of the snapshot by pid, for killAll's state checks.
func (t *tracker) scanLocked() map[int]*unix.KinfoProc {
	procs, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil
	}
	byPid := make(map[int]*unix.KinfoProc, len(procs))
	children := map[int][]proc{}
	for i := range procs {
		p := &procs[i]
		pid := int(p.Proc.P_pid)
		byPid[pid] = p
		children[int(p.Eproc.Ppid)] = append(children[int(p.Eproc.Ppid)], proc{pid: pid, start: startTime(p)})
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
			t.watch(c.pid)
			queue = append(queue, c.pid)
		}
	}
	return byPid
}

// killAll freezes the whole tree, then kills it. Killing first is the race: a middle
// process that dies re-parents its children to launchd before the next scan can see
// them. A stopped process can neither fork nor exit, so the tree stops changing: SIGSTOP
// goes to the process group and to every tracked process, the table is rescanned, and
// newly found processes are stopped too, until a scan finds nothing new and every
// tracked process is stopped (or a zombie). Only then does SIGKILL go out.
func (t *tracker) killAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.frozen = true
	_ = syscall.Kill(-t.root, syscall.SIGSTOP)
	stopped := map[int]bool{}
	for range freezeRounds {
		before := len(t.known)
		table := t.scanLocked()
		if table == nil {
			break
		}
		settled := len(t.known) == before
		for _, p := range t.known {
			k, alive := table[p.pid]
			if !alive || startTime(k) != p.start || k.Proc.P_stat == stateZombie {
				continue
			}
			if !stopped[p.pid] {
				_ = syscall.Kill(p.pid, syscall.SIGSTOP)
				stopped[p.pid] = true
			}
			// A process inside fork() when the signal came stops only on its way out, and
			// its child exists by then: not settled until the table shows it stopped.
			if k.Proc.P_stat != stateStopped {
				settled = false
			}
		}
		if settled {
			break
		}
		time.Sleep(time.Millisecond)
	}
	_ = syscall.Kill(-t.root, syscall.SIGKILL)
	for _, p := range t.known {
		if sameProcess(p) {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
}

func startTime(k *unix.KinfoProc) int64 {
	return k.Proc.P_starttime.Sec*1_000_000 + int64(k.Proc.P_starttime.Usec)
}

// sameProcess reports whether p still runs and is the process first seen under that pid.
func sameProcess(p proc) bool {
	k, err := unix.SysctlKinfoProc("kern.proc.pid", p.pid)
	if err != nil || int(k.Proc.P_pid) != p.pid {
		return false
	}
	// A zombie still has its pid but can do nothing; SIGKILL to it is harmless.
	return startTime(k) == p.start
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
