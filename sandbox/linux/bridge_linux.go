package linux

import (
	"fmt"
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/egress"
	"github.com/airlock-mcp/airlock/sandbox"
)

// Network "allowlist", the server's side of the bridge:
//
//	init (in the sandbox's netns)              server
//	  lo up; listen 127.0.0.1:ProxyPort
//	  REP_LISTENER + SCM_RIGHTS(listener)  →   reportConn keeps the descriptor
//	                                           handover: egress.New(call's allowlist)
//	  program: connect 127.0.0.1:ProxyPort →   Proxy.Serve accepts, checks, dials out
//	                                           exit report: Proxy.Close → Result.Network
//
// The sandbox gets no interface but loopback and no route: the listener is the one
// socket whose connections leave it, and they end in the proxy.

// reportConn is the server's end of the report socket. It reads with recvmsg, so a
// descriptor the init passes (the bridge's listener) is kept rather than dropped.
type reportConn struct {
	c   *os.File // on the poller, read with recvmsgRaw
	oob []byte

	mu  sync.Mutex
	fds []int
}

// reportPair makes the report channel: the server's end and the init's (a plain
// descriptor, as the spawner's pipe ends are: fds_linux.go).
func reportPair() (*reportConn, int, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, -1, fmt.Errorf("report socket: %w", err)
	}
	// A plain file on the poller, not a net.Conn: net.FileConn dups the descriptor and
	// asks for its type and both addresses, six system calls per run for nothing read
	// through it.
	if err := setNonblockNew(fds[0]); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, -1, fmt.Errorf("report socket: %w", os.NewSyscallError("fcntl", err))
	}
	return &reportConn{c: os.NewFile(uintptr(fds[0]), "report"), oob: make([]byte, unix.CmsgSpace(4*4))}, fds[1], nil
}

// Read reads report bytes and keeps any descriptors passed with them (takeFD). It
// receives with a plain recvmsg(2) on the poller, as internal/rawio reads.
func (r *reportConn) Read(b []byte) (int, error) {
	rc, err := r.c.SyscallConn()
	if err != nil {
		return 0, err
	}
	n, oobn, err := recvmsgRaw(rc, b, r.oob, unix.MSG_CMSG_CLOEXEC)
	if oobn > 0 {
		if msgs, perr := unix.ParseSocketControlMessage(r.oob[:oobn]); perr == nil {
			for _, m := range msgs {
				if fds, ferr := unix.ParseUnixRights(&m); ferr == nil {
					r.mu.Lock()
					r.fds = append(r.fds, fds...)
					r.mu.Unlock()
				}
			}
		}
	}
	return n, err
}

// takeFD returns the oldest descriptor received and not yet taken.
func (r *reportConn) takeFD() (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.fds) == 0 {
		return -1, false
	}
	fd := r.fds[0]
	r.fds = r.fds[1:]
	return fd, true
}

// Close closes the socket and any descriptor nobody took.
func (r *reportConn) Close() error {
	r.mu.Lock()
	for _, fd := range r.fds {
		unix.Close(fd)
	}
	r.fds = nil
	r.mu.Unlock()
	return r.c.Close()
}

// acceptListener turns a REP_LISTENER's descriptor into the launch's bridge listener.
// Called with l.mu held.
func (l *launch) acceptListener(r *reportConn) {
	fd, ok := r.takeFD()
	if !ok {
		l.sb.log.Warn("a sandbox init reported a listener without passing it", "id", l.spec.ID)
		return
	}
	f := os.NewFile(uintptr(fd), "bridge")
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		l.sb.log.Warn("unusable bridge listener from a sandbox init", "id", l.spec.ID, "err", err)
		return
	}
	select {
	case l.listener <- ln:
	default:
		ln.Close() // a second one: the init passes exactly one
	}
}

// startProxy serves the call's allowlist on the bridge once the init has passed it.
func (l *launch) startProxy(spec sandbox.Spec) {
	if spec.Network != sandbox.NetworkAllowlist || spec.Egress == nil {
		return
	}
	p := egress.New(*spec.Egress, spec.ID, l.sb.resolver, nil)
	l.mu.Lock()
	l.proxy = p
	l.mu.Unlock()
	go func() {
		select {
		case ln := <-l.listener:
			p.Serve(ln)
		case <-l.waited:
		}
	}()
}

// stopProxy ends the call's egress (every process of the sandbox is dead, or about to
// be) and keeps what it did for the result.
func (l *launch) stopProxy() {
	l.mu.Lock()
	p := l.proxy
	l.proxy = nil
	l.mu.Unlock()
	if p == nil {
		return
	}
	use := p.Close()
	l.mu.Lock()
	l.netUse = &use
	l.mu.Unlock()
}

// dropListener closes a bridge listener no proxy took (a discarded pool sandbox).
func (l *launch) dropListener() {
	select {
	case ln := <-l.listener:
		ln.Close()
	default:
	}
}
