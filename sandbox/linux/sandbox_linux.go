// Package linux is airlock's Linux sandbox: user, pid, mount, net, ipc, uts and cgroup
// namespaces, a minimal read-only root, cgroups and rlimits, no_new_privs and seccomp.
//
// One Run is one sandbox. The server keeps one helper, the zygote: its own binary, whose
// C constructor (zygote_linux.c) runs before the Go runtime and never lets it start. For
// each sandbox the zygote forks a spawner, which clones the init (pid 1 of a fresh pid
// namespace); the init builds the root, starts the program and reaps everything, and
// the whole tree dies with the init.
package linux

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/egress"
	"github.com/airlock-mcp/airlock/internal/stamp"
	"github.com/airlock-mcp/airlock/sandbox"
)

// Sandbox is the Linux backend. It is safe for concurrent use.
type Sandbox struct {
	opts    sandbox.Options
	self    string   // the binary started as the zygote
	root    bool     // the server runs as host root
	ids     *hostIDs // the host ids sandboxes' uid and gid map to
	cg      *cgroups
	adapt   adaptations // substitutes for what this container forbids (container_linux.go)
	filters map[sandbox.Network]*bpf
	log     *slog.Logger
	cleanup sync.WaitGroup
	pool    atomic.Pointer[pool]
	zyg     *zygote
	// ll is the Landlock tier's state; nil in the namespace tier (landlock_linux.go).
	ll *landlockTier
	// checked is the self-check New passed or reused (stamp_linux.go): with a stamp
	// store, Probe reports it instead of building another sandbox.
	checked *checkStamp
	// filtersStamped: the seccomp programs are the ones the reused check ran with.
	filtersStamped bool
	// closing is done once Close is called: the results are delivered, so a finished
	// sandbox's teardown no longer waits out teardownDelay (a one-shot run's exit does).
	closing   context.Context
	closeDone context.CancelFunc
	// resolver looks up the names the egress proxy is asked for (nil: the system's);
	// tests inject one.
	resolver egress.Resolver
	// serving counts the calls handed to a sandbox and not yet answered (serve).
	serving atomic.Int64
	// sweepLater starts a one-shot run's stale cgroup sweep, once, at its first spawn
	// (New says why); nil for a server, which sweeps in New.
	sweepLater func()
	// deadNets holds finished sandboxes' network namespaces, to drop them together.
	deadNets deadNets
}

// New checks this host once and returns the backend. It fails closed, with an error
// wrapping sandbox.ErrUnavailable that names the cause and the fix, when user
// namespaces, seccomp or (with Options.Cgroups "require") cgroups are unavailable.
func New(opts sandbox.Options) (*Sandbox, error) {
	s := &Sandbox{
		opts: opts,
		self: "/proc/self/exe",
		root: os.Geteuid() == 0,
		log:  slog.Default().With("component", "sandbox"),
	}
	// A one-shot run's zygote finishes its teardown after the run has exited; not in
	// the Landlock tier, whose run directories (the program's files, their tmpfs
	// mounts) the Go side removes.
	s.zyg = newZygote(s.self, s.log, opts.OneShot && opts.Isolation != sandbox.IsolationLandlock)
	if !s.zyg.oneShot {
		dropPrefork() // the Landlock tier's run execs its zygote as a server does
	}
	s.closing, s.closeDone = context.WithCancel(context.Background())
	// The filters compile and the zygote starts (an exec; `airlock run`'s was forked
	// before the Go runtime and is taken here, zygote.adopt) while the rest is checked:
	// every sandbox needs both, and a one-shot run waits for them first. With a stamp
	// store the filters may come from a recent pass instead (stampedFilters): whether
	// they do is known only once the check's key is, so they compile after it.
	landlock := opts.Isolation == sandbox.IsolationLandlock
	var filters func() (map[sandbox.Network]*bpf, error)
	if opts.Stamps == nil {
		filters = compileFilters(opts.Networks, landlock)
	}
	zygote := make(chan struct{})
	go func() {
		s.zyg.prestart()
		close(zygote)
	}()
	abandon := func() {
		if filters != nil {
			_, _ = filters()
		}
		<-zygote
		s.zyg.stop()
	}
	if opts.Isolation == sandbox.IsolationLandlock {
		t, err := newLandlockTier(opts)
		if err != nil {
			abandon()
			return nil, err
		}
		s.ll = t
	}
	ids, err := newHostIDs(opts)
	if s.ll != nil && !s.root {
		ids, err = landlockIDs(), nil
	}
	if err == nil && s.ll != nil {
		err = s.ll.compileProgram(ids)
	}
	if err != nil {
		abandon()
		return nil, err
	}
	s.ids = ids
	switch opts.Cgroups {
	case "off":
		s.cg = &cgroups{reason: "disabled by configuration (sandbox.cgroups = off)"}
	default:
		s.cg = detectCgroups()
		if opts.Cgroups == "require" && s.cg.version == 0 {
			abandon()
			return nil, fmt.Errorf("%w: cgroups are required but unusable: %s (%s)", sandbox.ErrUnavailable, s.cg.reason, cgroupFix(s.root, container()))
		}
		clean := func() {
			if removed := s.cg.cleanStale(s.log, s.ids.lock); len(removed) > 0 {
				s.log.Info("removed stale sandbox cgroups", "count", len(removed), "dirs", removed)
			}
		}
		if s.zyg.oneShot {
			// Nothing here needs them gone, and a run just before this one may still be
			// finishing (its zygote): its exited process's dirs look stale, and their
			// removal would wait for that teardown (up to 7 ms measured back to back).
			// Not beside the start either: there it took ≈ 0.75 ms of the start's CPU
			// (wait4 rusage, back to back runs, load 8), on the CPU the start's other
			// goroutines and the last run's teardown want. It starts once the first
			// spawn request has gone (launch: the program's, with the check reused from
			// a stamp), while the run waits for its sandbox. Cut off by the exit, the
			// next run's start finishes it.
			s.sweepLater = sync.OnceFunc(func() { go clean() })
		} else {
			clean()
		}
		s.cg.spares.off = opts.OneShot // its one run would pay for spares nobody takes
	}
	s.leaveToZygote()
	key := s.checkKey()
	reused := s.reuseCheck(key)
	if filters == nil {
		filters = s.stampedFilters(reused, landlock)
	}
	if s.filters, err = filters(); err != nil {
		abandon()
		_ = s.cg.removeAll()
		return nil, err
	}
	// The definitive check: build a whole sandbox once, without running a program. A
	// refusal a container gives for one piece (a fresh /proc, the hostname) is met with
	// its substitute, said once here and in every probe, and the check runs again.
	if reused {
		return s, nil
	}
	if err := s.check(key, nil); err != nil {
		s.Wait()
		s.zyg.stop()
		_ = s.cg.removeAll()
		return nil, err
	}
	return s, nil
}

// leaveToZygote tells a one-shot run's zygote what to remove once the run has exited
// (zygote.leaveBehind): from New on, so that a run killed in the middle leaves nothing
// either, and again at Close, for a base made again since (ownDir).
func (s *Sandbox) leaveToZygote() {
	if !s.zyg.oneShot {
		return
	}
	trees, bases := s.cg.teardownDirs()
	if err := s.zyg.leaveBehind(trees, bases, s.ids.lockFD()); err != nil {
		s.log.Warn("the zygote cannot finish the teardown; this process does", "err", err)
	}
}

// check runs the self-test until it passes, adapting to a container's refusals, and
// stamps a pass under key; adjust (tests only, nil otherwise) changes the test's config.
func (s *Sandbox) check(key *stamp.Key, adjust func(*initConfig)) error {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	for busy := 1; ; {
		rules, err := s.selfTest(ctx, adjust)
		if err == nil {
			s.stampCheck(key, rules)
			return nil
		}
		if uidBusy(err) && busy < busyTries {
			busy++
			continue
		}
		next, what, ok := s.adapt.after(err)
		if s.ll != nil {
			ok = false // the adaptations replace namespace pieces this tier has none of
		}
		if !ok {
			if s.ll == nil && errors.Is(err, sandbox.ErrUnavailable) {
				// The operator may choose the weaker tier; it is never entered silently.
				err = fmt.Errorf("%w; where user namespaces cannot be allowed, the weaker Landlock tier can be chosen explicitly: sandbox.isolation = \"landlock\" (AIRLOCK_ISOLATION=landlock; README, Security, lists what it cannot give)", err)
			}
			return err
		}
		s.log.Warn("sandboxes adapted to this container", "change", what, "err", err)
		s.adapt = next
	}
}

func lookupUser(name string) (int, int, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, err
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return 0, 0, err
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return 0, 0, err
	}
	return uid, gid, nil
}

// cloneFlags are the init's namespaces: all of them, but the network one when the
// operator enabled host networking. (The cgroup namespace comes later, from inside
// the cgroup.)
func (s *Sandbox) cloneFlags(network sandbox.Network) uint32 {
	if s.ll != nil {
		return 0 // the Landlock tier creates none
	}
	flags := uint32(unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNS |
		unix.CLONE_NEWIPC | unix.CLONE_NEWUTS)
	if network != sandbox.NetworkHost {
		flags |= unix.CLONE_NEWNET
	}
	return flags
}

// withDefaultNetwork gives a spec without a network mode none, the strictest.
func withDefaultNetwork(spec sandbox.Spec) sandbox.Spec {
	if spec.Network == "" {
		spec.Network = sandbox.NetworkNone
	}
	return spec
}

func validate(spec sandbox.Spec) error {
	if len(spec.Argv) == 0 || !path.IsAbs(spec.Argv[0]) {
		return fmt.Errorf("%w: argv[0] must be an absolute interpreter path", sandbox.ErrInvalidSpec)
	}
	if err := spec.Limits.Validate(); err != nil {
		return err
	}
	if spec.OutDir != "" {
		if err := spec.Artifacts.Validate(); err != nil {
			return err
		}
	}
	switch spec.Network {
	case sandbox.NetworkNone, sandbox.NetworkHost:
	case sandbox.NetworkAllowlist:
		if spec.Egress == nil {
			return fmt.Errorf("%w: network %q without an allowlist", sandbox.ErrInvalidSpec, spec.Network)
		}
	default:
		return fmt.Errorf("%w: network mode %q", sandbox.ErrInvalidSpec, spec.Network)
	}
	if spec.CodeFile != "" && !cleanRelative(spec.CodeFile) {
		return fmt.Errorf("%w: code file %q", sandbox.ErrInvalidSpec, spec.CodeFile)
	}
	if spec.OutDir != "" && !cleanRelative(spec.OutDir) {
		return fmt.Errorf("%w: output dir %q", sandbox.ErrInvalidSpec, spec.OutDir)
	}
	for _, f := range spec.Files {
		if !cleanRelative(f.Path) {
			return fmt.Errorf("%w: file path %q", sandbox.ErrInvalidSpec, f.Path)
		}
	}
	for _, kv := range spec.Env {
		if !strings.Contains(kv, "=") || strings.ContainsRune(kv, 0) {
			return fmt.Errorf("%w: env entry %q", sandbox.ErrInvalidSpec, kv)
		}
	}
	for _, a := range spec.Argv {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("%w: NUL byte in argv", sandbox.ErrInvalidSpec)
		}
	}
	return nil
}

func cleanRelative(p string) bool {
	return p != "" && !strings.HasPrefix(p, "/") && path.Clean(p) == p && p != "." &&
		p != ".." && !strings.HasPrefix(p, "../") && !strings.ContainsRune(p, 0)
}

// Run builds a fresh sandbox for spec, runs it once and destroys it.
func (s *Sandbox) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	return s.runSpec(ctx, spec, nil)
}

// runSpec is Run. adjust, when set, changes the init's config (only tests do:
// WithoutSeccomp, an injected fault) and keeps the call off the warm pool, whose
// sandboxes were built without it.
func (s *Sandbox) runSpec(ctx context.Context, spec sandbox.Spec, adjust func(*initConfig)) (out sandbox.Result, err error) {
	defer func() { out.Isolation = s.isolation() }()
	spec = withDefaultNetwork(spec)
	if spec.ID == "" {
		spec.ID = newID()
	}
	res := sandbox.Result{ID: spec.ID, Status: sandbox.StatusSandboxError, ExitCode: -1}
	if err := validate(spec); err != nil {
		res.Detail = err.Error()
		return res, err
	}
	if s.ll != nil {
		if err := landlockSpec(spec); err != nil {
			res.Detail = err.Error()
			return res, err
		}
	}
	if err := s.prepared(spec.Network); err != nil {
		res.Detail = err.Error()
		return res, err
	}
	if p := s.pool.Load(); p != nil && adjust == nil {
		if l, sl := p.take(spec); l != nil {
			return s.runPooled(ctx, l, sl, spec)
		}
	}
	cfg := s.config(spec)
	if adjust != nil {
		adjust(cfg)
	}
	return s.run(ctx, spec, cfg)
}

// config is the part of spec the init needs to build the sandbox.
func (s *Sandbox) config(spec sandbox.Spec) *initConfig {
	f := s.filters[spec.Network]
	cfg := &initConfig{
		ID: spec.ID, Env: spec.Env, Limits: spec.Limits, Network: spec.Network,
		Mounts: spec.Mounts, Environment: spec.Environment, OutDir: spec.OutDir, Artifacts: spec.Artifacts,
		Filter: f.prog, FilterRules: f.rules,
		NoProc: s.adapt.noProc, KeepHostname: s.adapt.keepHostname,
		Landlock: s.ll != nil,
	}
	if spec.Network == sandbox.NetworkAllowlist {
		cfg.Env = append(slices.Clone(spec.Env), egress.Env()...)
		cfg.ProxyPort = egress.ProxyPort
	}
	return cfg
}

// callOf is the part of spec that is the call itself.
func callOf(spec sandbox.Spec) *handover {
	h := &handover{Argv: spec.Argv, Code: spec.Code, CodeFile: spec.CodeFile, Files: spec.Files, Limits: spec.Limits}
	for i, a := range spec.Argv {
		if i > 0 && a == spec.CodeFile {
			h.Tail = spec.Argv[i:]
			break
		}
	}
	return h
}

// prepare gives spec a cgroup and starts a sandbox for it up to the handover. The
// cgroup is a spare made ahead of the call when one is ready (spares_linux.go); else a
// v1 cgroup is created while the init is cloned (the init waits for its join before it
// runs anything), a v2 one first, because the init is cloned straight into it.
func (s *Sandbox) prepare(spec sandbox.Spec, cfg *initConfig) (*launch, error) {
	// The host ids first: a sandbox, waiting in the pool or running, holds its own
	// until release has seen the last of its processes.
	ids, err := s.ids.acquire()
	if err != nil {
		return nil, err
	}
	var cg *cgroup
	var pending chan cgroupResult
	switch s.cg.version {
	case 1:
		// A spare gets the call's limits while the zygote forks the spawner
		// (launch.start), which joins it only once they are written.
		c, err := s.cg.takeSpare()
		if err != nil {
			s.ids.release(ids, true)
			return nil, fmt.Errorf("%w: %w", errCgroup, err)
		}
		if cg = c; cg != nil {
			break
		}
		pending = make(chan cgroupResult, 1)
		go func() {
			c, err := s.cg.create(spec.ID, spec.Limits)
			pending <- cgroupResult{c, err}
		}()
	case 2:
		c, err := s.cg.create(spec.ID, spec.Limits)
		if err != nil {
			s.ids.release(ids, true)
			return nil, fmt.Errorf("%w: %w", errCgroup, err)
		}
		cg = c
	}
	cfg.RlimitAS = !s.cg.limitsMemory()
	l := newLaunch(s, spec, cg)
	l.ids = ids
	l.cgPending = pending
	l.cgUnlimited = s.cg.version == 1 && cg != nil
	if err := l.start(cfg); err != nil {
		s.release(l)
		return nil, err
	}
	return l, nil
}

// release reaps a finished sandbox's init and removes its cgroup in the background: the
// program and its descendants are already dead, and tearing down the namespaces (an
// RCU grace period or two) need not delay the result.
func (s *Sandbox) release(l *launch) {
	s.cleanup.Add(1)
	go func() {
		defer s.cleanup.Done()
		if l.running {
			// After a reported exit the program is dead and the init waits to be ended:
			// its teardown starts once the caller has had a moment to deliver the result
			// (a one-shot backend has no next call to keep it from: at once). With other
			// calls running it starts at once too: it competes with them whenever it
			// starts, and the timer was a wake-up of the server of its own per call. A
			// call of a one-shot run whose zygote finishes the teardown is ended once the
			// answer is written (Close): its kernel teardown (~1 ms of CPU, the
			// namespaces') then does not compete with the audit line and the answer.
			switch {
			case !l.exitReported():
			case l.called && s.zyg.oneShot:
				<-s.closing.Done()
			case !s.opts.OneShot && s.serving.Load() == 0:
				t := time.NewTimer(teardownDelay)
				select {
				case <-t.C:
				case <-s.closing.Done():
					t.Stop()
				}
			}
			l.kill()
			l.finish()
			if !reaped(l.pidfd) {
				// Its zombie still counts as a process of the uid: the next holder's
				// spawner would find the uid busy (become_host_ids).
				l.mu.Lock()
				l.leftover = true
				l.mu.Unlock()
			}
			l.pidfd.Close()
		}
		// The spawner has exited and been reaped, so the sandbox's host uid has no
		// process left, unless the spawner reported one it could not end.
		l.mu.Lock()
		leftover := l.leftover
		l.mu.Unlock()
		if leftover {
			s.log.Error("a process of a sandbox's host uid outlived it; the uid is not reused", "id", l.spec.ID, "uid", l.ids.uid)
		}
		l.removeRunDir()
		s.ids.release(l.ids, !leftover)
		_ = l.awaitCgroup()
		if l.cg == nil {
			return
		}
		if err := l.cg.destroy(); err != nil {
			s.log.Warn("cgroup left behind", "id", l.spec.ID, "err", err)
		}
		s.cg.refill() // for the spare this sandbox took (spares_linux.go)
	}()
}

// reaped waits until the exited process of pidfd is reaped (its parent, the zygote,
// reaps it from a signal handler: microseconds, or a moment under load), and reports
// whether that happened within reapTimeout. The kernel counts a zombie against its uid
// until then. The polls start at 50 µs and double to a millisecond: a first poll that
// came a moment early cost a whole millisecond of `airlock run`'s exit.
func reaped(pidfd *os.File) bool {
	rc, err := pidfd.SyscallConn()
	if err != nil {
		return false
	}
	gone := func() bool {
		var err error
		_ = rc.Control(func(fd uintptr) { err = pidfdSignal(fd, 0) })
		return errors.Is(err, unix.ESRCH)
	}
	pause := 50 * time.Microsecond
	for deadline := time.Now().Add(reapTimeout); ; pause = min(2*pause, time.Millisecond) {
		if gone() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
	}
}

const reapTimeout = 10 * time.Second

// teardownDelay is how long a finished sandbox's init is left waiting before it is
// ended, so the namespaces' teardown (~1 ms of CPU, a network namespace's mostly) does
// not compete with the delivery of the result it has just reported.
const teardownDelay = 3 * time.Millisecond

// Wait blocks until background cleanup of finished sandboxes is done (tests, shutdown).
// The network namespaces it held are dropped too.
func (s *Sandbox) Wait() {
	s.cleanup.Wait()
	s.deadNets.flush()
}

// run is the cold path: a sandbox built for this call from cfg. A host uid found in use
// is left to its holder and the sandbox built again with another (uidBusy).
func (s *Sandbox) run(ctx context.Context, spec sandbox.Spec, cfg *initConfig) (sandbox.Result, error) {
	for try := 1; ; try++ {
		attempt := spec
		if try > 1 {
			// The failed attempt's cgroup, named after the ID, goes in the background.
			attempt.ID = fmt.Sprintf("%s-%d", spec.ID, try)
		}
		l, err := s.prepare(attempt, cfg)
		if err != nil {
			return sandbox.Result{ID: spec.ID, Status: sandbox.StatusSandboxError, ExitCode: -1, Detail: err.Error()}, err
		}
		res, err := s.serve(ctx, l, attempt)
		res.ID = spec.ID
		if try < busyTries && uidBusy(err) {
			s.log.Warn("a sandbox host uid is in use outside this server; trying another", "id", spec.ID, "uid", l.ids.uid)
			continue
		}
		return res, err
	}
}

// busyTries bounds the attempts at a sandbox whose host uid is found in use. Busy ids
// come in runs: a server that was killed drops its locks at once, while the processes
// of its sandboxes (consecutive ids) take a moment to die. An attempt costs a spawner.
const busyTries = 32

// uidBusy reports whether a sandbox failed because its host uid already had a process
// (become_host_ids in init_linux.c): the lease goes back, the sandbox's host ids are
// not shared.
func uidBusy(err error) bool {
	var se *SetupError
	return errors.As(err, &se) && se.Stage == "become the sandbox's host ids" && se.Errno == syscall.EBUSY
}

// serve hands spec to a started sandbox, waits for its result and releases it. A setup
// failure inside the init is both the result (sandbox_error) and the error.
func (s *Sandbox) serve(ctx context.Context, l *launch, spec sandbox.Spec) (sandbox.Result, error) {
	defer s.release(l)
	s.serving.Add(1)
	defer s.serving.Add(-1)
	if err := l.handover(spec, callOf(spec)); err != nil {
		return sandbox.Result{ID: spec.ID, Status: sandbox.StatusSandboxError, ExitCode: -1, Detail: err.Error()}, err
	}
	r := l.wait(ctx)
	if l.setup != nil {
		return r, l.setup
	}
	return r, nil
}

// selfTest builds a complete sandbox (namespaces, root, seccomp) without running a
// program, and returns the number of seccomp rules loaded.
func (s *Sandbox) selfTest(ctx context.Context, adjust func(*initConfig)) (int, error) {
	spec := withDefaultNetwork(sandbox.Spec{ID: "selftest-" + newID(), Argv: []string{"/"}, Limits: sandbox.SelfTestLimits()})
	cfg := s.config(spec)
	cfg.SetupOnly = true
	if adjust != nil {
		adjust(cfg)
	}
	l, err := s.prepare(spec, cfg)
	if err == nil {
		defer s.release(l)
		l.cfgW.Close()
		l.stdinW.Close()
		res := l.wait(ctx)
		switch {
		case l.setup != nil:
			err = l.setup
		case res.Status != sandbox.StatusOK:
			err = fmt.Errorf("self-test ended with %s: %s %s", res.Status, res.Detail, strings.TrimSpace(string(res.Stderr.Bytes())))
		}
	}
	if err != nil {
		if errors.Is(err, sandbox.ErrUnavailable) {
			return 0, err
		}
		if hint := stageHint(err); hint != "" {
			return 0, fmt.Errorf("%w: %w — %s", sandbox.ErrUnavailable, err, hint)
		}
		if errors.Is(err, errCgroup) {
			return 0, fmt.Errorf("%w: %w (%s, or set sandbox.cgroups = \"off\")", sandbox.ErrUnavailable, err, cgroupFix(s.root, container()))
		}
		if s.ll != nil {
			return 0, fmt.Errorf("%w: the Landlock tier: %w", sandbox.ErrUnavailable, err)
		}
		return 0, fmt.Errorf("%w: %w%s", sandbox.ErrUnavailable, err, diagnose())
	}
	return l.rules, nil
}

// startError explains a failure to create the init, which almost always means user
// namespaces are not allowed here.
func (s *Sandbox) startError(err error) error {
	if errors.Is(err, syscall.ENOSYS) {
		return fmt.Errorf("%w: cannot start a sandbox: clone3: %w (%s)", sandbox.ErrUnavailable, err, clone3Error())
	}
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		// Out of descriptors is a limit, not isolation: the namespace hint would send the
		// operator after the wrong setting.
		return fmt.Errorf("%w: cannot start a sandbox: out of file descriptors: %w (raise the server's open-file limit: ulimit -n; systemd LimitNOFILE=; docker/podman --ulimit nofile=N:N; or allow fewer calls and connections at once)", sandbox.ErrUnavailable, err)
	}
	return fmt.Errorf("%w: cannot create the sandbox's namespaces: %w%s", sandbox.ErrUnavailable, err, diagnose())
}

// diagnose names the host setting that blocks unprivileged user namespaces, and its fix.
// It applies to a root server too: its spawner becomes the sandbox's host uid before it
// creates the namespaces (uids_linux.go).
func diagnose() string {
	var hints []string
	if readInt("/proc/sys/user/max_user_namespaces") == 0 {
		if _, err := os.Stat("/proc/sys/user/max_user_namespaces"); err == nil {
			hints = append(hints, "user namespaces are disabled (user.max_user_namespaces = 0); fix: sysctl -w user.max_user_namespaces=15000")
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(b)) == "0" {
		hints = append(hints, "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0); fix: sysctl -w kernel.unprivileged_userns_clone=1")
	}
	if b, err := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && strings.TrimSpace(string(b)) == "1" {
		hints = append(hints, apparmorHint())
	}
	if c := container(); c != "" && len(hints) == 0 {
		hints = append(hints, "inside a container ("+c+") whose profile refuses user namespaces; "+userNSSettings)
	}
	if len(hints) == 0 {
		return ""
	}
	return " — " + strings.Join(hints, "; ")
}
