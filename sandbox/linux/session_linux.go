package linux

// Sessions: one sandbox kept alive across calls (sandbox.Sessions).
//
// A session's sandbox is a single-use sandbox whose program is a driver (policy's
// SessionDriver): the same namespaces, root, seccomp filter, rlimits and cgroup, built
// by the same launch, from the pool when a template fits. Nothing of the engine is
// trusted to the driver: it runs in the sandbox with the calls' code, in the same
// process as a call's globals, so a call can rewrite it. What a call may break is its
// own session; every guarantee is kept from out here:
//
//	stage      what                                                        who
//	open       prepare (or take from the pool), hand the driver over       launch
//	           v2: memory.oom.group = 0, so an OOM kill takes one process  here
//	           and not the init with the workspace
//	           write the key line; wait for "ready:PID" on both streams     here, driver
//	           the supervisor's host pid (no call has run yet); a root      cgroup.procs
//	           server makes it and the init the OOM killer's last choice
//	call       queue the call's frame (one writer, frames never mixed);    here
//	           the pumps route output to the call
//	           until its end markers on both streams; caps, flood kill     here
//	           wall and CPU (cgroup usage) per call, cancellation:         here
//	           SIGINT to the session's processes (all but the spawner, the
//	           init and the supervisor), SIGKILL after the grace; the
//	           supervisor restarts the worker ("restart", then "up"); at the
//	           end every process but the supervisor and the worker is killed
//	close      kill the init (the pid namespace with it), release          launch
//
// Sessions need cgroups (v2, or v1 as root): the memory and pids limits hold for the
// whole session, and the processes to interrupt are the cgroup's. A call's CPU time is
// the cgroup's count (v2's cpu.stat, v1's cpuacct), or, on a v1 host without cpuacct,
// the sum over the cgroup's processes and what they reaped.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/sandbox"
)

const (
	// restartGrace bounds the wait for the supervisor's "restart" after a kill; past it
	// the session is ended.
	restartGrace = 5 * time.Second
	// cpuPoll is how often a call's CPU time is read from the cgroup: a call may run up
	// to this much past its CPU limit before it is interrupted.
	cpuPoll = 50 * time.Millisecond
)

// sessionUnavailable is why a host without cgroups, or the Landlock tier, has no sessions.
func (s *Sandbox) sessionUnavailable() error {
	if s.ll != nil {
		// The driver's supervisor and the interrupt of a call's processes are built
		// on the sandbox's pid namespace, which this tier does not have.
		return fmt.Errorf("%w: run_code sessions need the namespace tier (sandbox.isolation = \"landlock\" has no pid namespace); use single-use calls", sandbox.ErrUnavailable)
	}
	if s.cg.version != 0 {
		return nil
	}
	return fmt.Errorf("%w: sessions need cgroups (the session's memory and pids limits and the processes a timeout interrupts are its cgroup's): %s; use single-use calls, or %s",
		sandbox.ErrUnavailable, s.cg.reason, cgroupFix(s.root, container()))
}

// session is one live session sandbox.
type session struct {
	sb  *Sandbox
	l   *launch
	key string
	out *sandbox.Splitter
	err *sandbox.Splitter

	calls sync.Mutex // one call at a time

	mu      sync.Mutex
	cur     *sessionCall
	ready   [2]bool
	readyCh chan struct{}
	superNS int // the supervisor's pid in the sandbox, from "ready" (before any call ran)
	super   int // its host pid
	// init is the init's host pid and initFD a pidfd pinning it, found at open (before
	// any call ran); the workspace is walked for each call's artifacts through its root.
	init   int
	initMu sync.Mutex // guards initFD against its Close during a walk
	initFD *os.File
	seq    int
	// between counts the output written while no call runs (background processes),
	// which nobody keeps; past the flood ceiling the session is ended, since the
	// server would read it without end.
	between int64
	flooded bool
	// frames are the calls for the driver's stdin, written in order by one writer: a
	// frame a killed worker left half read must not interleave with the next.
	frames  chan []byte
	ended   chan struct{}
	endOnce sync.Once
}

// sessionCall is the call in progress: where its output goes and what ended it.
type sessionCall struct {
	seq            int
	stdout, stderr *sandbox.Capture
	ceiling        int64 // flood: past this on one stream the call is killed
	flooded        bool
	end            [2]bool
	code           int
	restart        [2]string // the "restart" markers' how, per stream
	up             [2]bool   // a new worker said "up" since the last restart
	done           chan struct{}
}

// OpenSession starts spec's driver in a new sandbox and waits for it to be ready.
func (s *Sandbox) OpenSession(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	if err := s.sessionUnavailable(); err != nil {
		return nil, err
	}
	spec = withDefaultNetwork(spec)
	if spec.ID == "" {
		spec.ID = newID()
	}
	if err := validate(spec); err != nil {
		return nil, err
	}
	for try := 1; ; try++ {
		l, err := s.sessionLaunch(spec, try)
		if err != nil {
			return nil, err
		}
		ss := &session{sb: s, l: l, key: newKey(), readyCh: make(chan struct{}), ended: make(chan struct{}),
			frames: make(chan []byte, 4)}
		ss.out, ss.err = sandbox.NewSplitter(ss.key), sandbox.NewSplitter(ss.key)
		sink := ss.feed
		l.sink.Store(&sink)
		err = ss.open(ctx, spec)
		if err == nil {
			go ss.watch()
			go ss.writer()
			return ss, nil
		}
		ss.Close()
		// As in run: a host uid found in use is left to its holder.
		if !uidBusy(err) || try >= busyTries {
			return nil, err
		}
		s.log.Warn("a sandbox host uid is in use outside this server; trying another", "id", spec.ID, "uid", l.ids.uid)
	}
}

// sessionLaunch is a started sandbox for a session: from the pool on the first try
// when a template fits, else built for spec.
func (s *Sandbox) sessionLaunch(spec sandbox.Spec, try int) (*launch, error) {
	if p := s.pool.Load(); p != nil && try == 1 {
		if l, sl := p.take(spec); l != nil {
			defer sl.refill()
			if err := l.cg.limit(spec.Limits); err != nil {
				l.discard()
				s.release(l)
				return nil, fmt.Errorf("%w: %w", errCgroup, err)
			}
			return l, nil
		}
	}
	if try > 1 {
		// The failed attempt's cgroup, named after the ID, goes in the background.
		spec.ID = fmt.Sprintf("%s-%d", spec.ID, try)
	}
	l, err := s.prepare(spec, s.config(spec))
	if err == nil && l.cg != nil {
		s.cg.refill() // for the spare this session took
	}
	return l, err
}

func newKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// open hands the driver over and waits for its "ready" and the supervisor's pid.
func (ss *session) open(ctx context.Context, spec sandbox.Spec) error {
	l := ss.l
	if l.cg.version == 2 {
		if err := os.WriteFile(filepath.Join(l.cg.dir, "memory.oom.group"), []byte("0"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: set memory.oom.group=0: %w", errCgroup, err)
		}
	}
	if err := l.handover(spec, callOf(spec)); err != nil {
		return err
	}
	if _, err := l.stdinW.Write([]byte(ss.key + "\n")); err != nil {
		// A closed stdin is an init that has gone, most often after a setup failure
		// (a host uid found in use, which OpenSession retries): its report, read
		// concurrently, says which, so wait for it before judging.
		t := time.NewTimer(drainGrace)
		select {
		case <-l.reportDone:
		case <-t.C:
		}
		t.Stop()
		return ss.openFailed(fmt.Errorf("the session driver did not take its key: %w", err))
	}
	setup := time.NewTimer(setupTimeout)
	defer setup.Stop()
	select {
	case <-ss.readyCh:
	case <-l.waited:
		<-l.reportDone
		return ss.openFailed(errors.New("the session driver ended before it was ready"))
	case <-l.exitCh:
		return ss.openFailed(errors.New("the session driver ended before it was ready"))
	case <-setup.C:
		return ss.openFailed(fmt.Errorf("the session driver was not ready within %s", setupTimeout))
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	procs, err := ss.processes()
	if err != nil {
		return err
	}
	ss.mu.Lock()
	superNS := ss.superNS
	ss.mu.Unlock()
	for _, pid := range procs {
		if ns, ok := nsPid(pid); ok && ns[len(ns)-1] == superNS {
			ss.super = pid
			if err := ss.pinInit(); err != nil {
				return err
			}
			ss.protect()
			return nil
		}
	}
	return fmt.Errorf("the session driver's supervisor (pid %d in the sandbox) is not among its processes", superNS)
}

// pinInit finds the session's init, pid 1 of its pid namespace, among the cgroup's
// processes and pins it with a pidfd, checked again after the open so that the pid is
// not one reused meanwhile by a process outside the sandbox.
func (ss *session) pinInit() error {
	dir, ctrl := ss.procsDir()
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return fmt.Errorf("%w: read the session's processes: %w", errCgroup, err)
	}
	for _, f := range strings.Fields(string(procs)) {
		pid, err := strconv.Atoi(f)
		if err != nil || !isInit(pid) {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
		if err != nil || !inCgroup(string(b), dir, ctrl) || !isInit(pid) {
			unix.Close(fd)
			continue
		}
		ss.init, ss.initFD = pid, os.NewFile(uintptr(fd), fmt.Sprintf("pidfd:%d", pid))
		return nil
	}
	return errors.New("the session's init is not among its processes")
}

// isInit reports whether pid is pid 1 of a pid namespace below the server's: the
// sandbox's init, at open, when no call has run that could make another.
func isInit(pid int) bool {
	ns, ok := nsPid(pid)
	return ok && len(ns) > 1 && ns[len(ns)-1] == 1
}

// openFailed explains a driver that did not come up: a setup failure, or its output.
func (ss *session) openFailed(err error) error {
	l := ss.l
	l.mu.Lock()
	setup := l.setup
	l.mu.Unlock()
	if setup != nil {
		return setup
	}
	return fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err)
}

// protect makes the supervisor and the init the OOM killer's last choice: at the
// session's memory limit it kills the worker or the calls' processes, which a restart
// recovers from, instead of the supervisor, whose death ends the session (seen in the
// session soak: a fork bomb of worker copies, the size of the supervisor). Lowering a
// score needs CAP_SYS_RESOURCE, so only a root server can (not one in a container that
// drops it); without it the session may end at the limit, and says so. (The sandbox's own processes cannot write their
// scores: they are not dumpable, so their /proc files are root's.)
func (ss *session) protect() {
	if !ss.sb.root {
		return
	}
	for _, pid := range []int{ss.super, ss.init} {
		if pid <= 0 {
			continue
		}
		if err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte("-999"), 0); err != nil {
			// A root server without CAP_SYS_RESOURCE (a container's root): as unprivileged.
			ss.sb.log.Debug("cannot protect a session's supervisor from the OOM killer", "id", ss.l.spec.ID, "err", err)
		}
	}
}

// writer feeds the frames to the driver's stdin until the session ends (Close closes
// stdin, which ends a write the driver does not read).
func (ss *session) writer() {
	for {
		select {
		case f := <-ss.frames:
			if _, err := ss.l.stdinW.Write(f); err != nil {
				return
			}
		case <-ss.ended:
			return
		}
	}
}

// watch ends the session when its sandbox ends on its own (the supervisor was killed).
func (ss *session) watch() {
	select {
	case <-ss.l.exitCh:
	case <-ss.l.waited:
	case <-ss.ended:
		return
	}
	ss.Close()
}

// Done is closed once the session has ended.
func (ss *session) Done() <-chan struct{} { return ss.ended }

// Gone is closed once the spawner has exited, which it does only when the pid
// namespace is dead: every process of the session has exited.
func (ss *session) Gone() <-chan struct{} { return ss.l.waited }

// Close kills every process of the session and releases its sandbox.
func (ss *session) Close() {
	ss.endOnce.Do(func() {
		ss.l.cfgW.Close()
		ss.l.stdinW.Close()
		// Released first, so that whoever sees Done and then waits for the backend's
		// cleanup (Sandbox.Wait) waits for this session's too.
		ss.sb.release(ss.l)
		ss.initMu.Lock()
		if ss.initFD != nil {
			ss.initFD.Close()
			ss.initFD = nil
		}
		ss.initMu.Unlock()
		close(ss.ended)
	})
}

// feed is the launch's sink: each chunk of the driver's stdout or stderr.
func (ss *session) feed(stderr bool, p []byte) {
	sp, i := ss.out, 0
	if stderr {
		sp, i = ss.err, 1
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	sp.Feed(p, func(b []byte) {
		c := ss.cur
		if c == nil {
			// Between calls (a background process): nobody's output.
			ss.between += int64(len(b))
			if ceiling := ss.l.spec.Limits.Output * floodFactor; ss.between > ceiling && !ss.flooded {
				ss.flooded = true
				ss.sb.log.Warn("a session's processes wrote more than the flood ceiling between calls; ending the session", "id", ss.l.spec.ID, "ceiling", ceiling)
				go ss.Close()
			}
			return
		}
		cp := c.stdout
		if stderr {
			cp = c.stderr
		}
		_, _ = cp.Write(b)
		if c.ceiling > 0 && cp.Total() > c.ceiling {
			c.flooded = true
		}
	}, func(body string) { ss.marker(i, body) })
}

// marker handles one marker body from stream i (0 stdout, 1 stderr); ss.mu is held.
func (ss *session) marker(i int, body string) {
	kind, rest, _ := strings.Cut(body, ":")
	switch kind {
	case "ready":
		pid, err := strconv.Atoi(rest)
		if err == nil && !ss.ready[i] {
			ss.superNS = pid
			ss.ready[i] = true
			if ss.ready[0] && ss.ready[1] {
				close(ss.readyCh)
			}
		}
	case "end":
		seq, code, ok := parseEnd(rest)
		c := ss.cur
		if !ok || c == nil || seq != c.seq || c.end[i] {
			return
		}
		c.end[i], c.code = true, code
		if c.end[0] && c.end[1] {
			close(c.done)
			ss.cur = nil
		}
	case "restart":
		// The first restart of the call says how its worker ended; a later one (the new
		// worker died too, say at the memory limit the old one left) delays the end
		// until a worker is up.
		if c := ss.cur; c != nil {
			if c.restart[i] == "" {
				c.restart[i] = rest
			}
			c.up[i] = false
		}
	case "up":
		c := ss.cur
		if c == nil || c.restart[i] == "" {
			return // the first worker, or a call that needed no restart
		}
		c.up[i] = true
		if c.up[0] && c.up[1] {
			close(c.done)
			ss.cur = nil
		}
	}
}

func parseEnd(s string) (seq, code int, ok bool) {
	a, b, found := strings.Cut(s, ":")
	if !found {
		return 0, 0, false
	}
	seq, err1 := strconv.Atoi(a)
	code, err2 := strconv.Atoi(b)
	return seq, code, err1 == nil && err2 == nil
}

// procsDir is the cgroup directory whose cgroup.procs lists the session's processes,
// and the controller name /proc/PID/cgroup shows it under ("" for v2).
func (ss *session) procsDir() (dir, ctrl string) {
	cg := ss.l.cg
	if cg.version == 2 {
		return cg.dir, ""
	}
	return cg.dirs["pids"], "pids"
}

// processes are the host pids of the session's processes the server may interrupt or
// kill: every process of its cgroup but the spawner (in the server's pid namespace)
// and the init (pid 1 of the sandbox's).
func (ss *session) processes() ([]int, error) {
	dir, _ := ss.procsDir()
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("%w: read the session's processes: %w", errCgroup, err)
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		ns, ok := nsPid(pid)
		if !ok || len(ns) < 2 || ns[len(ns)-1] == 1 {
			continue
		}
		out = append(out, pid)
	}
	return out, nil
}

// cpu is the CPU time the session has used so far: the cgroup's count where it keeps
// one; else (v1 without cpuacct) the sum, over the cgroup's processes (the init
// included), of their own time and their reaped children's, which a process's exit
// moves into its reaper's, and which misses a child reaped unwaited-for.
func (ss *session) cpu() time.Duration {
	if ss.l.cg.countsCPU() {
		return ss.l.cg.cpu()
	}
	dir, _ := ss.procsDir()
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return 0
	}
	var ticks int64
	for _, f := range strings.Fields(string(b)) {
		st, err := os.ReadFile("/proc/" + f + "/stat")
		if err != nil {
			continue
		}
		ticks += statCPU(string(st))
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every Linux ABI.
const clockTicks = 100

// statCPU is utime + stime + cutime + cstime of a /proc/PID/stat line.
func statCPU(stat string) int64 {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(stat[i+1:])
	// After the command: state is field 3 of the line, utime field 14.
	if len(f) < 15 {
		return 0
	}
	var sum int64
	for _, v := range f[11:15] {
		n, _ := strconv.ParseInt(v, 10, 64)
		sum += n
	}
	return sum
}

// nsPid is the NSpid line of pid's status: its pid in each pid namespace it is in.
func nsPid(pid int) ([]int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			var ids []int
			for _, f := range strings.Fields(rest) {
				n, err := strconv.Atoi(f)
				if err != nil {
					return nil, false
				}
				ids = append(ids, n)
			}
			return ids, len(ids) > 0
		}
	}
	return nil, false
}

// signalWorkers sends sig to the session's processes but the supervisor (and, with
// spareWorker, its children: the worker) and reports how many it found, signalled or
// already gone by the time of the signal (see sweep). Each pid
// is pinned with a pidfd and checked to be in the session's cgroup before the signal,
// so a pid reused by a process outside the sandbox is never signalled. (A process
// cannot leave the cgroup: the sandbox's cgroup namespace roots it there, and it may
// not write any cgroup.procs. Nor can it become the supervisor's child: orphans go to
// the init.)
func (ss *session) signalWorkers(sig syscall.Signal, spareWorker bool) int {
	dir, ctrl := ss.procsDir()
	procs, err := ss.processes()
	if err != nil {
		ss.sb.log.Warn("cannot list a session's processes", "id", ss.l.spec.ID, "err", err)
		return 0
	}
	n := 0
	for _, pid := range procs {
		if pid == ss.super || spareWorker && hostParent(pid) == ss.super {
			continue
		}
		n++
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup"); err == nil && inCgroup(string(b), dir, ctrl) {
			_ = unix.PidfdSendSignal(fd, sig, nil, 0)
		}
		unix.Close(fd)
	}
	return n
}

// sweep kills every process of the session but the supervisor and the worker, again
// and again until a listing of the cgroup shows none, and reports whether it did: a
// call the server stopped must not leave a process that goes on (a fork bomb's
// children, forking while the first pass kills). It stops at a listing, not at a pass
// that signalled nobody: a process that forks and lets its parent exit at once is gone
// from its listed pid before the signal, while its child goes on; such a hopper
// outlived the sweep in 1 of 8 stopped calls before
// (TestSessionStoppedCallLeavesNoPidHopper).
//
// A listing alone cannot prove that: cgroup.procs is read by walking the cgroup's tasks,
// and a child born behind the walk while its parent, not yet reached, exits is in no
// listing, so a hopper survived a sweep whose listing showed nobody (1 of 6 runs of
// that test, 24 stopped calls each). So while the sweep runs no fork can succeed in
// the session's cgroup (its pids.max is 0; the driver forks nothing then), and it stops
// only at two listings in a row, a millisecond apart, that show none: a fork that had
// passed its charge before the write has attached by then. If the limit cannot be
// held or given back, the sweep fails and the session ends.
func (ss *session) sweep() bool {
	dir, _ := ss.procsDir()
	limit := filepath.Join(dir, "pids.max")
	cg := ss.l.cg
	if err := cg.m.writeCg(limit, "0"); err != nil {
		ss.sb.log.Warn("cannot stop a session's forks for the sweep", "id", ss.l.spec.ID, "err", err)
		return false
	}
	deadline := time.Now().Add(restartGrace)
	swept := false
	for empty := 0; empty < 2 && !time.Now().After(deadline); time.Sleep(time.Millisecond) {
		if ss.signalWorkers(syscall.SIGKILL, true) > 0 {
			empty = 0
			continue
		}
		empty++
		swept = empty == 2
	}
	if err := cg.m.writeCg(limit, cg.pids); err != nil {
		ss.sb.log.Warn("cannot give a session back its process limit after the sweep", "id", ss.l.spec.ID, "err", err)
		return false
	}
	return swept
}

// hostParent is pid's parent's pid, in the server's pid namespace; 0 when unknown.
func hostParent(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	st := string(b)
	i := strings.LastIndexByte(st, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(st[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// inCgroup reports whether a /proc/PID/cgroup text places the process in the cgroup
// dir of controller ctrl ("" for v2). The path it shows is relative to the server's
// cgroup namespace, and dir is relative to where the hierarchy is mounted, which is not
// the same root in a container that shares the host's cgroup namespace (podman on a
// cgroup v1 host mounts its own cgroup at /sys/fs/cgroup/pids, while /proc/PID/cgroup
// names it /libpod_parent/libpod-ID): there every session failed to open. So the two
// must end alike in dir's last two names, the Sandbox's own dir (the server's pid and
// a number) and the sandbox's (its random id), which no other cgroup has.
func inCgroup(text, dir, ctrl string) bool {
	tail := "/" + filepath.Base(filepath.Dir(dir)) + "/" + filepath.Base(dir)
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !slices.Contains(strings.Split(parts[1], ","), ctrl) && parts[1] != ctrl {
			continue
		}
		return strings.HasSuffix(parts[2], tail)
	}
	return false
}

// phase of a call being ended by the server.
const (
	running = iota
	interrupted
	killed
)

// Call runs one call: its frame to the driver, its output until its end markers.
func (ss *session) Call(ctx context.Context, c sandbox.SessionCall) (sandbox.Result, error) {
	res := sandbox.Result{ID: c.ID, Status: sandbox.StatusSandboxError, ExitCode: -1}
	if !ss.calls.TryLock() {
		return res, sandbox.ErrSessionBusy
	}
	defer ss.calls.Unlock()
	select {
	case <-ss.ended:
		return res, sandbox.ErrSessionEnded
	default:
	}
	lim := c.Limits
	if err := lim.Validate(); err != nil {
		res.Detail = err.Error()
		return res, err
	}
	cg := ss.l.cg
	cur := &sessionCall{stdout: sandbox.NewCapture(lim.Output), stderr: sandbox.NewCapture(lim.Output),
		ceiling: lim.Output * floodFactor, done: make(chan struct{})}
	ss.mu.Lock()
	ss.seq++
	cur.seq = ss.seq
	ss.cur = cur
	ss.between = 0
	ss.mu.Unlock()
	before, cpu0 := cg.stats(), ss.cpu()
	start := time.Now()
	// The leading newline ends whatever a killed worker left unread of an earlier frame,
	// so that the next worker finds this header at the start of a line.
	frame := fmt.Appendf(nil, "\n%s%s:call:%d:%d:%d\n", sandbox.MarkerPrefix, ss.key, cur.seq, len(c.Code), len(c.Stdin))
	frame = append(append(frame, c.Code...), c.Stdin...)
	select {
	case ss.frames <- frame:
	default:
		// Frames pile up only when no worker reads them: the driver is broken.
		ss.sb.log.Warn("a session's driver does not read its calls; ending the session", "id", ss.l.spec.ID)
		ss.Close()
	}

	wall := time.NewTimer(lim.Wall)
	defer wall.Stop()
	poll := time.NewTicker(cpuPoll)
	defer poll.Stop()
	var grace <-chan time.Time
	phase := running
	var status sandbox.Status
	var detail string
	lastProgress := start
	stop := func(st sandbox.Status, why string, sig syscall.Signal) {
		if status == "" {
			status, detail = st, why
		}
		if sig == syscall.SIGKILL {
			phase = killed
			cg.unthrottle()
			grace = time.After(restartGrace)
		} else if phase == running {
			phase = interrupted
			grace = time.After(sandbox.SessionInterruptGrace)
		}
		ss.signalWorkers(sig, false)
	}
	lost := false
wait:
	for {
		select {
		case <-cur.done:
			break wait
		case <-ss.ended:
			lost = true
			break wait
		case <-wall.C:
			stop(sandbox.StatusTimeout, fmt.Sprintf("interrupted at the wall-clock limit of %s", lim.Wall), syscall.SIGINT)
		case <-ctx.Done():
			stop(sandbox.StatusCancelled, "cancelled: "+context.Cause(ctx).Error(), syscall.SIGINT)
		case <-grace:
			if phase == interrupted {
				stop(status, detail, syscall.SIGKILL)
				continue
			}
			// Killed, and no restart: the supervisor is broken. The session goes.
			ss.sb.log.Warn("a session's driver did not restart after a kill; ending the session", "id", ss.l.spec.ID)
			ss.Close()
			lost = true
			break wait
		case <-poll.C:
			ss.mu.Lock()
			flooded := cur.flooded
			ss.mu.Unlock()
			if flooded && phase != killed {
				stop(sandbox.StatusOutputLimit, fmt.Sprintf("killed for writing more than %d bytes to one stream", cur.ceiling), syscall.SIGKILL)
			}
			if used := ss.cpu() - cpu0; used > lim.CPU && phase == running {
				stop(sandbox.StatusTimeout, fmt.Sprintf("interrupted at the CPU-time limit of %s", lim.CPU), syscall.SIGINT)
			}
			if c.Progress != nil && time.Since(lastProgress) >= progressEvery {
				lastProgress = time.Now()
				c.Progress(sandbox.Progress{Elapsed: time.Since(start), StdoutBytes: cur.stdout.Total(), StderrBytes: cur.stderr.Total()})
			}
		}
	}
	ss.mu.Lock()
	if ss.cur == cur {
		ss.cur = nil
	}
	ss.mu.Unlock()
	if status != "" && !lost {
		// Stopped by the server: nothing the call started goes on, even where the
		// interpreter recovered; background processes of earlier calls go too. What
		// the sweep cannot end ends with the whole session.
		if !ss.sweep() {
			ss.sb.log.Warn("a stopped session call left processes the sweep could not end; ending the session", "id", ss.l.spec.ID)
			ss.Close()
			lost = true
		}
	}
	after := cg.stats()
	res = sandbox.Result{ID: c.ID, Stdout: cur.stdout.Stream(), Stderr: cur.stderr.Stream(),
		Wall: time.Since(start), CPU: max(ss.cpu()-cpu0, 0), PeakMemory: after.PeakMemory}
	if !lost {
		var err error
		if res.Artifacts, err = ss.artifacts(); err != nil {
			ss.sb.log.Warn("cannot read a session call's output files", "id", ss.l.spec.ID, "err", err)
		}
	}
	return ss.outcome(res, cur, lim, status, detail, lost, after.OOMKills > before.OOMKills), nil
}

// artifacts are the files in the session's output directory when a call has ended, by
// the rules of a single-use call's (sandbox.WalkArtifacts). The server walks the
// sandbox's workspace itself, through the init's root: /proc/PID/root of the pinned
// init, checked to be alive after the open (so PID was not reused), then "workspace"
// opened beneath it. Every name below is resolved by os.Root inside the workspace's
// tmpfs: a symlink (out/ itself swapped for one, an absolute one, one to /proc/1/root)
// is never followed outside it, so nothing of the host can come back.
func (ss *session) artifacts() ([]sandbox.Artifact, error) {
	spec := ss.l.spec
	if spec.OutDir == "" {
		return nil, nil
	}
	top, err := os.OpenRoot("/proc/" + strconv.Itoa(ss.init) + "/root")
	if err != nil {
		return nil, fmt.Errorf("open the session's root: %w", err)
	}
	defer top.Close()
	ss.initMu.Lock()
	alive := ss.initFD != nil && unix.PidfdSendSignal(int(ss.initFD.Fd()), 0, nil, 0) == nil
	ss.initMu.Unlock()
	if !alive {
		return nil, errors.New("the session's init has ended")
	}
	ws, err := top.OpenRoot("workspace") // the tmpfs mount_linux.go mounts at /workspace
	if err != nil {
		return nil, fmt.Errorf("open the session's workspace: %w", err)
	}
	defer ws.Close()
	return sandbox.WalkArtifacts(ws, spec.OutDir, spec.Artifacts)
}

// outcome maps how a call ended to its Result. The server's own reason (a limit, a
// cancel) comes first; the driver's word counts only for the exit code of a call that
// ended by itself.
func (ss *session) outcome(res sandbox.Result, cur *sessionCall, lim sandbox.Limits, status sandbox.Status, detail string, lost, oom bool) sandbox.Result {
	restarted := cur.restart[0] != ""
	res.Restarted = restarted
	switch {
	case lost:
		res.Status, res.ExitCode = sandbox.StatusKilled, -1
		res.Detail = "the session's sandbox ended; the session is closed, start a new one"
		if oom {
			res.Status = sandbox.StatusMemoryLimit
			res.Detail = fmt.Sprintf("the session ran out of memory (limit %d bytes) and ended; start a new one", ss.l.spec.Limits.Memory)
		}
		if status != "" {
			res.Status, res.Detail = status, detail+"; "+res.Detail
		}
		return res
	case status != "":
		res.Status, res.Detail, res.ExitCode = status, detail, -1
		if !restarted && cur.end[0] {
			res.ExitCode = cur.code
			res.Detail += "; the interpreter stopped the call and kept its state"
		}
		if restarted {
			res.Detail += "; the interpreter did not stop in time, so the session's processes were killed and restarted (files kept, variables lost)"
		}
		return res
	case restarted:
		how, n, _ := strings.Cut(cur.restart[0], ":")
		code, _ := strconv.Atoi(n)
		switch {
		case oom:
			res.Status, res.ExitCode = sandbox.StatusMemoryLimit, -1
			res.Detail = fmt.Sprintf("killed at the session's memory limit of %d bytes", ss.l.spec.Limits.Memory)
		case how == "signal" && syscall.Signal(code) == syscall.SIGXCPU:
			res.Status, res.ExitCode = sandbox.StatusTimeout, -1
			res.Detail = fmt.Sprintf("the session's interpreter used up its CPU-time budget of %s", ss.l.spec.Limits.CPU)
		case how == "signal":
			res.Status, res.ExitCode, res.Signal = sandbox.StatusKilled, -1, unix.SignalName(syscall.Signal(code))
			res.Detail = "the interpreter was killed by " + res.Signal
		default:
			res.ExitCode = code
			res.Status = sandbox.StatusOK
			if code != 0 {
				res.Status = sandbox.StatusError
			}
			res.Detail = fmt.Sprintf("the interpreter exited with code %d", code)
		}
		res.Detail += "; the session was restarted (files kept, variables lost)"
		return res
	}
	res.ExitCode = cur.code
	res.Status = sandbox.StatusOK
	if cur.code != 0 {
		res.Status = sandbox.StatusError
		res.Detail = fmt.Sprintf("exited with code %d", cur.code)
	}
	if oom {
		// The interpreter outlived a process the kernel killed at the session's limit
		// (memory.oom.group is 0 here): a single-use call's sandbox would have ended.
		res.Status = sandbox.StatusMemoryLimit
		res.Detail = fmt.Sprintf("a process of the session was killed at its memory limit of %d bytes; the interpreter went on (exit code %d)", ss.l.spec.Limits.Memory, cur.code)
	}
	return res
}
