package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/internal/tlstest"
	"github.com/airlock-mcp/airlock/sandbox"
)

// TestTunnelEncryptedClientHello: a client that encrypts its real ClientHello (ECH)
// sends the allowed name as the outer SNI and the name it wants inside, where only the
// destination reads it; a shared front end (a CDN that offers ECH) then serves the inner
// name. The proxy cannot check a name it cannot read, so it refuses the hello, and the
// destination sees no handshake.
func TestTunnelEncryptedClientHello(t *testing.T) {
	ca := newTestCA(t, "allowed.test", "other.test")
	config, list, private := tlstest.ECHConfig(t, "allowed.test")
	var mu sync.Mutex
	var served []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		served = append(served, fmt.Sprintf("sni=%s ech=%v", r.TLS.ServerName, r.TLS.ECHAccepted))
		mu.Unlock()
		fmt.Fprint(w, "served ", r.TLS.ServerName)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.cert}, MinVersion: tls.VersionTLS13,
		EncryptedClientHelloKeys: []tls.EncryptedClientHelloKey{{Config: config, PrivateKey: private}}}
	srv.StartTLS()
	defer srv.Close()
	p := port(t, srv.URL)

	// The front end really does serve the inner name: ECH straight to it works.
	direct := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool,
		ServerName: "other.test", EncryptedClientHelloConfigList: list}}, Timeout: 10 * time.Second}
	if code, body := get(t, direct, srv.URL+"/"); code != 200 || body != "served other.test" {
		t.Fatalf("ECH straight to the destination: %d %q (the attack's premise)", code, body)
	}

	dns := &fakeDNS{answers: map[string][][]netip.Addr{"allowed.test": {{loopback}}}, lookups: map[string]int{}}
	h := newHarness(t, sandbox.Egress{Domains: []string{"allowed.test"}, Ports: []int{p}, AllowLoopback: true}, dns)
	c, br := h.connect(t, fmt.Sprintf("allowed.test:%d", p))
	defer c.Close()
	tc := tls.Client(&bufConn{c, br}, &tls.Config{ServerName: "other.test", RootCAs: ca.pool, EncryptedClientHelloConfigList: list})
	_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
	if err := tc.Handshake(); err == nil {
		t.Errorf("an encrypted ClientHello for other.test through CONNECT allowed.test: handshake done (%v)", tc.ConnectionState().ECHAccepted)
	}
	use := h.proxy.Close()
	if len(use.Connections) != 1 || use.Connections[0].Rule != "ech" || use.Connections[0].Sent != 0 {
		t.Errorf("use = %+v, want one connection refused as ech with nothing sent", use.Connections)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(served) != 1 {
		t.Errorf("the destination served %q, want only the direct request", served)
	}
}

// TestHelloBytesAfter: a record that carries more than the ClientHello (a second
// ClientHello behind the first, for a server that answers with a HelloRetryRequest) is
// refused: no client sends anything after its hello before the server answers.
func TestHelloBytesAfter(t *testing.T) {
	first := tlstest.Hello(t, "allowed.test", nil)
	second := tlstest.Hello(t, "other.test", nil)
	body := append(append([]byte{}, first[5:]...), second[5:]...)
	rec := append([]byte{22, 3, 1, byte(len(body) >> 8), byte(len(body))}, body...)
	if _, _, err := readClientHello(bufReader(rec)); err == nil {
		t.Error("readClientHello accepted a record with a second ClientHello after the first")
	}
	if _, _, err := readClientHello(bufReader(first)); err != nil {
		t.Errorf("one ClientHello alone: %v", err)
	}
}

func bufReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

// TestTunnelSecondHello: after a HelloRetryRequest the client sends its ClientHello
// again, in the clear, and a front end may pick the site by the second one's name. A
// second hello naming another host than the CONNECT, or encrypting it, never reaches
// the destination; one naming the same host does, and so does a real handshake that
// takes a HelloRetryRequest.
func TestTunnelSecondHello(t *testing.T) {
	var mu sync.Mutex
	var after [][]byte // what the destination received after its HelloRetryRequest
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				if _, _, err := readClientHello(bufio.NewReader(c)); err != nil {
					return
				}
				_, _ = c.Write(tlstest.HelloRetry())
				got, _ := io.ReadAll(c)
				mu.Lock()
				after = append(after, got)
				mu.Unlock()
			}()
		}
	}()
	p := ln.Addr().(*net.TCPAddr).Port
	dns := &fakeDNS{answers: map[string][][]netip.Addr{"allowed.test": {{loopback}}}, lookups: map[string]int{}}
	h := newHarness(t, sandbox.Egress{Domains: []string{"allowed.test"}, Ports: []int{p}, AllowLoopback: true}, dns)
	_, echList, _ := tlstest.ECHConfig(t, "allowed.test")
	ccs := tlstest.ChangeCipherSpec
	for _, tc := range []struct {
		name   string
		second []byte
		rule   string
	}{
		{"other name", slices.Concat(ccs, tlstest.Hello(t, "other.test", nil)), "sni-mismatch"},
		{"encrypted name", slices.Concat(ccs, tlstest.Hello(t, "other.test", echList)), "ech"},
		{"no change cipher spec", tlstest.Hello(t, "other.test", nil), "sni-mismatch"},
		{"same name", slices.Concat(ccs, tlstest.Hello(t, "allowed.test", nil)), ""},
	} {
		c, br := h.connect(t, fmt.Sprintf("allowed.test:%d", p))
		_, _ = c.Write(tlstest.Hello(t, "allowed.test", nil))
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		hrr := make([]byte, len(tlstest.HelloRetry()))
		if _, err := io.ReadFull(br, hrr); err != nil || !bytes.Equal(hrr, tlstest.HelloRetry()) {
			t.Fatalf("%s: the HelloRetryRequest did not come back whole: %v", tc.name, err)
		}
		_, _ = c.Write(tc.second)
		if tcp, ok := c.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
		_, _ = io.ReadAll(br)
		c.Close()
	}
	use := h.proxy.Close()
	var rules []string
	for _, c := range use.Connections {
		rules = append(rules, c.Rule)
	}
	if want := []string{"sni-mismatch", "ech", "sni-mismatch", ""}; fmt.Sprint(rules) != fmt.Sprint(want) {
		t.Errorf("rules %q, want %q", rules, want)
	}
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for _, got := range after {
		if bytes.Contains(got, []byte("other.test")) || bytes.Contains(got, []byte{0xfe, 0x0d}) {
			t.Errorf("the destination received a second ClientHello for another name (%d bytes)", len(got))
		}
	}
	if len(after) != 4 || !bytes.Contains(after[3], []byte("allowed.test")) {
		t.Errorf("the second hello for the same name did not reach the destination (%d answers)", len(after))
	}
}

// TestTunnelRealHelloRetry: a real handshake that takes a HelloRetryRequest (the
// destination accepts P-256 only, for which the client sent no key share) passes.
func TestTunnelRealHelloRetry(t *testing.T) {
	ca := newTestCA(t, "allowed.test")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "tls ok") }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.cert}, CurvePreferences: []tls.CurveID{tls.CurveP256}}
	srv.StartTLS()
	defer srv.Close()
	p := port(t, srv.URL)
	dns := &fakeDNS{answers: map[string][][]netip.Addr{"allowed.test": {{loopback}}}, lookups: map[string]int{}}
	h := newHarness(t, sandbox.Egress{Domains: []string{"allowed.test"}, Ports: []int{p}, AllowLoopback: true}, dns)
	if code, body := get(t, h.client(ca), fmt.Sprintf("https://allowed.test:%d/", p)); code != 200 || body != "tls ok" {
		t.Errorf("a handshake with a HelloRetryRequest through the proxy: %d %q", code, body)
	}
}

// FuzzReadServerHello: whatever a destination answers, the reader neither panics nor
// claims more bytes than it was given, and finds a retry only in a whole ServerHello.
func FuzzReadServerHello(f *testing.F) {
	f.Add(tlstest.HelloRetry())
	f.Add([]byte{21, 3, 3, 0, 2, 1, 112})
	f.Add([]byte{21, 3, 3, 0, 2, 2, 40})
	f.Fuzz(func(t *testing.T, b []byte) {
		raw, retry, ended, err := readServerHello(bytes.NewReader(b))
		if len(raw) > len(b) {
			t.Fatalf("read %d of %d bytes", len(raw), len(b))
		}
		if retry && (ended || err != nil || !bytes.Contains(b, tlstest.HelloRetryRandom)) {
			t.Fatalf("retry=%v ended=%v err=%v", retry, ended, err)
		}
	})
}
