package linux

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// A sandbox's pipes have two ends: the server's, which it reads or writes through the
// runtime's poller, and the spawner's, which the server only passes to the zygote and
// closes. os.Pipe would register both with the poller (an epoll_ctl pair, fcntls and an
// fstat for each), and passing an os.File's descriptor switches it back to blocking
// mode: the spawner's end stays a plain descriptor here, and costs two system calls (the
// pipe and its close).

// childPipe makes a pipe whose server end is an *os.File on the poller and whose other
// end, the spawner's, is a plain descriptor (close-on-exec, blocking). serverReads says
// which end is the server's.
func childPipe(what string, serverReads bool) (*os.File, int, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, -1, fmt.Errorf("%s pipe: %w", what, os.NewSyscallError("pipe2", err))
	}
	mine, theirs := p[1], p[0]
	if serverReads {
		mine, theirs = p[0], p[1]
	}
	// Non-blocking before NewFile, which then puts it on the poller.
	if err := unix.SetNonblock(mine, true); err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return nil, -1, fmt.Errorf("%s pipe: %w", what, os.NewSyscallError("fcntl", err))
	}
	return os.NewFile(uintptr(mine), what), theirs, nil
}

// closeFDs closes plain descriptors (the spawner's ends, once the zygote has its copies).
func closeFDs(fds ...int) {
	for _, fd := range fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// pipeSize is the capacity of the pipe f (a page when the user is over
// pipe-user-pages-soft). Not through f.Fd(), which would make f blocking.
func pipeSize(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	size, ferr := 0, error(nil)
	if err := rc.Control(func(fd uintptr) { size, ferr = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0) }); err != nil {
		return 0, err
	}
	return size, ferr
}
