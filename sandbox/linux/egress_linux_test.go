package linux

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/internal/sandboxtest"
	"github.com/airlock-mcp/airlock/sandbox"
)

// The allowlist's escape tests: real sandboxes, real interpreters, servers on the
// host's loopback that the sandbox may reach only through the egress proxy. Names are
// answered by testDNS (a rebinding name included); allow_loopback is on, or no loopback
// server could be reached at all.

// testDNS answers from a table; a name with several answers gives one per lookup, in
// turn, the last repeating, as a rebinding server would.
type testDNS struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	lookups map[string]int
}

func (d *testDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	host = strings.TrimSuffix(host, ".") // the proxy asks for rooted names
	seq := d.answers[strings.ToLower(host)]
	if len(seq) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	i := min(d.lookups[host], len(seq)-1)
	d.lookups[host]++
	return []netip.Addr{seq[i]}, nil
}

var (
	egressOnce sync.Once
	egressInst *Sandbox
	egressErr  error
	egressDNS  = &testDNS{lookups: map[string]int{}, answers: map[string][]netip.Addr{
		"allowed.test":  {netip.MustParseAddr("127.0.0.1")},
		"other.test":    {netip.MustParseAddr("127.0.0.1")},
		"denied.test":   {netip.MustParseAddr("127.0.0.1")},
		"index.test":    {netip.MustParseAddr("127.0.0.1")},
		"metadata.test": {netip.MustParseAddr("169.254.169.254")},
		"rebind.test":   {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("169.254.169.254")},
	}}
)

// egressSandbox is a backend of its own whose proxy asks testDNS.
func egressSandbox(t *testing.T) *Sandbox {
	t.Helper()
	egressOnce.Do(func() {
		egressInst, egressErr = New(sandbox.Options{})
		if egressErr == nil {
			egressInst.resolver = egressDNS
		}
	})
	sandboxtest.Require(t, egressErr)
	return egressInst
}

// egressServers are the host's loopback servers of these tests.
type egressServers struct {
	plain, secure, denied *httptest.Server
	deniedHits            atomic.Int64
	caPEM                 []byte
	wheel                 []byte
}

func (e *egressServers) port(s *httptest.Server) int { return s.Listener.Addr().(*net.TCPAddr).Port }

func newEgressServers(t *testing.T) *egressServers {
	t.Helper()
	e := &egressServers{wheel: demoWheel(t)}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello from ", r.Host) })
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, fmt.Sprintf("http://denied.test:%d/", e.port(e.denied)), http.StatusFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(bytes.Repeat([]byte("x"), 8<<20))
	})
	mux.HandleFunc("/simple/demo/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><body><a href="/files/demo-1.0-py3-none-any.whl">demo-1.0-py3-none-any.whl</a></body></html>`)
	})
	mux.HandleFunc("/files/demo-1.0-py3-none-any.whl", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(e.wheel) })
	e.plain = httptest.NewServer(mux)
	e.denied = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.deniedHits.Add(1)
		fmt.Fprint(w, "secret")
	}))
	cert, caPEM := testCert(t, "allowed.test", "other.test")
	e.caPEM = caPEM
	smux := http.NewServeMux()
	smux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "tls ok") })
	smux.Handle("/simple/", mux)
	smux.Handle("/files/", mux)
	e.secure = httptest.NewUnstartedServer(smux)
	e.secure.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	e.secure.StartTLS()
	t.Cleanup(func() { e.plain.Close(); e.denied.Close(); e.secure.Close() })
	return e
}

func (e *egressServers) egress(maxBytes int64) *sandbox.Egress {
	return &sandbox.Egress{Domains: []string{"allowed.test", "index.test", "metadata.test", "rebind.test"},
		Ports: []int{e.port(e.plain), e.port(e.secure), e.port(e.denied), 80}, AllowPrivate: true, AllowLoopback: true, MaxBytes: maxBytes}
}

// testCert makes a CA for this test and a certificate it signed for names.
func testCert(t *testing.T, names ...string) (tls.Certificate, []byte) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "airlock test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}

// demoWheel is a minimal valid wheel for pip to download.
func demoWheel(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	files := map[string]string{
		"demo/__init__.py":                 "VALUE = 1\n",
		"demo-1.0.dist-info/METADATA":      "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n",
		"demo-1.0.dist-info/WHEEL":         "Wheel-Version: 1.0\nGenerator: airlock-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
		"demo-1.0.dist-info/top_level.txt": "demo\n",
	}
	var record strings.Builder
	for _, name := range []string{"demo/__init__.py", "demo-1.0.dist-info/METADATA", "demo-1.0.dist-info/WHEEL", "demo-1.0.dist-info/top_level.txt"} {
		w, _ := z.Create(name)
		_, _ = w.Write([]byte(files[name]))
		fmt.Fprintf(&record, "%s,,\n", name)
	}
	record.WriteString("demo-1.0.dist-info/RECORD,,\n")
	w, _ := z.Create("demo-1.0.dist-info/RECORD")
	_, _ = w.Write([]byte(record.String()))
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// egressProgram tries every way out from inside the sandbox and prints what happened.
const egressProgram = `
import json, os, socket, ssl, sys, urllib.request, urllib.error
P, S, D = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
out = {}
def fetch(key, url, ctx=None):
    try:
        with urllib.request.urlopen(url, timeout=10, context=ctx) as r:
            out[key] = {"status": r.status, "body": r.read().decode(errors="replace")[:200]}
    except urllib.error.HTTPError as e:
        out[key] = {"status": e.code, "body": e.read().decode(errors="replace")[:200]}
    except Exception as e:
        out[key] = {"error": type(e).__name__ + ": " + str(e)[:200]}
ctx = ssl.create_default_context(cafile="ca.pem")
fetch("allowed", "http://allowed.test:%d/" % P)
fetch("allowed_tls", "https://allowed.test:%d/" % S, ctx)
fetch("not_listed", "http://denied.test:%d/" % D)
fetch("not_listed_tls", "https://other.test:%d/" % S, ctx)
fetch("ip_literal", "http://127.0.0.2:%d/" % D)
fetch("metadata_name", "http://metadata.test:%d/" % D)
fetch("redirect", "http://allowed.test:%d/redirect" % P)
fetch("rebind_first", "http://rebind.test:%d/" % P)
fetch("rebind_second", "http://rebind.test:%d/" % P)
fetch("big", "http://allowed.test:%d/big" % P)
def conn(key, family, kind, addr, send=None):
    try:
        s = socket.socket(family, kind)
        s.settimeout(5)
        if send is not None:
            s.sendto(send, addr)
            s.recvfrom(512)
        else:
            s.connect(addr)
        out[key] = "connected"
    except OSError as e:
        out[key] = type(e).__name__ + ":" + str(e.errno)
conn("direct_host_port", socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", P))
conn("direct_remote", socket.AF_INET, socket.SOCK_STREAM, ("93.184.215.14", 80))
conn("direct_remote6", socket.AF_INET6, socket.SOCK_STREAM, ("2606:4700::1111", 80))
conn("dns_udp", socket.AF_INET, socket.SOCK_DGRAM, ("8.8.8.8", 53), send=b"\x00")
try:
    socket.getaddrinfo("allowed.test", 80)
    out["getaddrinfo"] = "resolved"
except OSError as e:
    out["getaddrinfo"] = type(e).__name__
# The port of the bridge is taken: the program cannot listen in the proxy's place.
try:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("127.0.0.1", 3128)); out["bind_bridge"] = "bound"
except OSError as e:
    out["bind_bridge"] = type(e).__name__ + ":" + str(e.errno)
# Domain fronting: CONNECT to an allowed name, TLS for another.
try:
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(b"CONNECT allowed.test:%d HTTP/1.1\r\nHost: allowed.test\r\n\r\n" % S)
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    t = ctx.wrap_socket(s, server_hostname="other.test")
    out["sni_mismatch"] = "handshake done"
except Exception as e:
    out["sni_mismatch"] = type(e).__name__
print(json.dumps(out))
`

func TestEgressAllowlist(t *testing.T) {
	sb := egressSandbox(t)
	e := newEgressServers(t)
	P, S, D := e.port(e.plain), e.port(e.secure), e.port(e.denied)
	const maxBytes = 2 << 20
	spec := sandbox.Spec{
		Argv: []string{python, "-I", "-S", "main.py", strconv.Itoa(P), strconv.Itoa(S), strconv.Itoa(D)},
		Code: []byte(egressProgram), CodeFile: "main.py",
		Files:   []sandbox.File{{Path: "ca.pem", Data: e.caPEM}},
		Network: sandbox.NetworkAllowlist, Egress: e.egress(maxBytes),
		Limits: sandbox.Limits{Wall: 60 * time.Second},
	}
	res, err := sb.Run(context.Background(), withDefaults(spec))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Status != sandbox.StatusOK {
		t.Fatalf("program: %s", brief(res))
	}
	var out map[string]any
	lines := strings.Split(strings.TrimSpace(string(res.Stdout.Bytes())), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &out); err != nil {
		t.Fatalf("decode: %v\n%s", err, brief(res))
	}
	status := func(k string) (float64, string) {
		m, _ := out[k].(map[string]any)
		code, _ := m["status"].(float64)
		body, _ := m["body"].(string)
		if errs, ok := m["error"].(string); ok {
			body = errs
		}
		return code, body
	}
	if code, body := status("allowed"); code != 200 || !strings.HasPrefix(body, "hello from allowed.test") {
		t.Errorf("allowed name over http: %v %q", code, body)
	}
	if code, body := status("allowed_tls"); code != 200 || body != "tls ok" {
		t.Errorf("allowed name over https: %v %q", code, body)
	}
	if code, body := status("rebind_first"); code != 200 {
		t.Errorf("rebinding name, first answer: %v %q", code, body)
	}
	for key, rule := range map[string]string{"not_listed": "domain:", "ip_literal": "ip-literal:",
		"metadata_name": "metadata:", "redirect": "domain:", "rebind_second": "metadata:"} {
		if code, body := status(key); code != 403 || !strings.Contains(body, rule) {
			t.Errorf("%s: %v %q, want 403 naming %q", key, code, body, rule)
		}
	}
	if _, body := status("not_listed_tls"); !strings.Contains(body, "403") {
		t.Errorf("https to a name not listed: %q, want the CONNECT refused with 403", body)
	}
	if code, body := status("big"); code == 200 && len(body) >= 8<<20 {
		t.Errorf("the byte cap did not cut an 8 MiB download")
	}
	for key, want := range map[string]string{
		"direct_host_port": "ConnectionRefusedError:111", // the host's port is not in this namespace
		"direct_remote":    "OSError:101",                // ENETUNREACH: no route
		"direct_remote6":   "OSError:101",
		"dns_udp":          "OSError:101",
		"getaddrinfo":      "gaierror",
		"bind_bridge":      "OSError:98", // EADDRINUSE
		"sni_mismatch":     "SSLError",
	} {
		if got, _ := out[key].(string); got != want {
			t.Errorf("%s: %q, want %q", key, got, want)
		}
	}
	if n := e.deniedHits.Load(); n != 0 {
		t.Errorf("the denied server saw %d requests", n)
	}
	nu := res.Network
	if nu == nil {
		t.Fatal("no network use in the result")
	}
	if !nu.Capped || nu.Sent+nu.Received > maxBytes {
		t.Errorf("byte cap: capped=%v, %d bytes through a cap of %d", nu.Capped, nu.Sent+nu.Received, maxBytes)
	}
	rules := map[string]bool{}
	for _, c := range nu.Connections {
		rules[c.Rule] = true
		if c.Addr == "169.254.169.254" && c.Verdict != "refused" {
			t.Errorf("the metadata address was connected to: %+v", c)
		}
	}
	for _, r := range []string{"domain", "ip-literal", "metadata", "sni-mismatch", "byte-cap"} {
		if !rules[r] {
			t.Errorf("no connection refused by rule %q in %+v", r, nu.Connections)
		}
	}
}

// TestEgressPipAndNode: pip downloads from a local index through the proxy, and node
// reaches an allowed name through a CONNECT tunnel. Node 20's fetch ignores the proxy
// variables, and so has no route at all.
func TestEgressPipAndNode(t *testing.T) {
	sb := egressSandbox(t)
	e := newEgressServers(t)
	P, S := e.port(e.plain), e.port(e.secure)
	// A missing package is not a missing kernel feature: this skips loudly even under
	// AIRLOCK_REQUIRE_SANDBOX (the container images have no pip); CI's host run installs
	// both.
	for _, need := range []string{"/usr/lib/python3/dist-packages/pip", "/usr/bin/node"} {
		if _, err := os.Stat(need); err != nil {
			t.Skipf("SKIPPING THE PIP AND NODE CLIENTS: %s is not installed (apt-get install python3-pip nodejs): %v", need, err)
		}
	}
	pip := sandbox.Spec{
		Argv: []string{python, "-m", "pip", "download", "--no-cache-dir", "--no-deps", "--disable-pip-version-check",
			"--cert", "/workspace/ca.pem", "--index-url", fmt.Sprintf("https://allowed.test:%d/simple", S), "-d", "/workspace/dl", "demo"},
		Files:   []sandbox.File{{Path: "ca.pem", Data: e.caPEM}},
		Network: sandbox.NetworkAllowlist, Egress: e.egress(8 << 20),
		Limits: sandbox.Limits{Wall: 60 * time.Second, Memory: 512 << 20},
		OutDir: "dl", Artifacts: sandbox.ArtifactLimits{MaxFiles: 4, MaxFileBytes: 1 << 20, MaxTotal: 1 << 20},
	}
	res, err := sb.Run(context.Background(), withDefaults(pip))
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("pip download: %v %s", err, brief(res))
	}
	if len(res.Artifacts) != 1 || !bytes.Equal(res.Artifacts[0].Data, e.wheel) {
		t.Errorf("pip downloaded %+v, want the demo wheel", res.Artifacts)
	}

	node := "/usr/bin/node"
	script := fmt.Sprintf(`
const http = require("http"), tls = require("tls"), fs = require("fs");
const out = {};
const proxy = new URL(process.env.HTTPS_PROXY);
const req = http.request({host: proxy.hostname, port: proxy.port, method: "CONNECT", path: "allowed.test:%d"});
req.on("connect", (res, sock) => {
  const t = tls.connect({socket: sock, servername: "allowed.test", ca: fs.readFileSync("ca.pem")}, () => {
    t.write("GET / HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n");
  });
  let body = "";
  t.on("data", d => body += d);
  t.on("end", async () => {
    out.tunnel = body.split("\r\n\r\n")[1];
    try { await fetch("http://allowed.test:%d/"); out.fetch = "reached"; }
    catch (e) { out.fetch = "failed"; }
    console.log(JSON.stringify(out));
  });
  t.on("error", e => { out.tunnel = "error " + e.message; console.log(JSON.stringify(out)); });
});
req.on("error", e => { out.tunnel = "connect error " + e.message; console.log(JSON.stringify(out)); });
req.end();
`, S, P)
	ns := sandbox.Spec{Argv: []string{node, "main.js"}, Code: []byte(script), CodeFile: "main.js",
		Files:   []sandbox.File{{Path: "ca.pem", Data: e.caPEM}},
		Network: sandbox.NetworkAllowlist, Egress: e.egress(8 << 20),
		Limits: sandbox.Limits{Wall: 60 * time.Second, Memory: 1 << 30, AddressSpace: 16 << 30}}
	res, err = sb.Run(context.Background(), withDefaults(ns))
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("node: %v %s", err, brief(res))
	}
	var out struct{ Tunnel, Fetch string }
	if err := json.Unmarshal(bytes.TrimSpace(res.Stdout.Bytes()), &out); err != nil {
		t.Fatalf("node output: %v %s", err, brief(res))
	}
	if out.Tunnel != "tls ok" || out.Fetch != "failed" {
		t.Errorf("node: %+v, want the tunnel to work and the proxy-less fetch to fail", out)
	}
}

// fetchProgram prints the status of one request through the proxy.
const fetchProgram = `
import sys, urllib.request, urllib.error
try:
    with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
        print(r.status, r.read().decode()[:100])
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode()[:100])
`

// TestEgressTwoCallsInFlight: two sandboxes at once, each bridged to its own call's
// proxy: the call whose allowlist lacks the name is refused while the other is served.
func TestEgressTwoCallsInFlight(t *testing.T) {
	sb := egressSandbox(t)
	e := newEgressServers(t)
	u := fmt.Sprintf("http://allowed.test:%d/", e.port(e.plain))
	narrow := e.egress(1 << 20)
	narrow.Domains = []string{"index.test"}
	var wg sync.WaitGroup
	out := make([]sandbox.Result, 8)
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			eg := e.egress(1 << 20)
			if i%2 == 1 {
				eg = narrow
			}
			res, err := sb.Run(context.Background(), withDefaults(sandbox.Spec{Argv: []string{python, "-I", "-S", "main.py", u},
				Code: []byte(fetchProgram), CodeFile: "main.py", Network: sandbox.NetworkAllowlist, Egress: eg}))
			if err != nil {
				t.Errorf("run %d: %v", i, err)
			}
			out[i] = res
		}()
	}
	wg.Wait()
	for i, res := range out {
		got := strings.TrimSpace(string(res.Stdout.Bytes()))
		want := "200 hello from allowed.test"
		if i%2 == 1 {
			want = "403 airlock egress proxy: domain:"
		}
		if !strings.HasPrefix(got, want) {
			t.Errorf("run %d: %q, want %q (%s)", i, got, want, brief(res))
		}
	}
}

// TestEgressWarmPool: a sandbox prepared before its call gets the call's allowlist.
func TestEgressWarmPool(t *testing.T) {
	egressSandbox(t)
	sb, err := New(sandbox.Options{})
	sandboxtest.Require(t, err)
	defer sb.Close()
	sb.resolver = egressDNS
	e := newEgressServers(t)
	tmpl := withDefaults(sandbox.Spec{Argv: []string{python, "-I", "-S"}, CodeFile: "main.py",
		Network: sandbox.NetworkAllowlist, Egress: e.egress(1 << 20)})
	sb.Warm([]sandbox.Spec{tmpl}, 1)
	deadline := time.Now().Add(10 * time.Second)
	for sb.PoolStats().Ready == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	narrow := e.egress(1 << 20)
	narrow.Domains = []string{"index.test"}
	for _, tc := range []struct {
		eg   *sandbox.Egress
		want string
	}{{e.egress(1 << 20), "200 hello"}, {narrow, "403 "}} {
		spec := tmpl
		spec.Argv = append(slices.Clone(tmpl.Argv), "main.py", fmt.Sprintf("http://allowed.test:%d/", e.port(e.plain)))
		spec.Code, spec.Egress = []byte(fetchProgram), tc.eg
		before := sb.PoolStats().Hits
		res, err := sb.Run(context.Background(), withDefaults(spec))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(res.Stdout.Bytes()); !strings.HasPrefix(got, tc.want) {
			t.Errorf("pooled run with %q: %q, want %q (%s)", tc.eg.Domains, got, tc.want, brief(res))
		}
		if sb.PoolStats().Hits == before {
			t.Log("served cold: the pool was not ready")
		}
		for sb.PoolStats().Ready == 0 && time.Now().Before(deadline.Add(10*time.Second)) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if sb.PoolStats().Hits == 0 {
		t.Error("no run was served from the pool")
	}
}

// floodProgram opens 1,000 connections to the bridge in rounds of 200 (garbage on some,
// a request head that never ends on others, nothing on the rest), then asks for an
// allowed page, retrying while the proxy is still freeing the flood's slots.
const floodProgram = `
import socket, sys, time, urllib.request, urllib.error
opened = 0
for _ in range(5):
    socks = []
    for i in range(200):
        try:
            s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
        except OSError:
            continue
        opened += 1
        if i % 3 == 0:
            s.sendall(b"\x00\xff\xfe garbage\r\n\r\n")
        elif i % 3 == 1:
            s.sendall(b"GET http://allowed.test/ HTTP/1.1\r\nX-Slow: ")
        socks.append(s)
    for s in socks:
        s.close()
deadline = time.time() + 10
while True:
    try:
        with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
            print(opened, r.status)
            break
    except urllib.error.HTTPError as e:
        if b"connection-cap" not in e.read() or time.time() > deadline:
            print(opened, e.code)
            break
        time.sleep(0.05)
`

// TestEgressFloodFromOneCall: the proxy bounds one call's flood of connections and
// still serves it afterwards; nothing of the flood outlives the call.
func TestEgressFloodFromOneCall(t *testing.T) {
	sb := egressSandbox(t)
	e := newEgressServers(t)
	before := runtime.NumGoroutine()
	res, err := sb.Run(context.Background(), withDefaults(sandbox.Spec{
		Argv: []string{python, "-I", "-S", "main.py", fmt.Sprintf("http://allowed.test:%d/", e.port(e.plain))},
		Code: []byte(floodProgram), CodeFile: "main.py", Network: sandbox.NetworkAllowlist, Egress: e.egress(1 << 20),
		Limits: sandbox.Limits{Wall: 60 * time.Second}}))
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("flood: %v %s", err, brief(res))
	}
	if got := strings.TrimSpace(string(res.Stdout.Bytes())); got != "1000 200" {
		t.Errorf("flood program: %q, want 1000 connections opened and the page served after", got)
	}
	nu := res.Network
	if nu == nil || nu.Allowed+nu.Refused < 1000 || nu.Omitted == 0 || len(nu.Connections) > 256 {
		t.Errorf("network use after the flood: %+v", nu)
	}
	sb.Wait()
	time.Sleep(100 * time.Millisecond)
	if after := runtime.NumGoroutine(); after > before+10 {
		t.Errorf("%d goroutines after the call, %d before", after, before)
	}
}
