package linux

import "sync"

// Spare cgroups: a run's cgroup is made ahead of the call that takes it.
//
//	create (a call)                       refill (one goroutine at a time)
//	  take a spare, if one is ready         below spareLow ready: make spares
//	  else make one now                     until spareTarget are, then stop
//	  limit: the call's memory and pids
//	  ... its sandbox released          →    asked for by the taker
//
// A spare is a cgroup nothing has run in: made, given the settings every run's cgroup
// has alike (make), and handed out once. It is never one a run has used: a used cgroup
// keeps charges a new one does not have (≈ 8 KiB of page cache and kernel memory after
// a python run, measured, which force_empty does not clear) and counters that cannot be
// reset (oom_kill, pids.events). A call's limits are written when it takes its cgroup,
// before anything runs in it, as they were when the call made it.
//
// What it saves: making a v1 cgroup (three mkdirs, mostly the kernel populating each
// controller's files) ran in a goroutine of its own beside the spawn, for every call;
// its blocking system calls held the server's only P until sysmon took it back and
// handed it to another thread. Spares are made a few at a time, off the call's path, and
// the spawner no longer waits for its cgroup.
//
// The taker asks for the refill once nothing of its own waits on the server: a call once
// its sandbox is released (its answer written, its cgroup removed), a pool's or a
// session's sandbox once it has been started (a pool's while its interpreter loads, not
// once it is ready, when a call may be running). Asked for as the spare was taken, the
// refill's goroutine ran while the call's spawner was being forked, and the call, back
// from the zygote, waited for the only P while three spares were made (≈ 0.4 ms in a
// perf trace, every third call), its spawner waiting for its cgroup all the while. Asked
// for once the program had started (the fourth round), its mkdirs were the only system
// calls of that burst of the server's work, which so woke the runtime's sysmon thread
// for them alone; the release's rmdirs wake it anyway.

const (
	spareTarget = 4 // spares a refill makes ready
	spareLow    = 2 // a take that leaves fewer starts a refill
)

// spareMark is in every spare's name, after the server's pid (runName): whoever counts
// a server's sandboxes from outside (the soak, an operator) can tell the empty spares,
// and a later server's cleanStale removes a dead server's spares with its runs'.
const spareMark = "spare-"

func spareName() string { return runName(spareMark + newID()) }

// spares are the cgroups made ahead of the calls. A one-shot backend keeps none: its
// single run would pay for spares nobody takes.
type spares struct {
	mu      sync.Mutex
	ready   []*cgroup
	off     bool // keep none (one-shot)
	closed  bool // the own dirs are being removed or gone: make none
	filling bool // a refill is running
	wg      sync.WaitGroup
}

// take hands out a spare, or nil.
func (s *spares) take() *cgroup {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.ready)
	if n == 0 {
		return nil
	}
	cg := s.ready[n-1]
	s.ready[n-1] = nil
	s.ready = s.ready[:n-1]
	return cg
}

// reopen lets refills make spares again once the own dirs are made again.
func (s *spares) reopen() {
	s.mu.Lock()
	s.closed = false
	s.mu.Unlock()
}

// refill makes spares in the background when fewer than spareLow are ready, up to
// spareTarget; one refill runs at a time. A spare that cannot be made stops it: the next
// call makes its own cgroup and reports why if it cannot.
func (m *cgroups) refill() {
	s := &m.spares
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.off || s.closed || s.filling || len(s.ready) >= spareLow {
		return
	}
	s.filling = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			s.mu.Lock()
			if s.closed || len(s.ready) >= spareTarget {
				s.filling = false
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
			cg, err := m.make(spareName())
			s.mu.Lock()
			if err != nil || s.closed {
				s.filling = false
				s.mu.Unlock()
				if cg != nil {
					_ = cg.destroy()
				}
				return
			}
			s.ready = append(s.ready, cg)
			s.mu.Unlock()
		}
	}()
}

// dropSpares removes every spare and keeps refills from making more until the own dirs
// are made again (ensureOwn): the own dirs can then be removed.
func (m *cgroups) dropSpares() {
	s := &m.spares
	s.mu.Lock()
	s.closed = true
	ready := s.ready
	s.ready = nil
	s.mu.Unlock()
	s.wg.Wait() // a refill in flight ends, removing what it was making
	for _, cg := range ready {
		_ = cg.destroy() // what is left, removeOwn removes with the own dirs
	}
}

// spareDirs lists the spares' directories (tests).
func (m *cgroups) spareDirs() []string {
	s := &m.spares
	s.mu.Lock()
	defer s.mu.Unlock()
	var dirs []string
	for _, cg := range s.ready {
		for _, d := range cg.dirs {
			dirs = append(dirs, d)
		}
		if cg.dir != "" {
			dirs = append(dirs, cg.dir)
		}
	}
	return dirs
}
