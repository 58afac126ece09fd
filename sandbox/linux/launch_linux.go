package linux

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/egress"
	"github.com/airlock-mcp/airlock/internal/rawio"
	"github.com/airlock-mcp/airlock/sandbox"
)

const (
	// setupTimeout bounds the time from start to the program running.
	setupTimeout = 10 * time.Second
	// floodFactor: output past this many times the per-stream cap kills the run.
	floodFactor = sandbox.OutputCeiling
	// drainGrace bounds how long Run waits for the output pipes after the init is gone.
	drainGrace = 2 * time.Second
	// progressEvery is the interval of Spec.Progress callbacks.
	progressEvery = time.Second
	// cpuRecheck is the shortest wait between two reads of a run's CPU time (cpuWatch).
	cpuRecheck = 10 * time.Millisecond
)

// launch is one sandbox seen from the parent, from its start to its result.
type launch struct {
	sb   *Sandbox
	spec sandbox.Spec // the call's spec once handed over (before: the pool template)
	cg   *cgroup
	// cgPending delivers a v1 cgroup being created while the init starts; once it has,
	// cg is set (awaitCgroup).
	cgPending chan cgroupResult
	// cgUnlimited: cg is a v1 spare without the call's limits yet (start writes them
	// before the spawner may join it).
	cgUnlimited bool

	stdout, stderr *sandbox.Capture

	pipes                    // our ends of the spawner's descriptors
	waited     chan struct{} // closed when the spawner has exited: the sandbox is gone
	readyCh    chan struct{} // closed when the init reports "ready" (a preloaded interpreter)
	startedCh  chan struct{} // closed when the init reports "started"
	exitCh     chan struct{} // closed when the init reports the program's exit
	running    bool          // the init was created (and so must be reaped)
	reportDone chan struct{}
	// pumped is closed when both output readers have reached EOF (nil until they
	// start); pumping counts them down.
	pumped  chan struct{}
	pumping atomic.Int32

	mu      sync.Mutex
	started time.Time // when the program began running
	killed  sandbox.Status
	detail  string
	exit    *exitInfo
	arts    []sandbox.Artifact
	setup   *SetupError
	rules   int
	applyAS bool     // the config's RlimitAS, for the handover's rlimits
	pidfd   *os.File // the spawner's; closed once the sandbox is released
	ids     lease    // the host uid and gid, held until release
	// leftover: the spawner found a process of the sandbox's host uid after the
	// sandbox and could not end it.
	leftover bool
	// called: a call was handed over (not a self-check's sandbox, nor a pool's unused).
	called bool
	kill   func()
	// runDir is the Landlock tier's run directory, removed at release.
	runDir string

	// cpuBefore is the cgroup's CPU time when the init reported the program started:
	// the sandbox's setup and a preloaded interpreter's start are not the call's.
	cpuBefore time.Duration
	// cpuFrom says cpuBefore was read; until then only the init's rusage of the program
	// counts (a program that ended before the supervisor saw it start).
	cpuFrom bool

	// Network "allowlist": the bridge's listener once the init has passed it, the
	// call's proxy, and what the call did through it.
	listener chan net.Listener
	proxy    *egress.Proxy
	netUse   *sandbox.NetworkUse
	// netns is the sandbox's network namespace once the init has passed it (-1 before):
	// finish hands it to the server's batch (netns_linux.go).
	netns int

	// sink, when set, takes the program's output instead of the captures: a session's
	// (session_linux.go), which splits it per call. It keeps stdin open, too.
	sink atomic.Pointer[func(stderr bool, p []byte)]
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func newLaunch(sb *Sandbox, spec sandbox.Spec, cg *cgroup) *launch {
	return &launch{
		sb: sb, spec: spec, cg: cg,
		stdout:    sandbox.NewCapture(spec.Limits.Output),
		stderr:    sandbox.NewCapture(spec.Limits.Output),
		waited:    make(chan struct{}),
		readyCh:   make(chan struct{}),
		startedCh: make(chan struct{}),
		exitCh:    make(chan struct{}),
		listener:  make(chan net.Listener, 1),
		netns:     -1,
		kill:      func() {},
	}
}

// start creates the init in its namespaces and cgroup and sends it the config; the init
// builds the sandbox up to the handover (and starts a preloaded interpreter).
func (l *launch) start(cfg *initConfig) error {
	l.applyAS = cfg.RlimitAS
	cfg.CloneFlags = l.sb.cloneFlags(cfg.Network)
	cfg.HostUID, cfg.HostGID = l.ids.uid, l.ids.gid
	cfg.OwnUID = l.sb.ids.ownUID()
	cfg.UIDMap, cfg.GIDMap = l.sb.ids.uidmap, l.sb.ids.gidmap
	var err error
	if l.pipes, err = openPipes(); err != nil {
		return err
	}

	cgroupFD := -1
	if l.cg != nil && l.cg.fd >= 0 {
		cgroupFD = l.cg.fd // v2: the spawner starts in the sandbox's cgroup
	}
	// While the zygote forks the spawner (≈ 0.3 ms, the server waiting for its answer),
	// the server makes what the spawner reads first: the config (its root plan looks up
	// the host's paths), a spare's limits, and, behind the config, the cgroup frame. The
	// spawner finds them when it starts instead of waiting for them (perf traces of cold
	// calls: the config's 0.1–0.15 ms and the limits' three writes in cgroupfs, 0.1–0.15
	// ms, came before the request, and the spawner then waited 0.15–0.45 ms for its
	// cgroup). A config that cannot be made ends the spawner as a cgroup that cannot.
	var frame []byte
	var prepErr error
	early, cgSent := false, false
	meanwhile := func() {
		if frame, prepErr = encodeConfig(cfg, realFS{}); prepErr != nil {
			return
		}
		l.rules = cfg.FilterRules
		// The config waits in the pipe when it fits, so the spawner reads it as it
		// starts. (A bigger one is sent after the spawn: the write would block until
		// the spawner reads.)
		if size, err := pipeSize(l.cfgW); err == nil && len(frame) <= size {
			if _, err := l.cfgW.Write(frame); err == nil {
				early = true
			}
		}
		if l.cgUnlimited {
			if prepErr = l.limitSpare(); prepErr != nil {
				return
			}
		}
		if early && l.cgPending == nil {
			prepErr = l.sendCgroup()
			cgSent = prepErr == nil
		}
		if l.cg != nil {
			// The counters the result reads, opened here rather than once the program
			// has started: this burst of the server's work has woken the runtime's
			// sysmon thread anyway, and the one at the start had no other system call
			// (a sysmon wake-up and its 20-µs polls less per call).
			l.cg.openCounters()
		}
	}
	pidfd, err := l.sb.zyg.spawn(l.child[:], cgroupFD, meanwhile)
	// The child's ends belong to the spawner now (or to nobody): only with our copies
	// closed do the pipes reach EOF when the sandbox is gone.
	l.closeChild()
	if err != nil {
		l.Close() // the pipes: every descriptor of this launch
		return l.sb.startError(err)
	}
	l.pidfd = pidfd
	if l.sb.sweepLater != nil {
		l.sb.sweepLater()
	}
	go func() {
		if err := waitPidfd(pidfd); err != nil {
			// Cannot happen with a pidfd the kernel gave us; if it does, the sandbox
			// is ended rather than left unsupervised.
			l.sb.log.Error("cannot wait for a sandbox's spawner; killing it", "id", l.spec.ID, "err", err)
			signalPidfd(pidfd, syscall.SIGKILL)
			for i := 0; i < 100 && waitPidfd(pidfd) != nil; i++ {
				time.Sleep(10 * time.Millisecond)
			}
		}
		close(l.waited)
	}()
	var once sync.Once
	// SIGTERM asks the spawner to kill the init and wait for it, so the spawner's exit
	// (which the goroutine above waits for) means every process of the sandbox is dead.
	l.kill = func() { once.Do(func() { signalPidfd(pidfd, syscall.SIGTERM) }) }
	l.running = true

	// Output readers: the capture keeps the cap, the reader keeps counting, and a flood
	// past floodFactor × cap ends the run.
	l.pumped = make(chan struct{})
	l.pumping.Store(2)
	go l.pump(l.outR, l.stdout)
	go l.pump(l.errR, l.stderr)
	l.reportDone = make(chan struct{})
	go l.readReports(l.repR, l.reportDone)

	stop := func(err error) error {
		l.kill()
		l.cfgW.Close()
		l.stdinW.Close()
		l.finish()
		return err
	}
	// The cgroup the spawner joins follows once created (it was being created while the
	// spawner started). A send that fails means the spawner has already gone, most
	// often after reporting a setup failure: its report, not the broken pipe, is what
	// the result will say.
	if prepErr != nil {
		return stop(prepErr)
	}
	if !early {
		_, _ = l.cfgW.Write(frame)
	}
	if !cgSent {
		if err := l.awaitCgroup(); err != nil {
			return stop(fmt.Errorf("%w: %w", errCgroup, err))
		}
		if l.cgUnlimited { // meanwhile runs once the request is sent: not reached
			if err := l.limitSpare(); err != nil {
				return stop(err)
			}
		}
		if err := l.sendCgroup(); err != nil {
			return stop(err)
		}
	}
	if cfg.Landlock {
		llFrame, err := l.landlockFrame(cfg)
		if err != nil {
			return stop(err)
		}
		_, _ = l.cfgW.Write(llFrame)
	}
	return nil
}

// limitSpare gives the spare the launch took its call's limits. A spare removed from
// outside meanwhile (a host's cleanup of empty cgroups) is replaced by one made now.
func (l *launch) limitSpare() error {
	l.cgUnlimited = false
	err := l.cg.limit(l.spec.Limits)
	if errors.Is(err, os.ErrNotExist) {
		_ = l.cg.destroy()
		l.cg, err = l.sb.cg.create(l.spec.ID, l.spec.Limits)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errCgroup, err)
	}
	return nil
}

// sendCgroup sends the spawner the cgroup to join, once its limits are in place.
func (l *launch) sendCgroup() error {
	frame, err := encodeCgroup(l.cg.tasksFiles())
	if err != nil {
		return err
	}
	_, _ = l.cfgW.Write(frame)
	return nil
}

type cgroupResult struct {
	cg  *cgroup
	err error
}

// awaitCgroup waits for a cgroup being created, if any, and makes it the launch's.
func (l *launch) awaitCgroup() error {
	if l.cgPending == nil {
		return nil
	}
	r := <-l.cgPending
	l.cgPending = nil
	l.cg = r.cg
	return r.err
}

// handover sends the call to a started sandbox; the init writes its files and starts
// the program (or releases the preloaded interpreter). Stdin is fed in the background.
func (l *launch) handover(spec sandbox.Spec, h *handover) error {
	l.mu.Lock()
	l.spec.Limits = spec.Limits
	l.spec.Progress = spec.Progress
	l.spec.ID = spec.ID
	l.called = true
	l.mu.Unlock()
	l.stdout.SetLimit(spec.Limits.Output)
	l.stderr.SetLimit(spec.Limits.Output)
	frame, err := encodeHandover(h, l.applyAS)
	if err != nil {
		l.kill()
		l.cfgW.Close()
		return fmt.Errorf("%w: %w", sandbox.ErrInvalidSpec, err)
	}
	_, err = l.cfgW.Write(frame)
	l.cfgW.Close()
	if err != nil && !errors.Is(err, syscall.EPIPE) {
		l.kill()
		return fmt.Errorf("hand the call to the sandbox init: %w", err)
	}
	l.startProxy(spec)
	if l.sink.Load() != nil {
		return nil // a session writes its calls to stdin itself
	}
	// EPIPE: the init is gone, having reported why (a setup failure) or not; wait says.
	stdin, w := spec.Stdin, l.stdinW
	if len(stdin) == 0 {
		w.Close() // most calls: no goroutine for nothing to write
		return nil
	}
	go func() {
		// A program that never reads its stdin leaves this blocked until the sandbox
		// is gone and the write fails.
		_, _ = w.Write(stdin)
		w.Close()
	}()
	return nil
}

// exitReported reports whether the init has reported the program's exit.
func (l *launch) exitReported() bool { return closed(l.exitCh) }

// closed reports, without waiting, whether ch has been closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// discard kills a sandbox that will never be handed a call, and waits for it.
func (l *launch) discard() {
	l.kill()
	l.cfgW.Close()
	l.stdinW.Close()
	l.finish()
}

// finish waits for the init to be reaped and the pipes to drain.
func (l *launch) finish() {
	<-l.waited
	<-l.reportDone
	l.closeReports()
	l.dropNetns() // the init, pid 1, is reaped: every process of the sandbox is dead
	l.drain()
	l.closeParentEnds()
	l.stopProxy()
	l.dropListener()
}

func (l *launch) closeParentEnds() {
	closeAll(l.outR, l.errR)
}

// closeReports closes the report socket once readReports has finished with it.
func (l *launch) closeReports() {
	if l.repR != nil {
		l.repR.Close()
	}
}

// pipes are one sandbox's descriptors: the spawner's ends, which it inherits as its
// descriptors 0 to 4 (stdin, stdout, stderr, configFD, reportFD) and which stay plain
// descriptors off the runtime's poller (fds_linux.go), and ours.
type pipes struct {
	child  [5]int // -1 once closed
	opened bool   // child holds descriptors (a zero pipes must not close fd 0)
	// cfgW takes the config and handover frames. It is off the poller: the init reads
	// every frame, so a write that waits (only one larger than the pipe) waits for it.
	cfgW       *os.File
	stdinW     *stdinEnd // the program's stdin
	outR, errR *os.File  // the program's stdout and stderr
	repR       *reportConn
}

// openPipes opens every descriptor of a sandbox, or none.
func openPipes() (pipes, error) {
	p := pipes{child: [5]int{-1, -1, -1, -1, -1}, opened: true}
	var err error
	pipe := func(what string, serverReads bool, mine **os.File, theirs *int) {
		if err == nil {
			*mine, *theirs, err = childPipe(what, serverReads)
		}
	}
	var cfg, stdin int
	if cfg, p.child[configFD], err = plainPipe("config", false); err != nil {
		return pipes{}, err
	}
	p.cfgW = os.NewFile(uintptr(cfg), "config")
	if stdin, p.child[0], err = plainPipe("stdin", false); err == nil {
		p.stdinW = newStdinEnd(stdin)
	}
	pipe("stdout", true, &p.outR, &p.child[1])
	pipe("stderr", true, &p.errR, &p.child[2])
	if err == nil {
		p.repR, p.child[reportFD], err = reportPair()
	}
	if err != nil {
		p.Close()
		return pipes{}, err
	}
	return p, nil
}

// closeChild closes our copies of the spawner's ends, once it has its own.
func (p *pipes) closeChild() {
	if !p.opened {
		return
	}
	closeFDs(p.child[:]...)
	p.child = [5]int{-1, -1, -1, -1, -1}
}

// Close closes every descriptor, ours and the spawner's, that is still open.
func (p *pipes) Close() {
	p.closeChild()
	closeAll(p.cfgW, p.outR, p.errR)
	if p.stdinW != nil {
		p.stdinW.Close()
	}
	if p.repR != nil {
		p.repR.Close()
	}
}

// closeAll closes each open file; closing one twice or a nil one is harmless.
func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// wait supervises a handed-over sandbox to its end and maps the outcome. It returns as
// soon as the init has reported the program's exit (every process of the sandbox is
// dead by then) and the output is drained; the init's own exit and the namespaces'
// teardown are left to release.
func (l *launch) wait(ctx context.Context) sandbox.Result {
	if l.supervise(ctx) {
		l.drain()
	} else {
		l.finish()
	}
	l.stopProxy()
	return l.result(sandbox.Result{ID: l.spec.ID, Status: sandbox.StatusSandboxError, ExitCode: -1})
}

// drain waits for stdout and stderr to reach EOF, which they do once the program and
// its descendants are gone.
func (l *launch) drain() {
	if l.pumped == nil || closed(l.pumped) {
		return // most often: the pipes reached EOF with the program's end
	}
	t := time.NewTimer(drainGrace)
	defer t.Stop()
	select {
	case <-l.pumped:
	case <-t.C:
		// Only possible if something outside the sandbox holds a write end.
		l.closeParentEnds()
		<-l.pumped
	}
}

var errCgroup = errors.New("cgroup")

// supervise waits for the program to start and end, enforcing the setup timeout, the
// wall timeout and cancellation by killing the init, which takes the whole pid
// namespace with it. It reports whether the init reported the program's exit.
func (l *launch) supervise(ctx context.Context) bool {
	setup := time.NewTimer(setupTimeout)
	defer setup.Stop()
	var wall <-chan time.Time
	var tick <-chan time.Time
	if l.spec.Progress != nil {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		tick = t.C
	}
	var cpuCheck <-chan time.Time
	var cpuTimer *time.Timer
	startedCh := l.startedCh
	for {
		select {
		case <-l.exitCh:
			return true
		case <-l.waited:
			<-l.reportDone
			return l.exitReported()
		case <-startedCh:
			startedCh = nil
			setup.Stop()
			if l.cg != nil {
				// The counters the result reads: opened as the spawner was forked (a
				// pooled sandbox's while it waited); here only a cgroup that was still
				// being made then. The spares are made up again once the sandbox is
				// released (spares_linux.go says why then).
				l.cg.openCounters()
				// The run's CPU time counts from here: a cold sandbox's setup (the
				// spawner's and the init's work after the spawner joined the cgroup, ≈ 2.5
				// ms) and a pooled interpreter's start are not the call's. Read at the
				// handover, a cold call's cpu_ms had included its setup.
				before := l.cg.cpu()
				l.mu.Lock()
				l.cpuBefore, l.cpuFrom = before, true
				l.mu.Unlock()
			}
			t := time.NewTimer(l.spec.Limits.Wall)
			defer t.Stop()
			wall = t.C
			if cpuTimer = l.cpuWatch(); cpuTimer != nil {
				defer cpuTimer.Stop()
				cpuCheck = cpuTimer.C
			}
		case <-cpuCheck:
			l.checkCPU(cpuTimer)
		case <-setup.C:
			l.stop(sandbox.StatusSandboxError, fmt.Sprintf("sandbox setup did not finish within %s", setupTimeout))
		case <-wall:
			l.stop(sandbox.StatusTimeout, fmt.Sprintf("killed at the wall-clock limit of %s", l.spec.Limits.Wall))
		case <-ctx.Done():
			l.stop(sandbox.StatusCancelled, "cancelled: "+context.Cause(ctx).Error())
		case <-tick:
			l.mu.Lock()
			started := l.started
			l.mu.Unlock()
			if !started.IsZero() {
				l.spec.Progress(sandbox.Progress{Elapsed: time.Since(started),
					StdoutBytes: l.stdout.Total(), StderrBytes: l.stderr.Total()})
			}
		}
	}
}

// cpuWatch enforces the CPU-time limit on the run as a whole, where the cgroup counts
// it: RLIMIT_CPU holds per process, so a program spreading its work over processes
// (children that exit unwaited-for, a pool of workers) would otherwise spend the limit
// once per process until the wall clock. The run cannot use CPU faster than its rate
// (one CPU under the cgroup's quota), so the first read is due when the limit could first
// be reached, and each later one when the rest could: a run that ends sooner costs no
// read at all. Nil where nothing counts the run's CPU time (no cgroup).
func (l *launch) cpuWatch() *time.Timer {
	if l.cg == nil || !l.cg.countsCPU() {
		return nil
	}
	return time.NewTimer(l.spec.Limits.CPU / time.Duration(l.cg.cpuRate()))
}

// checkCPU ends the run once its CPU time has reached the limit, and otherwise sets
// the next check (t) for when the rest of it could be used up.
func (l *launch) checkCPU(t *time.Timer) {
	l.mu.Lock()
	before := l.cpuBefore
	l.mu.Unlock()
	lim := l.spec.Limits.CPU
	used := l.cg.cpu() - before
	if used >= lim {
		l.stop(sandbox.StatusTimeout, fmt.Sprintf("killed at the CPU-time limit of %s", lim))
		return
	}
	t.Reset(max((lim-used)/time.Duration(l.cg.cpuRate()), cpuRecheck))
}

// stop records why the run is being ended (first reason wins) and kills the init.
func (l *launch) stop(status sandbox.Status, detail string) {
	l.mu.Lock()
	if l.killed == "" {
		l.killed = status
		l.detail = detail
	}
	l.mu.Unlock()
	if l.cg != nil {
		// Killed tasks of a throttled cgroup wait for CPU quota before they can exit: a
		// spinning fork bomb took up to 1.3 s to die under the 1-CPU quota.
		l.cg.unthrottle()
	}
	l.kill()
}

// pumpBuffers are the output readers' buffers, reused: two fresh 32 KiB buffers per run
// were a good part of the server's garbage (and of its GC's CPU) under load.
var pumpBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// reportReaders are readReports' readers.
var reportReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}

func (l *launch) pump(r *os.File, c *sandbox.Capture) {
	defer func() {
		if l.pumping.Add(-1) == 0 {
			close(l.pumped)
		}
	}()
	bp := pumpBuffers.Get().(*[]byte)
	defer pumpBuffers.Put(bp)
	buf := *bp
	rr, err := rawio.NewReader(r)
	if err != nil {
		return
	}
	for {
		n, err := rr.Read(buf)
		if sink := l.sink.Load(); n > 0 && sink != nil {
			(*sink)(c == l.stderr, buf[:n])
		} else if n > 0 {
			_, _ = c.Write(buf[:n])
			if ceiling := c.Limit() * floodFactor; ceiling > 0 && c.Total() > ceiling {
				l.stop(sandbox.StatusOutputLimit, fmt.Sprintf("killed for writing more than %d bytes to one stream", ceiling))
				// Keep draining so nothing blocks; the capture still only keeps the cap.
			}
		}
		if err != nil {
			return
		}
	}
}

// readReports reads the init's reports until the socket's end. The socket is closed
// by finish, with the other pipes: a system call here, at the end of the stream, would
// wake the runtime's sysmon thread once more per run (internal/rawio says why).
func (l *launch) readReports(r *reportConn, done chan<- struct{}) {
	defer close(done)
	// Small: frames are read whole (io.ReadFull), a large one straight into its own
	// buffer; a 64 KiB reader per run was garbage the GC paid for. Reused, as the pumps'
	// buffers are.
	br := reportReaders.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() {
		br.Reset(nil)
		reportReaders.Put(br)
	}()
	for {
		m, err := readReport(br)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				l.sb.log.Warn("unreadable report from a sandbox init", "id", l.spec.ID, "err", err)
			}
			return
		}
		l.mu.Lock()
		switch m.Kind {
		case repReady:
			close(l.readyCh)
		case repStarted:
			l.started = time.Now()
			close(l.startedCh)
		case repExit:
			l.exit = m.Exit
			l.arts = m.Artifacts
			close(l.exitCh)
		case repListener:
			l.acceptListener(r)
		case repNetns:
			l.takeNetns(r)
		case repError:
			l.setup = &SetupError{Stage: m.Stage, Errno: syscall.Errno(m.Errno), Msg: m.Err}
		case repLeftover:
			l.leftover = true
		}
		l.mu.Unlock()
	}
}

// result maps what happened to a Result: the measurements here, the status by
// sandbox.Classify.
func (l *launch) result(res sandbox.Result) sandbox.Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	res.Stdout = l.stdout.Stream()
	res.Stderr = l.stderr.Stream()
	if !l.started.IsZero() {
		res.Wall = time.Since(l.started)
	}
	var cs cgroupStats
	if l.cg != nil {
		cs = l.cg.stats()
	}
	if l.exit != nil {
		res.CPU = time.Duration(l.exit.CPUUsec) * time.Microsecond
		res.PeakMemory = l.exit.MaxRSS
	}
	// The larger of two lower bounds: the init's rusage of the program misses children
	// reaped unwaited-for; the cgroup's count, read once the supervisor saw the start,
	// misses the program's first moments (≈ 1.3 ms of a python start under load).
	if cs.CPU > 0 && l.cpuFrom {
		res.CPU = max(res.CPU, cs.CPU-l.cpuBefore)
	}
	if cs.PeakMemory > 0 {
		res.PeakMemory = cs.PeakMemory
	}
	res.Artifacts = l.arts
	res.Network = l.netUse

	o := l.outcome(cs, res)
	res.Status, res.Detail = sandbox.Classify(o, l.spec.Limits)
	if o.Own() {
		if o.Exited {
			res.ExitCode = o.Code
		} else {
			res.ExitCode, res.Signal = -1, o.Signal
		}
	}
	return res
}

// outcome is what the launch saw of the run's end, for sandbox.Classify. The caller
// holds l.mu.
func (l *launch) outcome(cs cgroupStats, res sandbox.Result) sandbox.Outcome {
	o := sandbox.Outcome{
		Stopped: l.killed, StopDetail: l.detail,
		CPU: res.CPU, Stderr: res.Stderr,
		OOMKills: cs.OOMKills, PidsMaxHit: cs.PidsMaxHit,
		RlimitMemory: l.cg == nil, Seccomp: l.rules > 0,
	}
	if l.setup != nil {
		o.Setup = l.setup.Error()
	}
	if ex := l.exit; ex != nil {
		o.Ended, o.Exited, o.Code = true, ex.Exited, ex.Code
		if !ex.Exited {
			o.Signal = unix.SignalName(syscall.Signal(ex.Signal))
		}
	}
	return o
}
