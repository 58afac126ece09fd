package egress

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

// TestByteCapManyConnections: the cap is the call's, not a connection's. Many small
// tunnels, several at once, each under the cap, together move no more than the cap to
// the destination.
func TestByteCapManyConnections(t *testing.T) {
	p, got := countingSink(t, 10*time.Second)
	const maxBytes = 256 << 10
	dns := &fakeDNS{answers: map[string][][]netip.Addr{"sink.test": {{loopback}}}, lookups: map[string]int{}}
	h := newHarness(t, sandbox.Egress{Domains: []string{"sink.test"}, Ports: []int{p}, AllowPrivate: true, AllowLoopback: true,
		MaxBytes: maxBytes, MaxConnections: 8}, dns)
	// Binary, as a tunnel's bytes are: 16 KiB of text with no line end would be refused
	// as a request line the proxy cannot see the end of (firstLine).
	chunk := bytes.Repeat([]byte{0}, 16<<10)
	var wg sync.WaitGroup
	// Well under the connection cap: the proxy frees a tunnel's slot just after it closes
	// the client's side, so a client that reconnects at once can find its last few
	// tunnels still counted (with 6 of 8, a 403 connection-cap once in CI under load).
	sem := make(chan struct{}, 4)
	for range 64 {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := net.Dial("tcp", h.addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "CONNECT sink.test:%d HTTP/1.1\r\n\r\n", p)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("CONNECT: %v %v", resp, err)
				return
			}
			_, _ = c.Write(chunk)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, _ = io.Copy(io.Discard, br)
		}()
	}
	wg.Wait()
	use := h.proxy.Close()
	time.Sleep(100 * time.Millisecond)
	if n := got.Load(); n > maxBytes {
		t.Errorf("the destination received %d bytes over 64 connections, past the call's cap of %d", n, maxBytes)
	}
	if !use.Capped || use.Sent+use.Received > maxBytes {
		t.Errorf("use: capped=%v, %d bytes through a cap of %d", use.Capped, use.Sent+use.Received, maxBytes)
	}
}
