package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

// fakeDNS answers from a table; a name with several answers gives them one per lookup,
// in turn (the last one repeating), as a rebinding server would.
type fakeDNS struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	lookups map[string]int
	asked   []string // every name asked, as asked
}

func (f *fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, host)
	host = strings.TrimSuffix(host, ".")
	seq := f.answers[strings.ToLower(host)]
	if len(seq) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	i := min(f.lookups[host], len(seq)-1)
	f.lookups[host]++
	return seq[i], nil
}

func (f *fakeDNS) count(host string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lookups[host]
}

var loopback = netip.MustParseAddr("127.0.0.1")

// testCA is a certificate authority made for one test, and a certificate it signed for
// every name given.
type testCA struct {
	pool *x509.CertPool
	cert tls.Certificate
	pem  []byte
}

func newTestCA(t testing.TB, names ...string) *testCA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "airlock test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	var pemBuf bytes.Buffer
	fmt.Fprintf(&pemBuf, "-----BEGIN CERTIFICATE-----\n")
	enc := []byte(base64Std(caDER))
	for len(enc) > 64 {
		pemBuf.Write(enc[:64])
		pemBuf.WriteByte('\n')
		enc = enc[64:]
	}
	pemBuf.Write(enc)
	fmt.Fprintf(&pemBuf, "\n-----END CERTIFICATE-----\n")
	return &testCA{pool: pool, cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem: pemBuf.Bytes()}
}

// hits counts the requests a test server saw.
type hits struct{ n atomic.Int64 }

func (h *hits) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.n.Add(1); next.ServeHTTP(w, r) })
}

func port(t testing.TB, u string) int {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(pu.Port())
	return p
}

// harness is a proxy on loopback with its servers and resolver.
type harness struct {
	t     testing.TB
	dns   *fakeDNS
	proxy *Proxy
	addr  string
}

func newHarness(t testing.TB, cfg sandbox.Egress, dns *fakeDNS, tune ...func(*Proxy)) *harness {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := New(cfg, "test-call", dns, slog.New(slog.DiscardHandler))
	for _, f := range tune {
		f(p)
	}
	go p.Serve(ln)
	h := &harness{t: t, dns: dns, proxy: p, addr: ln.Addr().String()}
	t.Cleanup(func() { p.Close() })
	return h
}

// client goes through the proxy, trusting ca.
func (h *harness) client(ca *testCA) *http.Client {
	pu, _ := url.Parse("http://" + h.addr)
	tr := &http.Transport{Proxy: http.ProxyURL(pu), DisableKeepAlives: true}
	if ca != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: ca.pool}
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func get(t testing.TB, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestProxyAllowsAndRefuses(t *testing.T) {
	var okHits, deniedHits hits
	plain := httptest.NewServer(okHits.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://denied.test:"+r.URL.Query().Get("port")+"/", http.StatusFound)
			return
		}
		fmt.Fprint(w, "hello from ", r.Host)
	})))
	defer plain.Close()
	denied := httptest.NewServer(deniedHits.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "secret") })))
	defer denied.Close()
	ca := newTestCA(t, "allowed.test", "other.test")
	secure := httptest.NewUnstartedServer(okHits.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "tls ok") })))
	secure.TLS = &tls.Config{Certificates: []tls.Certificate{ca.cert}}
	secure.StartTLS()
	defer secure.Close()

	pPlain, pDenied, pSecure := port(t, plain.URL), port(t, denied.URL), port(t, secure.URL)
	dns := &fakeDNS{answers: map[string][][]netip.Addr{
		"allowed.test":  {{loopback}},
		"other.test":    {{loopback}},
		"denied.test":   {{loopback}},
		"private.test":  {{netip.MustParseAddr("10.0.0.7")}},
		"metadata.test": {{netip.MustParseAddr("169.254.169.254")}},
	}, lookups: map[string]int{}}
	cfg := sandbox.Egress{Domains: []string{"allowed.test", "private.test", "metadata.test", "*.sub.test"},
		Ports: []int{pPlain, pDenied, pSecure}, AllowPrivate: true, AllowLoopback: true}
	h := newHarness(t, cfg, dns)
	c := h.client(ca)

	if code, body := get(t, c, fmt.Sprintf("http://allowed.test:%d/", pPlain)); code != 200 || body != fmt.Sprintf("hello from allowed.test:%d", pPlain) {
		t.Errorf("plain HTTP to an allowed name: %d %q", code, body)
	}
	if code, body := get(t, c, fmt.Sprintf("https://allowed.test:%d/", pSecure)); code != 200 || body != "tls ok" {
		t.Errorf("HTTPS to an allowed name: %d %q", code, body)
	}
	for _, tc := range []struct{ what, url, rule string }{
		{"a name not on the list", fmt.Sprintf("http://denied.test:%d/", pDenied), "domain"},
		{"a name not on the list (https)", fmt.Sprintf("https://other.test:%d/", pSecure), "domain"},
		{"an IP literal", fmt.Sprintf("http://127.0.0.1:%d/", pDenied), "ip-literal"},
		{"a port not on the list", "http://allowed.test:1/", "port"},
		{"a metadata address", fmt.Sprintf("http://metadata.test:%d/", pDenied), "metadata"},
		{"a redirect to a denied host", fmt.Sprintf("http://allowed.test:%d/redirect?port=%d", pPlain, pDenied), "domain"},
	} {
		code, body := get(t, c, tc.url)
		if tc.url[:5] == "https" {
			// A refused CONNECT is an error for the client, with the status in it.
			if code != 0 || !strings.Contains(body, "Forbidden") {
				t.Errorf("%s: got %d %q, want a refused CONNECT", tc.what, code, body)
			}
			continue
		}
		if code != http.StatusForbidden || !strings.Contains(body, tc.rule+":") {
			t.Errorf("%s: got %d %q, want 403 naming rule %q", tc.what, code, body, tc.rule)
		}
	}
	if n := deniedHits.n.Load(); n != 0 {
		t.Errorf("the denied server saw %d requests", n)
	}

	// With allow_private and allow_loopback off, a name that resolves to loopback or
	// RFC 1918 is refused; allow_private alone opens RFC 1918, never loopback.
	strict := cfg
	strict.AllowPrivate, strict.AllowLoopback = false, false
	privateOnly := cfg
	privateOnly.AllowLoopback = false
	for _, tc := range []struct {
		what       string
		cfg        sandbox.Egress
		host, rule string
	}{
		{"strict", strict, "allowed.test", "loopback"},
		{"strict", strict, "private.test", "private"},
		{"allow_private only", privateOnly, "allowed.test", "loopback"},
	} {
		hs := newHarness(t, tc.cfg, dns)
		code, body := get(t, hs.client(nil), fmt.Sprintf("http://%s:%d/", tc.host, pPlain))
		if code != http.StatusForbidden || !strings.Contains(body, tc.rule+":") {
			t.Errorf("%s, %s: %d %q, want rule %s", tc.what, tc.host, code, body, tc.rule)
		}
	}

	use := h.proxy.Close()
	if use.Allowed < 3 || use.Refused < 5 {
		t.Errorf("use = %+v", use)
	}
	for _, conn := range use.Connections {
		if conn.Verdict == "refused" && conn.Rule == "" {
			t.Errorf("refused without a rule: %+v", conn)
		}
	}
}

// TestTunnelSNIMismatch: a CONNECT to an allowed name whose ClientHello names another
// host (domain fronting) is cut before a byte reaches the destination.
func TestTunnelSNIMismatch(t *testing.T) {
	ca := newTestCA(t, "allowed.test", "other.test")
	var seen hits
	secure := httptest.NewUnstartedServer(seen.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	secure.TLS = &tls.Config{Certificates: []tls.Certificate{ca.cert}}
	secure.StartTLS()
	defer secure.Close()
	p := port(t, secure.URL)
	dns := &fakeDNS{answers: map[string][][]netip.Addr{"allowed.test": {{loopback}}}, lookups: map[string]int{}}
	h := newHarness(t, sandbox.Egress{Domains: []string{"allowed.test"}, Ports: []int{p}, AllowPrivate: true, AllowLoopback: true}, dns)

	c, br := h.connect(t, fmt.Sprintf("allowed.test:%d", p))
	defer c.Close()
	tc := tls.Client(&bufConn{c, br}, &tls.Config{ServerName: "other.test", RootCAs: ca.pool})
	if err := tc.Handshake(); err == nil {
		t.Fatal("TLS with SNI other.test through CONNECT allowed.test succeeded")
	}
	use := h.proxy.Close()
	if len(use.Connections) != 1 || use.Connections[0].Rule != "sni-mismatch" || use.Connections[0].Sent != 0 {
		t.Errorf("use = %+v, want one sni-mismatch with nothing sent", use)
	}
	if seen.n.Load() != 0 {
		t.Error("the destination saw a request")
	}
}

type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// connect opens a tunnel through the proxy and checks it was granted.
func (h *harness) connect(t testing.TB, target string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %v %v", target, resp, err)
	}
	return c, br
}

// TestTunnelInTunnel: a CONNECT sent inside an allowed tunnel reaches the allowed
// destination as bytes, never another host.
func TestTunnelInTunnel(t *testing.T) {
	var allowedHits, deniedHits hits
	allowed := httptest.NewServer(allowedHits.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "allowed server got %s %s", r.Method, r.Host)
	})))
	defer allowed.Close()
	denied := httptest.NewServer(deniedHits.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	defer denied.Close()
	pa, pd := port(t, allowed.URL), port(t, denied.URL)
	dns := &fakeDNS{answers: map[string][][]netip.Addr{"allowed.test": {{loopback}}, "denied.test": {{loopback}}}, lookups: map[string]int{}}
	h := newHarness(t, sandbox.Egress{Domains: []string{"allowed.test"}, Ports: []int{pa, pd}, AllowPrivate: true, AllowLoopback: true}, dns)
	c, br := h.connect(t, fmt.Sprintf("allowed.test:%d", pa))
	defer c.Close()
	inner := fmt.Sprintf("denied.test:%d", pd)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\nGET / HTTP/1.1\r\nHost: denied.test\r\n\r\n", inner, inner)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, _ := io.ReadAll(br)
	if deniedHits.n.Load() != 0 {
		t.Fatalf("the inner CONNECT reached the denied server")
	}
	if bytes.Contains(got, []byte("200 Connection established")) {
		t.Errorf("something granted the inner CONNECT: %q", got)
	}
	if dns.count("denied.test") != 0 {
		t.Error("the proxy looked the inner host up")
	}
}

// TestRebinding: the proxy looks a name up once per connection and connects to the
// address it checked; a second answer pointing at a denied address is refused, not
// dialled.
func TestRebinding(t *testing.T) {
	var seen hits
	srv := httptest.NewServer(seen.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })))
	defer srv.Close()
	p := port(t, srv.URL)
	meta := netip.MustParseAddr("169.254.169.254")
	dns := &fakeDNS{answers: map[string][][]netip.Addr{"rebind.test": {{loopback}, {meta}}}, lookups: map[string]int{}}
	h := newHarness(t, sandbox.Egress{Domains: []string{"rebind.test"}, Ports: []int{p}, AllowPrivate: true, AllowLoopback: true}, dns)
	c := h.client(nil)
	if code, body := get(t, c, fmt.Sprintf("http://rebind.test:%d/", p)); code != 200 {
		t.Fatalf("first answer (allowed): %d %q", code, body)
	}
	if dns.count("rebind.test") != 1 {
		t.Errorf("%d lookups for one connection, want 1", dns.count("rebind.test"))
	}
	code, body := get(t, c, fmt.Sprintf("http://rebind.test:%d/", p))
	if code != http.StatusForbidden || !strings.Contains(body, "metadata:") {
		t.Fatalf("second answer (metadata): %d %q, want 403 metadata", code, body)
	}
	use := h.proxy.Close()
	for _, conn := range use.Connections {
		if conn.Addr == meta.String() && conn.Verdict != "refused" {
			t.Errorf("connected to %s: %+v", meta, conn)
		}
	}
}

// TestLookupIsRooted: the proxy asks its resolver for the name it checked, rooted, so
// a search list cannot append a suffix the allowlist does not name (x.sub.test that
// does not exist becoming x.sub.test.corp.internal), and a spelling the program chose
// (upper case, a trailing dot) is not what is looked up.
func TestLookupIsRooted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	defer srv.Close()
	p := port(t, srv.URL)
	dns := &fakeDNS{answers: map[string][][]netip.Addr{"x.sub.test": {{loopback}}}, lookups: map[string]int{}}
	h := newHarness(t, sandbox.Egress{Domains: []string{"*.sub.test", "intranet"}, Ports: []int{p}, AllowLoopback: true}, dns)
	for _, host := range []string{"x.sub.test", "X.Sub.Test.", "missing.sub.test", "intranet"} {
		get(t, h.client(nil), fmt.Sprintf("http://%s:%d/", host, p))
	}
	dns.mu.Lock()
	defer dns.mu.Unlock()
	if want := []string{"x.sub.test.", "x.sub.test.", "missing.sub.test.", "intranet"}; fmt.Sprint(dns.asked) != fmt.Sprint(want) {
		t.Errorf("the resolver was asked for %q, want %q", dns.asked, want)
	}
}

func TestByteCap(t *testing.T) {
	const size = 4 << 20
	big := bytes.Repeat([]byte("x"), size)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(big) }))
	defer srv.Close()
	p := port(t, srv.URL)
	dns := &fakeDNS{answers: map[string][][]netip.Addr{"big.test": {{loopback}}}, lookups: map[string]int{}}
	h := newHarness(t, sandbox.Egress{Domains: []string{"big.test"}, Ports: []int{p}, AllowPrivate: true, AllowLoopback: true, MaxBytes: 1 << 20}, dns)
	resp, err := h.client(nil).Get(fmt.Sprintf("http://big.test:%d/", p))
	var n int64
	if err == nil {
		n, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if n >= size || n > 1<<20 {
		t.Errorf("downloaded %d bytes past a 1 MiB cap", n)
	}
	use := h.proxy.Close()
	if !use.Capped || len(use.Connections) != 1 || use.Connections[0].Verdict != "cut" {
		t.Errorf("use = %+v, want capped with one cut connection", use)
	}
	if total := use.Sent + use.Received; total > 1<<20 {
		t.Errorf("%d bytes passed a cap of %d", total, 1<<20)
	}
}

// TestHostileClients: garbage, clients that never finish their request, and a flood
// of connections from one call. The proxy answers each, stays within its connection
// cap, and serves a well-behaved request afterwards.
func TestHostileClients(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	defer srv.Close()
	p := port(t, srv.URL)
	dns := &fakeDNS{answers: map[string][][]netip.Addr{"ok.test": {{loopback}}}, lookups: map[string]int{}}
	h := newHarness(t, sandbox.Egress{Domains: []string{"ok.test"}, Ports: []int{p}, AllowPrivate: true, AllowLoopback: true, MaxConnections: 16}, dns,
		func(p *Proxy) { p.headerTimeout = 2 * time.Second })
	good := func() {
		t.Helper()
		if code, body := get(t, h.client(nil), fmt.Sprintf("http://ok.test:%d/", p)); code != 200 {
			t.Fatalf("a good request after the abuse: %d %q", code, body)
		}
	}

	// Garbage.
	for _, junk := range []string{"\x00\x01\x02\xff\xfe", "GET\r\n\r\n", "CONNECT\r\n\r\n", "GET / HTTP/1.1\r\nHost: ok.test\r\n\r\n",
		"CONNECT ok.test HTTP/1.1\r\n\r\n", "CONNECT :0 HTTP/1.1\r\n\r\n", strings.Repeat("A", 100<<10)} {
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, junk)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, _ := io.ReadAll(c)
		c.Close()
		if !bytes.HasPrefix(resp, []byte("HTTP/1.1 40")) {
			t.Errorf("junk %q: answer %q", junk[:min(len(junk), 20)], resp)
		}
	}
	good()

	// Slowloris: every slot held by a client that sends a byte now and then. (The good
	// request's handler may still hold its slot for a moment after its answer.)
	waitIdle(t, h.proxy)
	var slow []net.Conn
	for range 16 {
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, "GET http://ok.test/ HTTP/1.1\r\n")
		slow = append(slow, c)
	}
	time.Sleep(50 * time.Millisecond)
	over, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = over.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, _ := io.ReadAll(over)
	over.Close()
	if !bytes.Contains(resp, []byte("connection-cap")) {
		t.Errorf("a connection over the cap: %q", resp)
	}
	for _, c := range slow {
		_, _ = io.WriteString(c, "X-Slow: 1\r\n")
	}
	// The header timeout frees the slots.
	for _, c := range slow {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.ReadAll(c)
		c.Close()
	}
	// A slot is released just after its connection closes: the last slow client's EOF
	// can reach the test before its slot is free.
	waitIdle(t, h.proxy)
	good()

	// A flood: 1,000 connections at once, each asking for the allowed server.
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	var answered atomic.Int64
	sem := make(chan struct{}, 200) // the test's own descriptors
	for range 1000 {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := net.Dial("tcp", h.addr)
			if err != nil {
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "GET http://ok.test:%d/ HTTP/1.1\r\nHost: ok.test\r\n\r\n", p)
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			b, _ := io.ReadAll(c)
			if bytes.HasPrefix(b, []byte("HTTP/1.1 200")) || bytes.Contains(b, []byte("connection-cap")) {
				answered.Add(1)
			}
		}()
	}
	wg.Wait()
	if answered.Load() != 1000 {
		t.Errorf("%d of 1000 connections answered (200 or connection-cap)", answered.Load())
	}
	good()
	use := h.proxy.Close()
	if use.Omitted == 0 || len(use.Connections) > maxRecords {
		t.Errorf("records not bounded: %d listed, %d omitted", len(use.Connections), use.Omitted)
	}
	time.Sleep(100 * time.Millisecond)
	if after := runtime.NumGoroutine(); after > before+5 {
		t.Errorf("%d goroutines after the flood, %d before", after, before)
	}
}

// waitIdle waits until the proxy holds no connection slot.
func waitIdle(t testing.TB, p *Proxy) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(p.slots) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connection slots still held", len(p.slots))
		}
		time.Sleep(time.Millisecond)
	}
}

// Benchmarks: the latency the proxy adds to one request, each on a new connection (as
// every request through the proxy is). Compare ns/op of Direct and ViaProxy.
func BenchmarkRequestDirect(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	defer srv.Close()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	b.ResetTimer()
	for b.Loop() {
		if code, _ := get(b, c, srv.URL); code != 200 {
			b.Fatal(code)
		}
	}
}

func BenchmarkRequestViaProxy(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	defer srv.Close()
	p := port(b, srv.URL)
	dns := &fakeDNS{answers: map[string][][]netip.Addr{"ok.test": {{loopback}}}, lookups: map[string]int{}}
	h := newHarness(b, sandbox.Egress{Domains: []string{"ok.test"}, Ports: []int{p}, AllowPrivate: true, AllowLoopback: true, MaxBytes: 1 << 40}, dns)
	c := h.client(nil)
	u := fmt.Sprintf("http://ok.test:%d/", p)
	b.ResetTimer()
	for b.Loop() {
		if code, body := get(b, c, u); code != 200 {
			b.Fatal(code, body)
		}
	}
}

func BenchmarkTLSDirect(b *testing.B) {
	ca := newTestCA(b, "ok.test")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.cert}}
	srv.StartTLS()
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: ca.pool, ServerName: "ok.test"},
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		}}}
	u := fmt.Sprintf("https://ok.test:%d/", port(b, srv.URL))
	b.ResetTimer()
	for b.Loop() {
		if code, body := get(b, c, u); code != 200 {
			b.Fatal(code, body)
		}
	}
}

func BenchmarkTLSViaProxy(b *testing.B) {
	ca := newTestCA(b, "ok.test")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.cert}}
	srv.StartTLS()
	defer srv.Close()
	p := port(b, srv.URL)
	dns := &fakeDNS{answers: map[string][][]netip.Addr{"ok.test": {{loopback}}}, lookups: map[string]int{}}
	h := newHarness(b, sandbox.Egress{Domains: []string{"ok.test"}, Ports: []int{p}, AllowPrivate: true, AllowLoopback: true, MaxBytes: 1 << 40}, dns)
	c := h.client(ca)
	u := fmt.Sprintf("https://ok.test:%d/", p)
	b.ResetTimer()
	for b.Loop() {
		if code, body := get(b, c, u); code != 200 {
			b.Fatal(code, body)
		}
	}
}

// countingSink is a TCP server on loopback that reads every connection to its end (or
// the deadline) and counts the bytes: what a destination received through the proxy.
func countingSink(t testing.TB, deadline time.Duration) (port int, got *atomic.Int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetReadDeadline(time.Now().Add(deadline))
				n, _ := io.Copy(io.Discard, c)
				got.Add(n)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, got
}
