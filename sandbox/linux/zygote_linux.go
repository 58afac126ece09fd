package linux

// #include "init_linux.h"
import "C"

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// zygote is the server's one long-lived helper (the zygote in zygote_linux.c): it forks
// each sandbox's spawner, so no sandbox pays for an exec and the C library's start-up.
// It is the server's own binary, started with argv initName "zygote"; it dies with the
// server (Pdeathsig) and exits when its socket closes. If it dies otherwise, the next
// spawn starts a new one. A one-shot run's ("zygote" "oneshot") outlives the run
// instead and finishes its teardown once the socket closes (leaveBehind, detach).
type zygote struct {
	self string
	log  *slog.Logger
	// oneShot: the zygote of an `airlock run` (zygote_linux.c): it outlives the process
	// and, once that has gone, ends its sandboxes and removes what leave lists.
	oneShot bool

	mu    sync.Mutex
	sock  int    // our end of the SOCK_SEQPACKET pair; -1 when not running
	pid   int    // the running zygote's
	wait  func() // returns once the running zygote has exited (and is reaped)
	leave []byte // one-shot: the ZYG_LEAVE message, sent to every zygote started
	lock  int    // the host-id lock sent with it; -1: none
	left  bool   // the running zygote has the message
}

func newZygote(self string, log *slog.Logger, oneShot bool) *zygote {
	return &zygote{self: self, log: log, sock: -1, oneShot: oneShot, lock: -1}
}

// start runs a zygote. Called with z.mu held.
func (z *zygote) start() error {
	if z.oneShot && z.adopt() {
		return nil
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("zygote socket: %w", err)
	}
	theirs := os.NewFile(uintptr(pair[1]), "zygote-socket")
	defer theirs.Close()
	cmd := &exec.Cmd{
		Path:       z.self,
		Args:       []string{initName, "zygote"},
		Env:        []string{}, // nothing of the server's; the sandboxes get their own
		ExtraFiles: []*os.File{theirs},
		// Pdeathsig follows the thread that started the child: this one stays locked
		// to its goroutine for as long as the zygote lives.
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	}
	if z.oneShot {
		// It finishes after the process has gone: no Pdeathsig, and a process group of
		// its own, out of the reach of a terminal's ^C (the CLI's own handling of it
		// ends the sandbox).
		cmd.Args = append(cmd.Args, "oneshot")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	started := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(done)
	}()
	if err := <-started; err != nil {
		unix.Close(pair[0])
		return fmt.Errorf("start the zygote: %w", err)
	}
	z.running(pair[0], cmd.Process.Pid, func() { <-done })
	return nil
}

// adopt takes the one-shot zygote `airlock run` forked before the Go runtime
// (zygote_linux.c, prefork), if there is one and no one took it yet. Called with z.mu
// held.
func (z *zygote) adopt() bool {
	sock, pid := takePrefork()
	if sock < 0 {
		return false
	}
	// Reaped when stopped, not by a goroutine blocked in wait4 from here on: that held
	// a thread of its own for the whole run (the zygote outlives a run that goes well),
	// one more to start and to end at the exit. One that dies early stays a zombie
	// until then, as harmless.
	z.running(sock, pid, func() { reap(pid) })
	return true
}

// reap waits for the child pid to exit and reaps it. Not os.FindProcess and Wait: the
// os package's first use of a pidfd checks the kernel's support with a test child of
// its own (a clone and a waitid), and a run's first spawn waited for that under z.mu
// (≈ 0.3 ms measured).
func reap(pid int) {
	for {
		if _, err := unix.Wait4(pid, nil, 0, nil); err != unix.EINTR {
			return
		}
	}
}

// running records a zygote just started or adopted and tells a one-shot one what to
// leave behind, if that is known yet. Called with z.mu held.
func (z *zygote) running(sock, pid int, wait func()) {
	z.sock, z.pid, z.wait, z.left = sock, pid, wait, false
	if z.leave != nil {
		// One that did not take it is finished by this process, as any other is.
		_ = z.sendLeave()
	}
}

// prefork guards the C globals prefork_sock and prefork_pid: one backend takes them.
var prefork sync.Mutex

// takePrefork takes the prefork zygote's socket and pid, once (-1: none, or taken).
func takePrefork() (sock, pid int) {
	prefork.Lock()
	defer prefork.Unlock()
	sock, pid = int(C.prefork_sock), int(C.prefork_pid)
	C.prefork_sock, C.prefork_pid = -1, -1
	return sock, pid
}

// dropPrefork ends a prefork zygote no backend will take (the Landlock tier's run):
// its socket's EOF, and nothing left to it, make it exit at once.
func dropPrefork() {
	sock, pid := takePrefork()
	if sock < 0 {
		return
	}
	unix.Close(sock)
	go reap(pid)
}

// leaveBehind tells a one-shot zygote what to remove once the process has gone: the
// trees (a Sandbox's own cgroup dirs, with any sandbox's still in them) and the bases
// this process made (only if empty then), and hands it the host-id lock (-1: none),
// which it holds until its sandboxes are dead. A zygote started later is told too.
func (z *zygote) leaveBehind(trees, bases []string, lock int) error {
	msg := binary.NativeEndian.AppendUint32(nil, C.ZYG_LEAVE)
	for _, list := range []struct {
		kind  byte
		paths []string
	}{{C.LEAVE_TREE, trees}, {C.LEAVE_BASE, bases}} {
		for _, p := range list.paths {
			if strings.IndexByte(p, 0) >= 0 {
				return fmt.Errorf("cgroup path %q", p)
			}
			msg = append(append(append(msg, list.kind), p...), 0)
		}
	}
	if len(msg) == 4 {
		msg = append(msg, 0) // nothing to remove: still the lock, and the reaping
	}
	if len(msg)-4 > C.LEAVE_MAX {
		return fmt.Errorf("%d bytes of cgroup paths for the zygote", len(msg)-4)
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.left && z.sock >= 0 && lock == z.lock && bytes.Equal(msg, z.leave) {
		return nil // the running zygote has this list (Close repeats New's, mostly)
	}
	z.leave, z.lock = msg, lock
	if z.sock < 0 {
		return nil
	}
	return z.sendLeave()
}

// sendLeave sends the ZYG_LEAVE message. Called with z.mu held.
func (z *zygote) sendLeave() error {
	var oob []byte
	if z.lock >= 0 {
		oob = unix.UnixRights(z.lock)
	}
	for {
		err := unix.Sendmsg(z.sock, z.leave, oob, nil, unix.MSG_NOSIGNAL)
		if err != unix.EINTR {
			// One that cannot be told (gone) is not left to finish: Close waits.
			z.left = err == nil
			if err != nil {
				return fmt.Errorf("%w: send: %w", errZygote, err)
			}
			return nil
		}
	}
}

// detach leaves a one-shot zygote that has its ZYG_LEAVE message to finish by itself:
// its socket is closed, which starts its finish, and nothing waits for it. It reports
// false, and does nothing, for any other zygote.
func (z *zygote) detach() bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	if !z.oneShot || !z.left || z.sock < 0 {
		return false
	}
	unix.Close(z.sock)
	z.sock = -1
	return true
}

// prestart starts the zygote ahead of the first spawn; one that fails to start is
// started again (and its error returned) by that spawn.
func (z *zygote) prestart() {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.sock < 0 {
		_ = z.start()
	}
}

// stop closes the zygote's socket, which ends it, and waits for it. Spawners it forked
// die with it, and every sandbox with its spawner.
func (z *zygote) stop() {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.stopLocked()
}

func (z *zygote) stopLocked() {
	if z.sock < 0 {
		return
	}
	unix.Close(z.sock)
	z.wait()
	z.sock = -1
}

var errZygote = errors.New("the zygote did not answer")

// spawn asks for a spawner with the descriptors files as its 0-4 (and, with cgroupFD ≥ 0,
// started in that cgroup v2 directory). It returns a pidfd for the spawner, the only
// handle the server keeps: the spawner is the zygote's child, not ours. meanwhile, when
// not nil, runs once while the zygote forks (ask).
func (z *zygote) spawn(files []int, cgroupFD int, meanwhile func()) (*os.File, error) {
	fds := append(make([]int, 0, len(files)+1), files...)
	var req [4]byte
	binary.NativeEndian.PutUint32(req[:], C.ZYG_SPAWN)
	if cgroupFD >= 0 {
		fds = append(fds, cgroupFD)
		binary.NativeEndian.PutUint32(req[:], C.ZYG_SPAWN_CGROUP)
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	var pidfd *os.File
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		if z.sock < 0 {
			if err = z.start(); err != nil {
				return nil, err
			}
		}
		pidfd, err = z.ask(req[:], fds, &meanwhile)
		if !errors.Is(err, errZygote) {
			break
		}
		// A zygote that died (it should not) is replaced once, here.
		z.log.Warn("sandbox zygote gone; starting a new one", "err", err)
		z.stopLocked()
	}
	return pidfd, err
}

// ask sends one request and reads its answer. Called with z.mu held. A *meanwhile set
// runs once, between a request sent and its answer read, while the zygote forks; the
// retry after a zygote restart does not run it again.
func (z *zygote) ask(req []byte, fds []int, meanwhile *func()) (*os.File, error) {
	// An interrupted send sent nothing (a SOCK_SEQPACKET message goes whole or not at
	// all): ask again. Taking it for a dead zygote would restart it, and every sandbox
	// in flight would die with the old one.
	for {
		err := unix.Sendmsg(z.sock, req, unix.UnixRights(fds...), nil, unix.MSG_NOSIGNAL)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: send: %w", errZygote, err)
		}
		break
	}
	if meanwhile != nil && *meanwhile != nil {
		(*meanwhile)()
		*meanwhile = nil
	}
	var ans [8]byte
	oob := make([]byte, unix.CmsgSpace(4))
	var n, oobn int
	var err error
	for {
		n, oobn, _, _, err = unix.Recvmsg(z.sock, ans[:], oob, unix.MSG_CMSG_CLOEXEC)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: receive: %w", errZygote, err)
	}
	if n != len(ans) {
		return nil, fmt.Errorf("%w: a %d-byte answer", errZygote, n)
	}
	var pidfd = -1
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			if rights, err := unix.ParseUnixRights(&m); err == nil {
				for _, fd := range rights {
					if pidfd < 0 {
						pidfd = fd
					} else {
						unix.Close(fd)
					}
				}
			}
		}
	}
	pid, errno := int32(binary.NativeEndian.Uint32(ans[:4])), syscall.Errno(binary.NativeEndian.Uint32(ans[4:]))
	if pid <= 0 || pidfd < 0 {
		if pidfd >= 0 {
			unix.Close(pidfd)
		}
		if errno == 0 {
			errno = syscall.EIO
		}
		return nil, fmt.Errorf("fork a spawner: %w", errno)
	}
	// Non-blocking, so the runtime's poller can wait for the spawner's exit. One fcntl:
	// a pidfd's only status flag is this one (setNonblockNew).
	if err := setNonblockNew(pidfd); err != nil {
		unix.Close(pidfd)
		return nil, fmt.Errorf("pidfd: %w", err)
	}
	return os.NewFile(uintptr(pidfd), fmt.Sprintf("pidfd:%d", pid)), nil
}

// signalPidfd sends sig through a pidfd; a process that is gone is not an error.
func signalPidfd(f *os.File, sig syscall.Signal) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) { _ = pidfdSignal(fd, sig) })
}

// pidfdSignal is pidfd_send_signal(2) as a plain system call, which never blocks. Through
// x/sys it entered the runtime's system-call bookkeeping, which wakes sysmon when the
// server was idle (internal/rawio says why): a finished sandbox's teardown,
// started by a timer while the server is otherwise idle, woke it once per run for this
// one system call.
func pidfdSignal(fd uintptr, sig syscall.Signal) error {
	if _, _, errno := unix.RawSyscall6(unix.SYS_PIDFD_SEND_SIGNAL, fd, uintptr(sig), 0, 0, 0, 0); errno != 0 {
		return errno
	}
	return nil
}

// waitPidfd blocks until the process behind the pidfd has exited. Only the pidfd
// turning readable ends the wait: an interrupted poll (the runtime's preemption signals
// interrupt syscalls) is asked again, never taken for an exit, because the caller reads
// "exited" as "every process of the sandbox is dead".
func waitPidfd(f *os.File) error { return waitPidfdPolling(f, pollNow) }

// pollNow is ppoll(2) with a timeout of 0, which never blocks, as a plain system call
// (internal/rawio says why). ppoll, not poll: arm64 has no poll.
func pollNow(fds []unix.PollFd, _ int) (int, error) {
	var zero unix.Timespec
	n, _, errno := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)),
		uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
	if errno != 0 {
		return int(n), errno
	}
	return int(n), nil
}

// waitPidfdPolling is waitPidfd with its poll(2) given (a test interrupts it).
func waitPidfdPolling(f *os.File, poll func([]unix.PollFd, int) (int, error)) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var perr error
	err = rc.Read(func(fd uintptr) bool {
		for {
			p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := poll(p, 0)
			switch {
			case err == unix.EINTR:
				continue
			case err != nil:
				perr = err
				return true
			}
			return n > 0 && p[0].Revents&(unix.POLLIN|unix.POLLHUP) != 0
		}
	})
	if err != nil {
		return err
	}
	return perr
}
