package darwin

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/sandbox"
)

// Floors for zero Limits fields: zero never means unlimited.
const (
	floorWall      = 10 * time.Second
	floorCPU       = 10 * time.Second
	floorMemory    = 512 << 20
	floorPids      = 32
	floorFileSize  = 16 << 20
	floorOpenFiles = 64
	floorOutput    = 64 << 10
	// outputCeiling × Limits.Output is where a flooding program is killed.
	outputCeiling = 16
	// sweepEvery is how often the process table is scanned for descendants.
	sweepEvery = 25 * time.Millisecond
	// pipeGrace is how long Run waits for the output pipes after the program is gone; a
	// grandchild that escaped the kill and holds them cannot block Run for longer.
	pipeGrace = 250 * time.Millisecond
)

// Sandbox is the macOS backend: sandbox-exec with a deny-default profile, rlimits set by
// a re-exec'd child, and process-group kill plus a descendant sweep.
type Sandbox struct {
	opts     sandbox.Options
	self     string // this binary, re-exec'd as initRole
	home     string // the server user's home (its secrets are denied by name too)
	wsParent string // where workspaces are created
	uid      int
	log      *slog.Logger
}

// New checks the host once: sandbox-exec present, not running as root, the profile
// compiles, runs /usr/bin/true and really denies a read outside the workspace. Any
// failure is an error wrapping sandbox.ErrUnavailable: airlock never runs code unsandboxed.
func New(opts sandbox.Options) (*Sandbox, error) {
	s := &Sandbox{opts: opts, uid: os.Getuid(), log: slog.Default().With("component", "sandbox-darwin")}
	if os.Geteuid() == 0 {
		// Root bypasses RLIMIT_NPROC and owns every file Seatbelt might let through.
		return nil, fmt.Errorf("%w: airlock runs as root; on macOS run it as an unprivileged user", sandbox.ErrUnavailable)
	}
	fi, err := os.Stat(SandboxExec)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return nil, fmt.Errorf("%w: %s missing or not executable (%v); it ships with every macOS release, check the system volume", sandbox.ErrUnavailable, SandboxExec, err) //nolint:errorlint // err may be nil here; it is detail, not a cause
	}
	if s.self, err = os.Executable(); err != nil {
		return nil, fmt.Errorf("%w: locate own executable for re-exec: %w", sandbox.ErrUnavailable, err)
	}
	if s.self, err = filepath.EvalSymlinks(s.self); err != nil {
		return nil, fmt.Errorf("%w: resolve own executable: %w", sandbox.ErrUnavailable, err)
	}
	if s.home, err = os.UserHomeDir(); err != nil || s.home == "" {
		s.home = "/var/empty"
	}
	if s.wsParent, err = filepath.EvalSymlinks(os.TempDir()); err != nil {
		return nil, fmt.Errorf("%w: resolve temp dir: %w", sandbox.ErrUnavailable, err)
	}
	if err := s.smoke(context.Background()); err != nil {
		return nil, fmt.Errorf("%w: seatbelt self-test failed: %w; check that %s works (`%s -p '(version 1)(allow default)' /usr/bin/true`) and that no MDM policy blocks it", sandbox.ErrUnavailable, err, SandboxExec, SandboxExec)
	}
	return s, nil
}

// smoke proves the profile end to end: a program runs, a file inside the workspace is
// readable, and a file next to the workspace (standing in for ~/.ssh) is not.
func (s *Sandbox) smoke(ctx context.Context) error {
	outside, err := os.MkdirTemp(s.wsParent, "airlock-canary-")
	if err != nil {
		return fmt.Errorf("create canary: %w", err)
	}
	defer os.RemoveAll(outside)
	canary := filepath.Join(outside, "secret")
	if err := os.WriteFile(canary, []byte("canary"), 0o600); err != nil {
		return fmt.Errorf("write canary: %w", err)
	}
	ws, err := newWorkspace(s.wsParent, sandbox.Spec{CodeFile: "inside", Code: []byte("inside")})
	if err != nil {
		return err
	}
	defer func() { _ = ws.remove(clearFlags) }() // a self-test workspace: nothing to report
	run := func(argv ...string) (int, string, error) {
		_, args, err := Profile(Params{Workspace: ws.dir, Home: s.home, Exec: []string{argv[0]}})
		if err != nil {
			return 0, "", err
		}
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, SandboxExec, append(args, argv...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.Dir = ws.dir
		cmd.Stderr = &stderr
		err = cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), stderr.String(), nil
		}
		return 0, stderr.String(), err
	}
	if code, msg, err := run("/usr/bin/true"); err != nil || code != 0 {
		return fmt.Errorf("/usr/bin/true under the profile: exit %d, %v: %s", code, err, msg) //nolint:errorlint // err may be nil: the exit code is the finding
	}
	if code, msg, err := run("/bin/cat", filepath.Join(ws.dir, "inside")); err != nil || code != 0 {
		return fmt.Errorf("reading inside the workspace was refused: exit %d, %v: %s", code, err, msg) //nolint:errorlint // err may be nil: the exit code is the finding
	}
	if code, _, err := run("/bin/cat", canary); err != nil || code == 0 {
		return fmt.Errorf("a read outside the workspace was allowed (exit %d, %v): the profile does not confine reads", code, err) //nolint:errorlint // err may be nil: the exit code is the finding
	}
	return nil
}

// Probe reruns the self-test and reports each layer as it really is on macOS.
func (s *Sandbox) Probe(ctx context.Context) (sandbox.Report, error) {
	seatbelt := sandbox.Layer{Name: "seatbelt", Required: true, Active: true,
		Detail: SandboxExec + ": deny-default profile, paths as -D parameters, self-test passed (true runs, workspace readable, outside read denied)"}
	if err := s.smoke(ctx); err != nil {
		seatbelt.Active = false
		seatbelt.Detail = err.Error()
		seatbelt.Fix = "run `" + SandboxExec + " -p '(version 1)(allow default)' /usr/bin/true` to check sandbox-exec, then see docs/macos.md"
	}
	inactive := func(name, detail, fix string) sandbox.Layer {
		return sandbox.Layer{Name: name, Active: false, Detail: detail, Fix: fix}
	}
	return sandbox.Report{
		Platform: "darwin",
		Backend:  "darwin-seatbelt",
		Layers: []sandbox.Layer{
			seatbelt,
			{Name: "seatbelt-network", Active: seatbelt.Active, Detail: "network denied by the profile unless network=host (then outbound IP and DNS only; unix sockets stay denied)"},
			{Name: "rlimit-cpu", Active: true, Detail: "RLIMIT_CPU: SIGXCPU at the limit, SIGKILL 1 s later"},
			{Name: "rlimit-fsize", Active: true, Detail: "RLIMIT_FSIZE bounds each file the program writes"},
			{Name: "rlimit-nofile", Active: true, Detail: "RLIMIT_NOFILE"},
			{Name: "rlimit-nproc", Active: true, Detail: "RLIMIT_NPROC = the user's current process count + pids (macOS counts every process of the uid)"},
			{Name: "rlimit-core", Active: true, Detail: "RLIMIT_CORE = 0"},
			{Name: "process-group-kill", Active: true, Detail: fmt.Sprintf("SIGKILL to the process group, then descendants found by ancestry scans every %v; a double-forked setsid daemon orphaned between two scans can survive", sweepEvery)},
			inactive("memory-limit", "macOS does not enforce RLIMIT_AS, and RLIMIT_DATA only bounds brk, not mmap: memory is not limited (set best-effort, peak RSS is reported)", "run memory-hungry code on Linux, where cgroups or RLIMIT_AS enforce memory"),
			inactive("memory-cgroup", "macOS has no cgroups", ""),
			inactive("pid-namespace", "macOS has no PID namespaces: the program can see that other processes exist; the profile denies reading their argv/environment (kern.procargs) and listing them (kern.proc.*)", ""),
			inactive("network-namespace", "macOS has no network namespaces; Seatbelt denies network access instead (layer seatbelt-network)", ""),
			inactive("workspace-quota", "no size-capped tmpfs on macOS: total workspace size is not bounded, only each file (RLIMIT_FSIZE)", ""),
		},
	}, nil
}

// Run builds a fresh workspace and profile for spec, runs it once and removes it.
func (s *Sandbox) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	if spec.ID == "" {
		spec.ID = newID()
	}
	if len(spec.Argv) == 0 || !filepath.IsAbs(spec.Argv[0]) {
		return sandbox.Result{}, fmt.Errorf("%w: argv[0] must be an absolute interpreter path", sandbox.ErrInvalidSpec)
	}
	lim := floors(spec.Limits)
	ws, err := newWorkspace(s.wsParent, spec)
	if err != nil {
		return sandbox.Result{}, err
	}
	defer func() {
		if err := ws.remove(clearFlags); err != nil {
			s.log.Warn("workspace left behind", "id", spec.ID, "err", err)
		}
	}()
	cfg, err := s.config(spec, lim, ws)
	if err != nil {
		return sandbox.Result{}, err
	}
	res, err := s.launch(ctx, spec, lim, cfg)
	if err != nil {
		return sandbox.Result{}, err
	}
	res.ID = spec.ID
	res.Artifacts, err = ws.artifacts(spec.OutDir, spec.Artifacts)
	if err != nil {
		s.log.Warn("artifacts", "id", spec.ID, "err", err)
	}
	s.log.Info("run", "id", spec.ID, "language", spec.Language, "code_bytes", len(spec.Code),
		"status", res.Status, "wall", res.Wall, "cpu", res.CPU)
	return res, nil
}

// config resolves the interpreter and renders the profile and the child's instructions.
func (s *Sandbox) config(spec sandbox.Spec, lim sandbox.Limits, ws *workspace) (childConfig, error) {
	if spec.Network == sandbox.NetworkAllowlist {
		// The egress bridge needs a network namespace; Seatbelt has none to give.
		return childConfig{}, fmt.Errorf("%w: network %q is Linux-only; use \"none\" or \"host\" on macOS", sandbox.ErrUnavailable, spec.Network)
	}
	real, err := filepath.EvalSymlinks(spec.Argv[0])
	if err != nil {
		return childConfig{}, fmt.Errorf("%w: interpreter %q: %w", sandbox.ErrInvalidSpec, spec.Argv[0], err)
	}
	p := Params{Workspace: ws.dir, Home: s.home, Exec: []string{spec.Argv[0]}, Read: spec.Mounts, Network: spec.Network == sandbox.NetworkHost}
	if prefix := interpreterPrefix(real); prefix != "" {
		p.Read = append(p.Read, prefix)
	}
	if app, ok := frameworkApp(real); ok {
		p.Exec = append(p.Exec, app)
	}
	// /bin/sh is a launcher that execs the shell named by /private/var/select/sh.
	if real == "/bin/sh" {
		if target, err := filepath.EvalSymlinks("/private/var/select/sh"); err == nil {
			p.Exec = append(p.Exec, target)
		}
	}
	_, args, err := Profile(p)
	if err != nil {
		return childConfig{}, fmt.Errorf("%w: %w", sandbox.ErrInvalidSpec, err)
	}
	env, err := baseEnv(ws.dir, ws.tmp, spec.Env)
	if err != nil {
		return childConfig{}, err
	}
	argv := append(append([]string{SandboxExec}, args...), spec.Argv...)
	rl, err := s.rlimits(lim)
	if err != nil {
		return childConfig{}, err
	}
	return childConfig{Argv: argv, Env: env, Dir: ws.dir, Rlimits: rl}, nil
}

func (s *Sandbox) rlimits(lim sandbox.Limits) ([]childRlimit, error) {
	procs, err := countUserProcs(s.uid)
	if err != nil {
		return nil, fmt.Errorf("count processes for RLIMIT_NPROC: %w", err)
	}
	// Every limit is positive here: policy clamps them and withDefaults fills zeros.
	cpu := nonNeg(int64((lim.CPU + time.Second - 1) / time.Second))
	mem := nonNeg(lim.AddressSpace)
	if mem == 0 {
		mem = nonNeg(lim.Memory)
	}
	one := func(name string, res int, v uint64) childRlimit {
		return childRlimit{Name: name, Resource: res, Cur: v, Max: v}
	}
	return []childRlimit{
		{Name: "cpu", Resource: unix.RLIMIT_CPU, Cur: cpu, Max: cpu + 1},
		one("fsize", unix.RLIMIT_FSIZE, nonNeg(lim.FileSize)),
		one("nofile", unix.RLIMIT_NOFILE, nonNeg(int64(lim.OpenFiles))),
		one("nproc", unix.RLIMIT_NPROC, nonNeg(int64(procs+lim.Pids))),
		one("core", unix.RLIMIT_CORE, 0),
		{Name: "as", Resource: unix.RLIMIT_AS, Cur: mem, Max: mem, BestEffort: true},
		{Name: "data", Resource: unix.RLIMIT_DATA, Cur: mem, Max: mem, BestEffort: true},
	}, nil
}

// launch starts the init child in its own process group and supervises it: wall timer,
// cancellation, output ceiling, descendant tracking. It always kills the whole tree
// before returning, even when the program exited on its own.
func (s *Sandbox) launch(ctx context.Context, spec sandbox.Spec, lim sandbox.Limits, cfg childConfig) (sandbox.Result, error) {
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return sandbox.Result{}, fmt.Errorf("config pipe: %w", err)
	}
	defer cfgR.Close()
	defer cfgW.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		return sandbox.Result{}, fmt.Errorf("error pipe: %w", err)
	}
	defer errR.Close()
	defer errW.Close()

	ceiling := make(chan struct{})
	var once sync.Once
	hit := func() { once.Do(func() { close(ceiling) }) }
	stdout := newStream(lim.Output, hit)
	stderr := newStream(lim.Output, hit)
	cmd := &exec.Cmd{
		Path:        s.self,
		Args:        []string{initRole},
		Env:         []string{}, // never the server's environment; the child sets the program's
		Stdin:       bytes.NewReader(spec.Stdin),
		Stdout:      stdout,
		Stderr:      stderr,
		ExtraFiles:  []*os.File{cfgR, errW}, // fdConfig, fdErrors
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
		WaitDelay:   pipeGrace,
	}
	if err := cmd.Start(); err != nil {
		return sandbox.Result{}, fmt.Errorf("start sandbox init: %w", err)
	}
	start := time.Now()
	cfgR.Close()
	errW.Close()
	tr := newTracker(cmd.Process.Pid)
	setup := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(errR, 64<<10))
		var se setupError
		if len(b) > 0 && json.Unmarshal(b, &se) == nil {
			setup <- se.Stage + ": " + se.Err
			return
		}
		setup <- ""
	}()
	if err := json.NewEncoder(cfgW).Encode(cfg); err != nil {
		tr.killAll()
		_ = cmd.Wait()
		return sandbox.Result{}, fmt.Errorf("send config to sandbox init: %w", err)
	}
	cfgW.Close()

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	wall := time.NewTimer(lim.Wall)
	defer wall.Stop()
	tick := time.NewTicker(sweepEvery)
	defer tick.Stop()
	var o outcome
	o.cpuLimit = lim.CPU
	lastProgress := start
	cancel := ctx.Done()
	var waitErr error
loop:
	for {
		select {
		case waitErr = <-done:
			break loop
		case <-wall.C:
			o.wallLimit = true
			tr.killAll()
		case <-cancel:
			o.cancelled = true
			cancel = nil
			tr.killAll()
		case <-ceiling:
			o.outputLimit = true
			ceiling = nil
			tr.killAll()
		case now := <-tick.C:
			tr.scan()
			if spec.Progress != nil && now.Sub(lastProgress) >= time.Second {
				lastProgress = now
				spec.Progress(sandbox.Progress{Elapsed: now.Sub(start), StdoutBytes: stdout.c.Total(), StderrBytes: stderr.c.Total()})
			}
		}
	}
	wallTime := time.Since(start)
	// Whatever the program left running dies with it: the sandbox is single-use.
	tr.killAll()
	o.setupErr = <-setup
	if waitErr != nil && !errors.Is(waitErr, exec.ErrWaitDelay) {
		var exit *exec.ExitError
		if !errors.As(waitErr, &exit) {
			return sandbox.Result{}, fmt.Errorf("wait for sandbox: %w", waitErr)
		}
	}
	res := sandbox.Result{Stdout: stdout.c.Stream(), Stderr: stderr.c.Stream(), Wall: wallTime}
	if ps := cmd.ProcessState; ps != nil {
		ws, _ := ps.Sys().(syscall.WaitStatus)
		o.exited = ws.Exited()
		o.code = ws.ExitStatus()
		if ws.Signaled() {
			o.signal = unix.SignalName(ws.Signal())
		}
		res.CPU = ps.UserTime() + ps.SystemTime()
		o.cpuUsed = res.CPU
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			res.PeakMemory = ru.Maxrss // bytes on macOS (kilobytes on Linux)
		}
	}
	if o.setupErr == "" && o.exited && o.code == exitSetup {
		o.setupErr = "init exited before exec without a reason"
	}
	o.denied = sandboxExecFailure(o.code, res.Stderr.Head)
	res.Status, res.ExitCode, res.Detail = classify(o)
	res.Signal = o.signal
	return res, nil
}

// stream is one output pipe: a size-capped Capture that also reports when the program
// has written outputCeiling times the cap, so the flood can be stopped.
type stream struct {
	c       *sandbox.Capture
	ceiling int64
	hit     func()
}

func newStream(limit int64, hit func()) *stream {
	return &stream{c: sandbox.NewCapture(limit), ceiling: limit * outputCeiling, hit: hit}
}

func (s *stream) Write(p []byte) (int, error) {
	n, _ := s.c.Write(p)
	if s.c.Total() > s.ceiling {
		s.hit()
	}
	return n, nil
}

func floors(l sandbox.Limits) sandbox.Limits {
	set := func(v *int64, f int64) {
		if *v <= 0 {
			*v = f
		}
	}
	if l.Wall <= 0 {
		l.Wall = floorWall
	}
	if l.CPU <= 0 {
		l.CPU = floorCPU
	}
	set(&l.Memory, floorMemory)
	set(&l.FileSize, floorFileSize)
	set(&l.Output, floorOutput)
	if l.Pids <= 0 {
		l.Pids = floorPids
	}
	if l.OpenFiles <= 0 {
		l.OpenFiles = floorOpenFiles
	}
	return l
}

// clearFlags removes user immutable/append flags (chflags uchg) that hostile code can set
// on its own files to make the workspace undeletable. chflags follows symlinks, so the
// caller passes only entries that lstat showed are not symlinks.
func clearFlags(f *os.File) error { return unix.Fchflags(int(f.Fd()), 0) }

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// nonNeg converts a limit to an rlimit value; a negative one (never produced by policy)
// becomes 0, the strictest, rather than wrapping to a huge number.
func nonNeg(n int64) uint64 {
	if n < 0 {
		return 0
	}
	return uint64(n)
}
