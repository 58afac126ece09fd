package linux

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/sandbox"
)

// The init runs from this package's init function rather than from main: the server's
// other packages (JSON-schema compilers among them) take milliseconds to initialise on
// every start, and a sandbox's init needs none of them. Go initialises this package
// before them (measured with GODEBUG=inittrace=1), and initMain never returns.
func init() {
	if len(os.Args) > 0 && filepath.Base(os.Args[0]) == initName {
		initMain()
	}
}

// initMain is the sandbox's pid 1. It builds the sandbox in a fixed order, starts the
// program, reaps everything, collects artifacts and reports. It never returns.
func initMain() {
	// ptrace and the cgroup namespace are per thread: every step runs on this one.
	// (One P and a lazy collector come from the init's environment, initEnv: setting
	// them here would stop the world twice.)
	runtime.LockOSThread()
	rep := &reporter{fd: reportFD}
	cfgFD := &fdReader{fd: configFD, raw: true}
	cfgPipe := bufio.NewReader(cfgFD)
	cfg, err := readLine[initConfig](cfgPipe)
	if err != nil {
		rep.fail(stageError("read config", err))
	}
	if err := setup(cfg, cfgPipe); err != nil {
		rep.fail(asSetupError(err))
	}
	if cfg.SetupOnly {
		rep.send(message{Kind: "started", SeccompRules: cfg.FilterRules})
		rep.send(message{Kind: "exit", Exit: &exitInfo{Exited: true}})
		os.Exit(0)
	}
	var pre *preloaded
	if len(cfg.Preload) > 0 {
		if pre, err = preload(cfg); err != nil {
			rep.fail(asSetupError(err))
		}
	}
	// Ready: everything up to the call is done (a warm pool waits for this).
	rep.send(message{Kind: "ready"})
	// A warm pool's sandbox may wait here for hours: block as the scheduler expects.
	cfgFD.raw = false
	h, err := readLine[handover](cfgPipe)
	if err != nil {
		if pre != nil {
			unix.Kill(pre.pid, unix.SIGKILL)
		}
		rep.fail(stageError("read handover", err))
	}
	pid, err := start(cfg, h, pre)
	if err != nil {
		rep.fail(asSetupError(err))
	}
	rep.send(message{Kind: "started", SeccompRules: cfg.FilterRules})
	exit := reap(pid)
	var arts []sandbox.Artifact
	if cfg.OutDir != "" {
		arts = collectArtifacts(path.Join("/workspace", cfg.OutDir), cfg.Artifacts)
	}
	rep.send(message{Kind: "exit", Exit: exit, Artifacts: arts})
	os.Exit(0)
}

func asSetupError(err error) *SetupError {
	var se *SetupError
	if !errors.As(err, &se) {
		se = stageError("setup", err)
	}
	return se
}

// readLine reads one JSON line from the parent.
func readLine[T any](r *bufio.Reader) (*T, error) {
	b, err := r.ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	v := new(T)
	if err := json.Unmarshal(b, v); err != nil {
		return nil, err
	}
	return v, nil
}

// setup builds the sandbox up to the point where a program can start. The order
// matters and is fixed:
//
//	mounts → pivot_root → seal root → hostname → dumpable off → close fds ≥ 3 →
//	drop capability bounding set → wait until in the cgroup → cgroup ns →
//	seccomp (with no_new_privs)
//
// and then, in start: workspace files → fork+exec stopped → rlimits → run.
//
// Seccomp comes last so the fewest syscalls run under the filter before exec. The
// filter applies to the init too, which needs nothing it denies from then on. Rlimits
// apply to the program only: the init is a Go process whose reserved address space and
// threads would trip them.
func setup(cfg *initConfig, cfgPipe *bufio.Reader) error {
	if err := buildRoot(rootPlan(cfg, realFS{})); err != nil {
		return err
	}
	if err := pivot(); err != nil {
		return err
	}
	if err := sealRoot(); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(hostname)); err != nil {
		return stageError("sethostname", err)
	}
	// Not dumpable: the program (same uid) cannot open /proc/1/mem or /proc/1/fd.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return stageError("prctl dumpable", err)
	}
	if err := closeExtraFDs(); err != nil {
		return stageError("close fds", err)
	}
	if err := dropBoundingSet(); err != nil {
		return stageError("drop capabilities", err)
	}
	// The parent joins us to the cgroup while we build the root (a v1 cgroup join
	// costs milliseconds of RCU synchronisation), then says so.
	if _, err := readLine[joined](cfgPipe); err != nil {
		return stageError("wait for cgroup", err)
	}
	// A cgroup namespace rooted at the sandbox's own cgroup hides the host's paths.
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return stageError("unshare cgroup namespace", err)
	}
	if len(cfg.Filter) > 0 {
		if err := loadFilter(cfg.Filter); err != nil {
			return stageError("seccomp", err)
		}
	} else if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return stageError("no_new_privs", err)
	}
	return nil
}

// preloaded is an interpreter started ahead of the call, blocked reading its fd 3.
type preloaded struct {
	pid int
	gow int // write end of its fd 3
}

// preload starts cfg.Preload with the config's limits and waits until it has loaded:
// it writes a byte to its fd 4, then blocks reading the program's argv from its fd 3.
// Nothing of the call exists yet: the workspace is empty.
func preload(cfg *initConfig) (*preloaded, error) {
	var argvPipe, loaded [2]int
	if err := unix.Pipe2(argvPipe[:], unix.O_CLOEXEC); err != nil {
		return nil, stageError("preload pipe", err)
	}
	if err := unix.Pipe2(loaded[:], unix.O_CLOEXEC); err != nil {
		unix.Close(argvPipe[0])
		unix.Close(argvPipe[1])
		return nil, stageError("preload pipe", err)
	}
	pid, err := startStopped(cfg.Preload, cfg.Env, []uintptr{0, 1, 2, uintptr(argvPipe[0]), uintptr(loaded[1])})
	unix.Close(argvPipe[0])
	unix.Close(loaded[1])
	defer unix.Close(loaded[0])
	if err != nil {
		unix.Close(argvPipe[1])
		return nil, err
	}
	if err := release(pid, cfg.Limits, cfg.RlimitAS); err != nil {
		unix.Close(argvPipe[1])
		return nil, err
	}
	var b [1]byte
	for {
		n, err := rawRead(loaded[0], b[:])
		if err == unix.EINTR {
			continue
		}
		if n == 1 {
			return &preloaded{pid: pid, gow: argvPipe[1]}, nil
		}
		unix.Close(argvPipe[1])
		unix.Kill(pid, unix.SIGKILL)
		if err == nil {
			err = errors.New("the interpreter exited while loading")
		}
		return nil, stageError("preload "+cfg.Preload[0], err)
	}
}

// start writes the call's files and starts its program: it hands the argv to the
// preloaded interpreter, after lowering its rlimits to the call's, or forks the program.
func start(cfg *initConfig, h *handover, pre *preloaded) (int, error) {
	if err := writeWorkspace(cfg, h); err != nil {
		if pre != nil {
			unix.Kill(pre.pid, unix.SIGKILL)
		}
		return 0, err
	}
	var pid int
	if pre != nil {
		pid = pre.pid
		if err := lowerRlimits(pid, h.Limits, cfg.RlimitAS); err != nil {
			unix.Kill(pid, unix.SIGKILL)
			return 0, stageError("rlimits", err)
		}
		var b []byte
		for _, a := range h.Tail {
			b = append(append(b, a...), 0)
		}
		if err := writeAll(pre.gow, b); err != nil {
			unix.Kill(pid, unix.SIGKILL)
			return 0, stageError("hand over to the preloaded interpreter", err)
		}
		unix.Close(pre.gow)
	} else {
		if len(h.Argv) == 0 {
			return 0, stageError("start", errors.New("empty argv"))
		}
		p, err := startStopped(h.Argv, cfg.Env, []uintptr{0, 1, 2})
		if err != nil {
			return 0, err
		}
		if err := release(p, h.Limits, cfg.RlimitAS); err != nil {
			return 0, err
		}
		pid = p
	}
	// The program owns stdin/stdout/stderr now; the parent sees EOF when it exits.
	for fd := 0; fd <= 2; fd++ {
		unix.Close(fd)
	}
	return pid, nil
}

// release applies the rlimits to a program stopped at exec and lets it run.
func release(pid int, l sandbox.Limits, applyAS bool) error {
	if err := applyRlimits(pid, rlimits(l, applyAS)); err != nil {
		unix.Kill(pid, unix.SIGKILL)
		return stageError("rlimits", err)
	}
	if err := unix.PtraceDetach(pid); err != nil {
		unix.Kill(pid, unix.SIGKILL)
		return stageError("ptrace detach", err)
	}
	return nil
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// startStopped forks and execs argv with PTRACE_TRACEME, so it stops right after
// execve, before its first instruction, until the init has applied its rlimits.
func startStopped(argv, env []string, files []uintptr) (int, error) {
	attr := &syscall.ProcAttr{
		Dir:   "/workspace",
		Env:   append(baseEnv(), env...),
		Files: files,
		Sys: &syscall.SysProcAttr{
			Ptrace: true,
			Setsid: true,
		},
	}
	pid, err := syscall.ForkExec(argv[0], argv, attr)
	if err != nil {
		return 0, stageError("exec "+argv[0], err)
	}
	// Only now, so the program does not inherit SIG_IGN (a caught signal resets to its
	// default at exec; an ignored one stays ignored).
	if err := ignoreSignals(); err != nil {
		unix.Kill(pid, unix.SIGKILL)
		return 0, stageError("ignore signals", err)
	}
	var ws unix.WaitStatus
	if _, err := rawWait4(pid, &ws, 0, nil); err != nil {
		return 0, stageError("wait for exec stop", err)
	}
	if !ws.Stopped() {
		return 0, stageError("wait for exec stop", fmt.Errorf("program did not stop at exec (status %#x)", ws))
	}
	return pid, nil
}

// baseEnv is the whole environment apart from the language's own variables. Nothing of
// the server's environment reaches the program.
func baseEnv() []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=/workspace",
		"TMPDIR=/tmp",
		"LANG=C.UTF-8",
		"USER=sandbox",
		"LOGNAME=sandbox",
	}
}

// reap waits for the program, then kills and reaps everything else in the pid namespace
// (background processes, setsid'd grandchildren). It returns the program's exit and the
// CPU and memory of every process it reaped.
func reap(pid int) *exitInfo {
	info := &exitInfo{}
	for {
		var ws unix.WaitStatus
		var ru unix.Rusage
		// A normal syscall: the program may run for minutes, and while it does the
		// scheduler should see this thread as blocked, not as running.
		wpid, err := unix.Wait4(-1, &ws, unix.WALL, &ru)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			break // ECHILD: nothing left
		}
		if ws.Stopped() {
			// A descendant asked to be traced by us (PTRACE_TRACEME); let it go.
			unix.PtraceDetach(wpid)
			continue
		}
		if wpid == pid {
			info.Exited = ws.Exited()
			info.Code = ws.ExitStatus()
			if ws.Signaled() {
				info.Signal = int(ws.Signal())
			}
			// pid 1 is exempt from kill(-1): this ends every other process here.
			unix.Kill(-1, unix.SIGKILL)
		}
	}
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &ru); err == nil {
		info.CPUUsec = ru.Utime.Usec + ru.Utime.Sec*1e6 + ru.Stime.Usec + ru.Stime.Sec*1e6
		info.MaxRSS = ru.Maxrss * 1024
	}
	return info
}

// writeWorkspace writes the code and the input files into the fresh workspace. No code
// of the call has run yet (a preloaded interpreter is still blocked on its fd 3), so
// there is nothing to race; O_NOFOLLOW|O_EXCL still refuses any surprise.
func writeWorkspace(cfg *initConfig, h *handover) error {
	if h.CodeFile != "" {
		if err := createFile(h.CodeFile, h.Code, 0o644); err != nil {
			return stageError("write code file", err)
		}
	}
	for _, f := range h.Files {
		mode := f.Mode.Perm()
		if mode == 0 {
			mode = 0o644
		}
		if err := createFile(f.Path, f.Data, mode); err != nil {
			return stageError("write input file "+f.Path, err)
		}
	}
	if cfg.OutDir != "" {
		if err := os.MkdirAll(filepath.Join("/workspace", cfg.OutDir), 0o755); err != nil {
			return stageError("create output dir", err)
		}
	}
	return nil
}

func createFile(rel string, data []byte, mode os.FileMode) error {
	clean := path.Clean("/" + rel)
	if clean == "/" || clean != "/"+rel {
		return fmt.Errorf("path %q is not clean and relative", rel)
	}
	full := "/workspace" + clean
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	fd, err := unix.Open(full, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(mode))
	if err != nil {
		return &os.PathError{Op: "create", Path: rel, Err: err}
	}
	f := os.NewFile(uintptr(fd), full)
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return err
	}
	return nil
}

// closeExtraFDs marks every descriptor above 2 close-on-exec, the report pipe included,
// so the program inherits only stdin, stdout and stderr. They are not closed outright:
// some belong to the Go runtime of the init itself.
func closeExtraFDs() error {
	return unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
}

// dropBoundingSet empties the capability bounding set and the ambient and inheritable
// sets, so nothing the program execs can ever regain a capability in this user
// namespace. The inheritable set matters on its own: the kernel does not mask it with
// the bounding set, so a file with inheritable file capabilities would get them back.
// The init keeps its permitted and effective sets for the few steps left.
func dropBoundingSet() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return err
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clear inheritable capabilities: %w", err)
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop cap %d: %w", c, err)
		}
	}
	return nil
}

// reporter writes messages to the parent. A failed write means the parent is gone;
// Pdeathsig ends us anyway.
type reporter struct{ fd int }

func (r *reporter) send(m message) {
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	b = append(b, '\n')
	for len(b) > 0 {
		n, err := unix.Write(r.fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		b = b[n:]
	}
}

func (r *reporter) fail(se *SetupError) {
	r.send(message{Kind: "error", Stage: se.Stage, Errno: int(se.Errno), Err: se.Msg})
	os.Exit(exitSetupFailed)
}

// The init's short blocking calls during setup bypass the Go scheduler. Its goroutine is
// locked to its thread (ptrace and the cgroup namespace are per thread), and there each
// scheduler hand-off is a futex wake-up between threads: costly in a VM, for waits of
// microseconds. Long waits (a pooled sandbox's handover, the program's run) stay normal
// syscalls, so an idle init costs nothing: a thread in a raw syscall looks busy to the
// runtime, which then polls it every 10 ms.

// fdReader reads a descriptor, raw or through the scheduler.
type fdReader struct {
	fd  int
	raw bool
}

func (r *fdReader) Read(p []byte) (int, error) {
	var n int
	var err error
	if r.raw {
		n, err = rawRead(r.fd, p)
	} else {
		for {
			n, err = unix.Read(r.fd, p)
			if !errors.Is(err, unix.EINTR) {
				break
			}
		}
	}
	if err == nil && n == 0 {
		return 0, io.EOF
	}
	return n, err
}

func rawRead(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, errno
		}
		return int(n), nil
	}
}

func rawWait4(pid int, ws *unix.WaitStatus, options int, ru *unix.Rusage) (int, error) {
	for {
		var status int32
		r, _, errno := unix.RawSyscall6(unix.SYS_WAIT4, uintptr(pid), uintptr(unsafe.Pointer(&status)),
			uintptr(options), uintptr(unsafe.Pointer(ru)), 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, errno
		}
		*ws = unix.WaitStatus(status)
		return int(r), nil
	}
}
