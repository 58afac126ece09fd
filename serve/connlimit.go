package serve

import (
	"net"
	"sync"
)

// connLimit caps the connections the HTTP server holds open at once at half its file
// descriptor limit, so that the other half is left for the sandboxes. Without it a peer
// with no token opened idle connections until accept4 failed with EMFILE, and every call
// of an authenticated client on a connection it already held then came back
// sandbox_error ("stdout pipe: pipe2: too many open files") while the warm pool could not
// refill (TestE2EIdleConnectionsLeaveSandboxFds). Past the cap a connection waits in the
// kernel's backlog, which costs the server no descriptor, until one closes.
type connLimit struct {
	net.Listener
	slots chan struct{}
	done  chan struct{}
	once  sync.Once
}

// limitConns wraps ln so that at most max of its connections are open at once; max < 1
// leaves ln as it is.
func limitConns(ln net.Listener, max int) net.Listener {
	if max < 1 {
		return ln
	}
	return &connLimit{Listener: ln, slots: make(chan struct{}, max), done: make(chan struct{})}
}

func (l *connLimit) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, free: func() { <-l.slots }}, nil
}

func (l *connLimit) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitedConn gives its slot back at its first Close (net/http may close a conn twice).
type limitedConn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}
