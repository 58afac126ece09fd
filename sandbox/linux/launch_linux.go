package linux

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/sandbox"
)

const (
	// setupTimeout bounds the time from start to the program running.
	setupTimeout = 10 * time.Second
	// floodFactor: output past this many times the per-stream cap kills the run.
	floodFactor = 16
	// drainGrace bounds how long Run waits for the output pipes after the init is gone.
	drainGrace = 2 * time.Second
	// progressEvery is the interval of Spec.Progress callbacks.
	progressEvery = time.Second
)

// launch is everything the parent needs while one sandbox runs.
type launch struct {
	sb   *Sandbox
	spec sandbox.Spec
	cg   *cgroup

	stdout, stderr *sandbox.Capture

	mu      sync.Mutex
	started time.Time // when the program began running (the init said "started")
	killed  sandbox.Status
	detail  string
	exit    *exitInfo
	arts    []sandbox.Artifact
	setup   *SetupError
	rules   int
	kill    func()
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// run starts the init, feeds it the config, supervises it and maps the outcome.
func (l *launch) run(ctx context.Context, cfg *initConfig) (sandbox.Result, error) {
	res := sandbox.Result{ID: cfg.ID, Status: sandbox.StatusSandboxError, ExitCode: -1}
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return res, fmt.Errorf("config pipe: %w", err)
	}
	defer cfgW.Close()
	repR, repW, err := os.Pipe()
	if err != nil {
		cfgR.Close()
		return res, fmt.Errorf("report pipe: %w", err)
	}
	defer repR.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		cfgR.Close()
		repW.Close()
		return res, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		cfgR.Close()
		repW.Close()
		outR.Close()
		outW.Close()
		return res, fmt.Errorf("stderr pipe: %w", err)
	}

	cmd := &exec.Cmd{
		Path:        l.sb.self,
		Args:        []string{initName},
		Env:         []string{},
		Stdout:      outW,
		Stderr:      errW,
		ExtraFiles:  []*os.File{cfgR, repW},
		SysProcAttr: l.sb.procAttr(l.cg, cfg.Network),
	}
	if len(l.spec.Stdin) > 0 {
		cmd.Stdin = bytes.NewReader(l.spec.Stdin)
	}

	// Pdeathsig follows the thread that started the child: start and wait on one locked
	// thread, so the sandbox dies with the server and never earlier.
	startErr := make(chan error, 1)
	waited := make(chan *os.ProcessState, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			startErr <- err
			return
		}
		startErr <- nil
		st, _ := cmd.Process.Wait()
		waited <- st
	}()
	err = <-startErr
	cfgR.Close()
	repW.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return res, l.sb.startError(err)
	}
	var killOnce sync.Once
	l.kill = func() { killOnce.Do(func() { cmd.Process.Kill() }) }

	// The config goes first so the init builds its root while we join it to its cgroup;
	// closing the pipe afterwards lets it start the program.
	b, _ := json.Marshal(cfg)
	b = append(b, '\n')
	if _, err := cfgW.Write(b); err != nil {
		l.kill()
		<-waited
		outR.Close()
		errR.Close()
		return res, fmt.Errorf("send config to the sandbox init: %w", err)
	}
	if l.cg != nil {
		if err := l.cg.join(cmd.Process.Pid); err != nil {
			l.kill()
			<-waited
			outR.Close()
			errR.Close()
			return res, fmt.Errorf("%w: %v", errCgroup, err)
		}
	}
	cfgW.Close()

	// Output readers: the capture keeps the cap, the reader keeps counting, and a flood
	// past floodFactor × cap ends the run.
	ceiling := l.spec.Limits.Output * floodFactor
	var drained sync.WaitGroup
	drained.Add(2)
	go l.pump(outR, l.stdout, ceiling, &drained)
	go l.pump(errR, l.stderr, ceiling, &drained)

	reportDone := make(chan struct{})
	startedCh := make(chan struct{})
	go l.readReports(repR, startedCh, reportDone)

	l.supervise(ctx, startedCh, waited)
	state := <-waited
	<-reportDone

	drainedCh := make(chan struct{})
	go func() { drained.Wait(); close(drainedCh) }()
	select {
	case <-drainedCh:
	case <-time.After(drainGrace):
		// Only possible if something outside the sandbox holds a write end; the pid
		// namespace is gone, so do not wait for it.
		outR.Close()
		errR.Close()
		<-drainedCh
	}
	outR.Close()
	errR.Close()
	return l.result(res, state), nil
}

var errCgroup = errors.New("cgroup")

// supervise waits for the program to start and end, enforcing the setup timeout, the
// wall timeout and cancellation by killing the init, which takes the whole pid
// namespace with it.
func (l *launch) supervise(ctx context.Context, startedCh <-chan struct{}, waited chan *os.ProcessState) {
	setup := time.NewTimer(setupTimeout)
	defer setup.Stop()
	var wall <-chan time.Time
	var tick <-chan time.Time
	if l.spec.Progress != nil {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case st := <-waited:
			waited <- st // give it back to run
			return
		case <-startedCh:
			startedCh = nil
			setup.Stop()
			t := time.NewTimer(l.spec.Limits.Wall)
			defer t.Stop()
			wall = t.C
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

// stop records why the run is being ended (first reason wins) and kills the init.
func (l *launch) stop(status sandbox.Status, detail string) {
	l.mu.Lock()
	if l.killed == "" {
		l.killed = status
		l.detail = detail
	}
	l.mu.Unlock()
	l.kill()
}

func (l *launch) pump(r *os.File, c *sandbox.Capture, ceiling int64, wg *sync.WaitGroup) {
	defer wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			c.Write(buf[:n])
			if ceiling > 0 && c.Total() > ceiling {
				l.stop(sandbox.StatusOutputLimit, fmt.Sprintf("killed for writing more than %d bytes to one stream", ceiling))
				// Keep draining so nothing blocks; the capture still only keeps the cap.
			}
		}
		if err != nil {
			return
		}
	}
}

func (l *launch) readReports(r io.Reader, startedCh chan<- struct{}, done chan<- struct{}) {
	defer close(done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<30)
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			continue
		}
		l.mu.Lock()
		switch m.Kind {
		case "started":
			l.started = time.Now()
			l.rules = m.SeccompRules
			close(startedCh)
		case "exit":
			l.exit = m.Exit
			l.arts = m.Artifacts
		case "error":
			l.setup = &SetupError{Stage: m.Stage, Errno: syscall.Errno(m.Errno), Msg: m.Err}
		}
		l.mu.Unlock()
	}
}

// result maps what happened to a Result. The order of the checks is the order of
// precedence: a kill by the supervisor explains everything after it.
func (l *launch) result(res sandbox.Result, state *os.ProcessState) sandbox.Result {
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
	} else if state != nil {
		res.CPU = state.SystemTime() + state.UserTime()
	}
	if cs.CPU > 0 {
		res.CPU = cs.CPU
	}
	if cs.PeakMemory > 0 {
		res.PeakMemory = cs.PeakMemory
	}
	res.Artifacts = l.arts

	switch {
	case l.setup != nil:
		res.Status = sandbox.StatusSandboxError
		res.Detail = l.setup.Error()
		return res
	case l.killed != "":
		res.Status = l.killed
		res.Detail = l.detail
		if cs.OOMKills > 0 && l.killed == sandbox.StatusSandboxError {
			res.Status = sandbox.StatusMemoryLimit
		}
		return res
	case l.exit == nil:
		res.Status = sandbox.StatusSandboxError
		res.Detail = "sandbox init ended without a report"
		if cs.OOMKills > 0 {
			res.Status = sandbox.StatusMemoryLimit
			res.Detail = fmt.Sprintf("the sandbox ran out of memory (limit %d bytes)", l.spec.Limits.Memory)
		} else if cs.PidsMaxHit > 0 {
			res.Status = sandbox.StatusKilled
			res.Detail = fmt.Sprintf("the sandbox ended at its process limit (%d)", l.spec.Limits.Pids)
		}
		return res
	}
	ex := l.exit
	if ex.Exited {
		res.ExitCode = ex.Code
		res.Status = sandbox.StatusOK
		if ex.Code != 0 {
			res.Status = sandbox.StatusError
			res.Detail = fmt.Sprintf("exited with code %d", ex.Code)
			if l.cg == nil && looksLikeOOM(res.Stderr) {
				res.Status = sandbox.StatusMemoryLimit
				res.Detail = fmt.Sprintf("ran out of memory (address-space limit %d bytes)", l.spec.Limits.Memory)
			}
		}
		if cs.PidsMaxHit > 0 && res.Status != sandbox.StatusOK {
			res.Detail += fmt.Sprintf("; the process limit (%d) was reached", l.spec.Limits.Pids)
		}
		return res
	}
	sig := syscall.Signal(ex.Signal)
	res.Signal = unix.SignalName(sig)
	res.ExitCode = -1
	switch {
	case cs.OOMKills > 0 && sig == syscall.SIGKILL:
		res.Status = sandbox.StatusMemoryLimit
		res.Detail = fmt.Sprintf("killed at the memory limit of %d bytes", l.spec.Limits.Memory)
	case sig == syscall.SIGXCPU || (sig == syscall.SIGKILL && res.CPU >= l.spec.Limits.CPU):
		res.Status = sandbox.StatusTimeout
		res.Detail = fmt.Sprintf("killed at the CPU-time limit of %s", l.spec.Limits.CPU)
	case sig == syscall.SIGXFSZ:
		res.Status = sandbox.StatusKilled
		res.Detail = fmt.Sprintf("killed for writing a file larger than %d bytes", l.spec.Limits.FileSize)
	case sig == syscall.SIGSYS:
		res.Status = sandbox.StatusKilled
		res.Detail = "killed by the seccomp filter (a syscall from a foreign architecture)"
	case sig == syscall.SIGABRT && looksLikeOOM(res.Stderr):
		res.Status = sandbox.StatusMemoryLimit
		res.Detail = fmt.Sprintf("aborted when out of memory (limit %d bytes)", l.spec.Limits.Memory)
	default:
		res.Status = sandbox.StatusKilled
		res.Detail = "killed by " + res.Signal
	}
	return res
}

// looksLikeOOM recognises interpreters' own out-of-memory messages, for the rlimit-only
// fallback where no cgroup counts OOM kills. A program can fake it, but only about itself.
func looksLikeOOM(s sandbox.Stream) bool {
	tail := s.Tail
	if len(tail) == 0 {
		tail = s.Head
	}
	if len(tail) > 4096 {
		tail = tail[len(tail)-4096:]
	}
	for _, m := range []string{"MemoryError", "heap out of memory", "Cannot allocate memory", "std::bad_alloc"} {
		if strings.Contains(string(tail), m) {
			return true
		}
	}
	return false
}
