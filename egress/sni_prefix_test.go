package egress

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

// prefixConn sends prefix before its first write: a record slipped in ahead of the
// ClientHello.
type prefixConn struct {
	net.Conn
	prefix []byte
	sent   bool
}

func (p *prefixConn) Write(b []byte) (int, error) {
	if !p.sent {
		p.sent = true
		if _, err := p.Conn.Write(append(append([]byte{}, p.prefix...), b...)); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return p.Conn.Write(b)
}

// TestTunnelRecordBeforeHello: a TLS stream whose first record is not the handshake
// (a warning alert, which OpenSSL servers skip before the ClientHello; a change cipher
// spec; application data) must not carry a ClientHello for another host past the SNI
// check. The destination receives nothing.
func TestTunnelRecordBeforeHello(t *testing.T) {
	p, got := countingSink(t, 5*time.Second)
	dns := &fakeDNS{answers: map[string][][]netip.Addr{"allowed.test": {{loopback}}}, lookups: map[string]int{}}
	h := newHarness(t, sandbox.Egress{Domains: []string{"allowed.test"}, Ports: []int{p}, AllowPrivate: true, AllowLoopback: true}, dns)
	for _, rec := range [][]byte{
		{21, 3, 1, 0, 2, 1, 112}, // a warning alert (unrecognized_name)
		{20, 3, 3, 0, 1, 1},      // change cipher spec
		{23, 3, 3, 0, 1, 0},      // application data
	} {
		c, br := h.connect(t, fmt.Sprintf("allowed.test:%d", p))
		tc := tls.Client(&prefixConn{Conn: &bufConn{c, br}, prefix: rec}, &tls.Config{ServerName: "other.test", InsecureSkipVerify: true})
		_ = tc.SetDeadline(time.Now().Add(3 * time.Second))
		_ = tc.Handshake()
		c.Close()
	}
	use := h.proxy.Close()
	for _, c := range use.Connections {
		if c.Rule != "malformed-tls" {
			t.Errorf("connection %+v, want it refused as malformed-tls", c)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if n := got.Load(); n != 0 {
		t.Errorf("the destination received %d bytes: a ClientHello naming other.test behind a leading record", n)
	}
}
