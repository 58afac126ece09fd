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
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/sandbox"
)

const (
	// sweepEvery is how often the process table is scanned for descendants when no
	// tracked process forks (a fork triggers a scan at once).
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
	// memory says whether RLIMIT_AS and RLIMIT_DATA hold on this host, as the start-up
	// self-test found; runs set them only then.
	memory memoryCheck
}

// memoryCheck is the self-test's finding about the memory rlimits.
type memoryCheck struct {
	ok  bool
	why string // the evidence either way, for the probe report
}

// New checks the host once: sandbox-exec present, not running as root, and the
// self-test (every profile variant compiles, runs /usr/bin/true and really denies a read
// outside the workspace; the memory rlimits are tried; every program in opts.SelfTest,
// the enabled languages, runs). Any failure is an error wrapping sandbox.ErrUnavailable:
// airlock never runs code unsandboxed.
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
	if s.wsParent, err = s.workspaceParent(); err != nil {
		return nil, err
	}
	if err := s.selfTest(context.Background()); err != nil {
		return nil, fmt.Errorf("%w: seatbelt self-test failed: %w; check that %s works (`%s -p '(version 1)(allow default)' /usr/bin/true`) and that no MDM policy blocks it", sandbox.ErrUnavailable, err, SandboxExec, SandboxExec)
	}
	return s, nil
}

// workspaceParent is $TMPDIR when its path is short enough for unix sockets inside
// workspaces (workspaceFits), else a private /private/tmp/airlock-<uid>. macOS's
// /var/folders/…/T is usually too deep: Python's multiprocessing Manager would fail
// with "AF_UNIX path too long".
func (s *Sandbox) workspaceParent() (string, error) {
	tmp, err := filepath.EvalSymlinks(os.TempDir())
	if err != nil {
		return "", fmt.Errorf("%w: resolve temp dir: %w", sandbox.ErrUnavailable, err)
	}
	if workspaceFits(tmp) {
		return tmp, nil
	}
	short := fmt.Sprintf("/private/tmp/airlock-%d", s.uid)
	if err := privateDir(short, s.uid); err != nil {
		s.log.Warn("workspaces stay under TMPDIR; unix sockets in them may be too long", "dir", tmp, "err", err)
		return tmp, nil
	}
	return short, nil
}

// Self-test limits: the smallest memory limit policy hands out, and room for node, which
// needs an address space of its heap plus about 1 GiB (policy.nodeAddressReserve).
const (
	selfTestMemory       = 512 << 20
	selfTestAddressSpace = 2 << 30
	selfTestWall         = 30 * time.Second
)

// selfTestLimits are sandbox.SelfTestLimits with the self-test's memory and wall clock.
func selfTestLimits(memory, addressSpace int64) sandbox.Limits {
	l := sandbox.SelfTestLimits()
	l.Memory, l.AddressSpace, l.Wall = memory, addressSpace, selfTestWall
	return l
}

// selfTest runs before the server accepts a call: every variant of the profile compiles
// and confines (smoke, network none and host), the memory rlimits are tried where they
// are set, and each enabled language runs an empty program through Run as a call would.
func (s *Sandbox) selfTest(ctx context.Context) error {
	if err := s.smokeAll(ctx); err != nil {
		return err
	}
	s.memory = s.checkMemory(ctx)
	for _, spec := range s.opts.SelfTest {
		if err := s.startInterpreter(ctx, spec); err != nil {
			return err
		}
	}
	return nil
}

// smokeAll runs smoke for each network mode: each renders a different profile.
func (s *Sandbox) smokeAll(ctx context.Context) error {
	for _, network := range []bool{false, true} {
		if err := s.smoke(ctx, network); err != nil {
			return fmt.Errorf("profile with network=%s: %w", networkName(network), err)
		}
	}
	return nil
}

func networkName(on bool) string {
	if on {
		return string(sandbox.NetworkHost)
	}
	return string(sandbox.NetworkNone)
}

// checkMemory runs /usr/bin/true with the memory shim at the smallest limit: whether XNU
// accepts RLIMIT_AS and RLIMIT_DATA decides whether runs set them.
func (s *Sandbox) checkMemory(ctx context.Context) memoryCheck {
	lim := selfTestLimits(selfTestMemory, 0)
	res, err := s.run(ctx, sandbox.Spec{Language: "self-test", Argv: []string{"/usr/bin/true"}, Limits: lim}, true)
	switch {
	case err != nil:
		return memoryCheck{why: "self-test could not run: " + err.Error()}
	case res.Status == sandbox.StatusOK:
		return memoryCheck{ok: true, why: fmt.Sprintf("the kernel accepted %d MiB at start-up", selfTestMemory>>20)}
	case res.Status == sandbox.StatusSandboxError && strings.Contains(res.Detail, stageMemory):
		return memoryCheck{why: res.Detail}
	}
	return memoryCheck{why: fmt.Sprintf("/usr/bin/true under RLIMIT_AS=%d MiB ended %s: %s", selfTestMemory>>20, res.Status, res.Detail)}
}

// startInterpreter runs spec (a language with an empty program, see
// sandbox.Options.SelfTest) under the real profile and the self-test's limits, with
// network none. An interpreter that starts only without the memory rlimits turns them
// off for every run, and the probe report says why.
func (s *Sandbox) startInterpreter(ctx context.Context, spec sandbox.Spec) error {
	if len(spec.Argv) == 0 {
		return fmt.Errorf("self-test %q has no argv", spec.Language)
	}
	interp := spec.Argv[0]
	spec.ID = ""
	spec.Network = sandbox.NetworkNone
	spec.Limits = selfTestLimits(selfTestMemory, selfTestAddressSpace)
	res, err := s.run(ctx, spec, s.memory.ok)
	if err == nil && res.Status != sandbox.StatusOK && s.memory.ok {
		if again, err2 := s.run(ctx, spec, false); err2 == nil && again.Status == sandbox.StatusOK {
			s.memory = memoryCheck{why: fmt.Sprintf("%s does not start under RLIMIT_AS=%d MiB (%s: %s); memory rlimits are off", interp, selfTestAddressSpace>>20, res.Status, res.Detail)}
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("start %s: %w", interp, err)
	}
	if res.Status != sandbox.StatusOK {
		return fmt.Errorf("%s does not start under the profile: %s: %s %s", interp, res.Status, res.Detail, firstLine(res.Stderr.Bytes()))
	}
	return nil
}

func firstLine(b []byte) string {
	line, _, _ := strings.Cut(string(b), "\n")
	return line
}

// smoke proves one profile variant end to end: it compiles, a program runs, a file
// inside the workspace is readable, and a file next to the workspace (standing in for
// ~/.ssh) is not.
func (s *Sandbox) smoke(ctx context.Context, network bool) error {
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
		_, args, err := Profile(Params{Workspace: ws.dir, Home: s.home, Exec: []string{argv[0]}, Network: network})
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
	if err := s.smokeAll(ctx); err != nil {
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
			{Name: "seatbelt-network", Active: seatbelt.Active, Detail: "network denied by the profile unless network=host (then outbound IP except loopback, DNS, UDP replies, loopback listeners); unix sockets only inside the workspace"},
			{Name: "rlimit-cpu", Active: true, Detail: "RLIMIT_CPU: SIGXCPU at the limit, SIGKILL 1 s later"},
			{Name: "rlimit-fsize", Active: true, Detail: "RLIMIT_FSIZE bounds each file the program writes"},
			{Name: "rlimit-nofile", Active: true, Detail: "RLIMIT_NOFILE"},
			{Name: "rlimit-nproc", Active: true, Detail: "RLIMIT_NPROC = the user's current process count + pids (macOS counts every process of the uid)"},
			{Name: "rlimit-core", Active: true, Detail: "RLIMIT_CORE = 0"},
			{Name: "process-group-kill", Active: true, Detail: fmt.Sprintf("descendants tracked by ancestry scans on every fork (kqueue; the forking parent held stopped until its child is recorded) and every %v; at the end the tree is frozen with SIGSTOP and rescanned until nothing new appears, then SIGKILLed; a middle process that forks and exits within microseconds of the fork can still orphan a setsid child unseen", sweepEvery)},
			s.memoryLayer(),
			inactive("memory-cgroup", "macOS has no cgroups", ""),
			inactive("pid-namespace", "macOS has no PID namespaces: the program can see that other processes exist; the profile denies reading their argv/environment (kern.procargs) and listing them (kern.proc.*)", ""),
			inactive("network-namespace", "macOS has no network namespaces; Seatbelt denies network access instead (layer seatbelt-network)", ""),
			inactive("workspace-quota", "no size-capped tmpfs on macOS: total workspace size is not bounded, only each file (RLIMIT_FSIZE)", ""),
		},
	}, nil
}

// memoryLayer reports the memory rlimits as the self-test found them.
func (s *Sandbox) memoryLayer() sandbox.Layer {
	if s.memory.ok {
		return sandbox.Layer{Name: "memory-limit", Active: true,
			Detail: "RLIMIT_AS and RLIMIT_DATA set by a /bin/sh shim right before sandbox-exec (XNU refuses them below the caller's map size, so not in the Go child): " + s.memory.why + "; an allocation past the limit fails, peak RSS is reported"}
	}
	return sandbox.Layer{Name: "memory-limit", Active: false,
		Detail: "RLIMIT_AS/RLIMIT_DATA not in effect: " + s.memory.why + "; memory is not limited (peak RSS is reported)",
		Fix:    "run memory-hungry code on Linux, where cgroups or RLIMIT_AS enforce memory"}
}

// Run builds a fresh workspace and profile for spec, runs it once and removes it.
func (s *Sandbox) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	return s.run(ctx, spec, s.memory.ok)
}

// run is Run with the memory rlimits on or off (the self-test tries both).
func (s *Sandbox) run(ctx context.Context, spec sandbox.Spec, memory bool) (sandbox.Result, error) {
	if spec.ID == "" {
		spec.ID = newID()
	}
	if len(spec.Argv) == 0 || !filepath.IsAbs(spec.Argv[0]) {
		return sandbox.Result{}, fmt.Errorf("%w: argv[0] must be an absolute interpreter path", sandbox.ErrInvalidSpec)
	}
	if spec.Environment != "" {
		// Seatbelt filters paths but cannot show a directory at another one.
		return sandbox.Result{}, fmt.Errorf("%w: environments are not supported by the macOS backend", sandbox.ErrInvalidSpec)
	}
	if spec.OutDir != "" {
		if err := spec.Artifacts.Validate(); err != nil {
			return sandbox.Result{}, err
		}
	}
	if err := spec.Limits.Validate(); err != nil {
		return sandbox.Result{}, err
	}
	lim := spec.Limits
	ws, err := newWorkspace(s.wsParent, spec)
	if err != nil {
		return sandbox.Result{}, err
	}
	defer func() {
		if err := ws.remove(clearFlags); err != nil {
			s.log.Warn("workspace left behind", "id", spec.ID, "err", err)
		}
	}()
	cfg, err := s.config(spec, lim, ws, memory)
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
func (s *Sandbox) config(spec sandbox.Spec, lim sandbox.Limits, ws *workspace, memory bool) (childConfig, error) {
	if spec.Network == sandbox.NetworkAllowlist {
		// The egress bridge needs a network namespace; Seatbelt has none to give.
		return childConfig{}, fmt.Errorf("%w: network %q is Linux-only; use \"none\" or \"host\" on macOS", sandbox.ErrUnavailable, spec.Network)
	}
	real, err := filepath.EvalSymlinks(spec.Argv[0])
	if err != nil {
		return childConfig{}, fmt.Errorf("%w: interpreter %q: %w", sandbox.ErrInvalidSpec, spec.Argv[0], err)
	}
	p := Params{Workspace: ws.dir, Home: s.home, Exec: []string{spec.Argv[0]}, Read: spec.Mounts, Network: spec.Network == sandbox.NetworkHost}
	p.Exec, p.Read = execPlan(real, p.Exec, p.Read)
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
	cfg := childConfig{Argv: argv, Env: env, Dir: ws.dir, Rlimits: rl}
	if memory {
		cfg.Memory = memoryLimit(lim)
	}
	return cfg, nil
}

// xcodeSelectLink names the active developer directory (xcode-select -s writes it); the
// stubs in /usr/bin (python3, git, ...) exec the real tool from there.
const xcodeSelectLink = "/private/var/db/xcode_select_link"

// execPlan adds what running the resolved interpreter real needs beyond itself: the
// binaries it execs on its way (a framework python's Python.app, the tool behind a
// /usr/bin developer stub, the shell behind /bin/sh) and the read roots they live in.
func execPlan(real string, bins, read []string) ([]string, []string) {
	isFile := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && fi.Mode().IsRegular()
	}
	add := func(bin string) {
		r, err := filepath.EvalSymlinks(bin)
		if err != nil {
			return
		}
		bins = append(bins, bin)
		if prefix := interpreterPrefix(r); prefix != "" {
			read = append(read, prefix)
		}
		bins = append(bins, frameworkApps(r)...)
	}
	if prefix := interpreterPrefix(real); prefix != "" {
		read = append(read, prefix)
	}
	bins = append(bins, frameworkApps(real)...)
	// Apple's /usr/bin/python3 asks xcode-select for the developer directory and execs the
	// Command Line Tools' (or Xcode's) python3, itself a Python3.framework stub.
	link, _ := os.Readlink(xcodeSelectLink)
	if tool, devDir, ok := developerTool(real, link, isFile); ok {
		if r, err := filepath.EvalSymlinks(devDir); err == nil {
			read = append(read, r)
		}
		for _, xcrun := range []string{"/usr/bin/xcrun", filepath.Join(devDir, "usr", "bin", "xcrun")} {
			if isFile(xcrun) {
				bins = append(bins, xcrun)
			}
		}
		add(tool)
	}
	// /bin/sh is a launcher that execs the shell named by /private/var/select/sh.
	if real == "/bin/sh" {
		if target, err := filepath.EvalSymlinks("/private/var/select/sh"); err == nil {
			bins = append(bins, target)
		}
	}
	return bins, read
}

func (s *Sandbox) rlimits(lim sandbox.Limits) ([]childRlimit, error) {
	procs, err := countUserProcs(s.uid)
	if err != nil {
		return nil, fmt.Errorf("count processes for RLIMIT_NPROC: %w", err)
	}
	// Every limit is positive here: policy fills them and run refuses a zero.
	cpu := nonNeg(int64((lim.CPU + time.Second - 1) / time.Second))
	one := func(name string, res int, v uint64) childRlimit {
		return childRlimit{Name: name, Resource: res, Cur: v, Max: v}
	}
	return []childRlimit{
		{Name: "cpu", Resource: unix.RLIMIT_CPU, Cur: cpu, Max: cpu + 1},
		one("fsize", unix.RLIMIT_FSIZE, nonNeg(lim.FileSize)),
		one("nofile", unix.RLIMIT_NOFILE, nonNeg(int64(lim.OpenFiles))),
		one("nproc", unix.RLIMIT_NPROC, nonNeg(int64(procs+lim.Pids))),
		one("core", unix.RLIMIT_CORE, 0),
	}, nil
}

// memoryLimit is the RLIMIT_AS and RLIMIT_DATA value of a run: the address space policy
// computed for the language (node needs room beyond its heap), else the memory limit.
func memoryLimit(lim sandbox.Limits) uint64 {
	if lim.AddressSpace > 0 {
		return nonNeg(lim.AddressSpace)
	}
	return nonNeg(lim.Memory)
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
	defer tr.close()
	stopFollow := make(chan struct{})
	followed := make(chan struct{})
	go func() { tr.follow(sweepEvery, stopFollow); close(followed) }()
	defer func() { close(stopFollow); <-followed }()
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
	tick := time.NewTicker(time.Second) // progress reports; the tracker scans on its own
	defer tick.Stop()
	var o outcome
	o.cpuLimit, o.limits, o.memory = lim.CPU, lim, cfg.Memory > 0
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
			if spec.Progress != nil {
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
	o.stderr = res.Stderr
	res.Status, res.ExitCode, res.Detail = classify(o)
	res.Signal = o.signal
	return res, nil
}

// stream is one output pipe: a size-capped Capture that also reports when the program
// has written sandbox.OutputCeiling times the cap, so the flood can be stopped.
type stream struct {
	c       *sandbox.Capture
	ceiling int64
	hit     func()
}

func newStream(limit int64, hit func()) *stream {
	return &stream{c: sandbox.NewCapture(limit), ceiling: limit * sandbox.OutputCeiling, hit: hit}
}

func (s *stream) Write(p []byte) (int, error) {
	n, _ := s.c.Write(p)
	if s.c.Total() > s.ceiling {
		s.hit()
	}
	return n, nil
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
