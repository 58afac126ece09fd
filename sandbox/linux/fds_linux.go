package linux

import (
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A sandbox's pipes have two ends: the server's, which it reads or writes through the
// runtime's poller, and the spawner's, which the server only passes to the zygote and
// closes. os.Pipe would register both with the poller (an epoll_ctl pair, fcntls and an
// fstat for each), and passing an os.File's descriptor switches it back to blocking
// mode: the spawner's end stays a plain descriptor here, and costs two system calls (the
// pipe and its close). The server's ends of the config pipe (the init reads every
// frame) and of stdin (most calls write none: stdinEnd) are not on the poller either:
// four system calls less per run each (two fcntls and the epoll_ctl pair).

// childPipe makes a pipe whose server end is an *os.File on the poller and whose other
// end, the spawner's, is a plain descriptor (close-on-exec, blocking). serverReads says
// which end is the server's.
func childPipe(what string, serverReads bool) (*os.File, int, error) {
	mine, theirs, err := plainPipe(what, serverReads)
	if err != nil {
		return nil, -1, err
	}
	f, err := polledFile(mine, what)
	if err != nil {
		unix.Close(theirs)
		return nil, -1, err
	}
	return f, theirs, nil
}

// plainPipe makes a pipe whose both ends are plain descriptors (close-on-exec,
// blocking): the server's end first. serverReads says which end is the server's.
func plainPipe(what string, serverReads bool) (mine, theirs int, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return -1, -1, fmt.Errorf("%s pipe: %w", what, os.NewSyscallError("pipe2", err))
	}
	if serverReads {
		return p[0], p[1], nil
	}
	return p[1], p[0], nil
}

// polledFile puts a descriptor just made by pipe2 on the runtime's poller as an
// *os.File; on failure it closes the descriptor.
func polledFile(fd int, what string) (*os.File, error) {
	// Non-blocking before NewFile, which then puts it on the poller.
	if err := setNonblockNew(fd); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%s pipe: %w", what, os.NewSyscallError("fcntl", err))
	}
	return os.NewFile(uintptr(fd), what), nil
}

// setNonblockNew makes a descriptor just created by pipe2 or socketpair, or a pidfd,
// non-blocking with one fcntl: it has no status flag yet but its access mode, which
// F_SETFL ignores (unix.SetNonblock reads the flags first).
func setNonblockNew(fd int) error {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, unix.O_NONBLOCK)
	return err
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

// recvmsgRaw receives one message from the socket behind rc with plain recvmsg(2)s
// through the poller (internal/rawio says why), waiting while there is none; io.EOF at
// the end of the stream.
func recvmsgRaw(rc syscall.RawConn, b, oob []byte, flags int) (n, oobn int, err error) {
	var iov unix.Iovec
	if len(b) > 0 {
		iov.Base = &b[0]
		iov.SetLen(len(b))
	}
	msg := unix.Msghdr{Iov: &iov, Iovlen: 1}
	if len(oob) > 0 {
		msg.Control = &oob[0]
		msg.SetControllen(len(oob))
	}
	var got uintptr
	var errno syscall.Errno
	if err := rc.Read(func(fd uintptr) bool {
		for {
			got, _, errno = unix.RawSyscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&msg)), uintptr(flags))
			if errno != unix.EINTR {
				return errno != unix.EAGAIN
			}
		}
	}); err != nil {
		return 0, 0, err
	}
	switch {
	case errno != 0:
		return 0, 0, os.NewSyscallError("recvmsg", errno)
	case got == 0:
		return 0, int(msg.Controllen), io.EOF
	}
	return int(got), int(msg.Controllen), nil
}

// stdinEnd is the server's end of the program's stdin. Most calls write nothing to it:
// it stays a plain descriptor, closed at the handover, and goes on the runtime's poller
// (an fcntl and an epoll_ctl pair) only for a call or a session that writes to it, whose
// writes may wait for a program that never reads and must end when it is closed.
type stdinEnd struct {
	mu sync.Mutex
	fd int      // the plain descriptor until file puts it on the poller; -1 then
	f  *os.File // on the poller, once file was called
	// closed: Close was called; file then fails.
	closed bool
}

func newStdinEnd(fd int) *stdinEnd { return &stdinEnd{fd: fd} }

// file is the end on the poller, for writing.
func (s *stdinEnd) file() (*os.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, os.ErrClosed
	case s.f != nil:
		return s.f, nil
	}
	f, err := polledFile(s.fd, "stdin")
	s.fd = -1
	if err != nil {
		s.closed = true
		return nil, err
	}
	s.f = f
	return f, nil
}

// Write writes p to the program's stdin through the poller.
func (s *stdinEnd) Write(p []byte) (int, error) {
	f, err := s.file()
	if err != nil {
		return 0, err
	}
	return f.Write(p)
}

// Close closes the end (once; later calls do nothing). A write waiting on the poller
// returns.
func (s *stdinEnd) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if s.f != nil {
		s.f.Close()
		return
	}
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}
