package linux

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/internal/tlstest"
	"github.com/airlock-mcp/airlock/sandbox"
)

// rawProgram sends each request of a JSON table, byte for byte, to the bridge
// (127.0.0.1:3128, the proxy outside) and prints, per key, the status code of the answer
// and the X-Airlock-Egress-Rule it names, or the body's first bytes when it names none.
const rawProgram = `
import json, socket, sys
out = {}
for key, raw in json.load(open("reqs.json")).items():
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
        s.sendall(raw.encode("latin-1"))
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
        s.close()
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        code = lines[0].split(" ")[1] if lines[0].startswith("HTTP/") else "?"
        rule = [l.split(":", 1)[1].strip() for l in lines[1:] if l.lower().startswith("x-airlock-egress-rule:")]
        out[key] = code + " " + (rule[0] if rule else body.decode("latin-1")[:40])
    except Exception as e:
        out[key] = type(e).__name__
print(json.dumps(out))
`

// runRaw runs rawProgram over reqs in a sandbox with eg and returns what it printed,
// or nil after reporting why not (it may run on a goroutine of its own).
func runRaw(t *testing.T, eg *sandbox.Egress, reqs map[string]string) map[string]string {
	t.Helper()
	table, _ := json.Marshal(reqs)
	res, err := egressSandbox(t).Run(context.Background(), withDefaults(sandbox.Spec{
		Argv: []string{python, "-I", "-S", "main.py"}, Code: []byte(rawProgram), CodeFile: "main.py",
		Files:   []sandbox.File{{Path: "reqs.json", Data: table}},
		Network: sandbox.NetworkAllowlist, Egress: eg, Limits: sandbox.Limits{Wall: 60 * time.Second}}))
	if err != nil || res.Status != sandbox.StatusOK {
		t.Errorf("run: %v %s", err, brief(res))
		return nil
	}
	out := map[string]string{}
	lines := strings.Split(strings.TrimSpace(string(res.Stdout.Bytes())), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &out); err != nil {
		t.Errorf("decode: %v (%s)", err, brief(res))
		return nil
	}
	return out
}

// TestEgressHostileRequests: from inside a sandbox, requests that spell a destination
// the allowlist does not name in ways a parser may read differently (IP literals in
// decimal, octal, hex and short forms, IPv6 spellings of loopback and metadata, zone
// ids, userinfo, percent-encoding, schemes, origin-form, ports not listed, heads too
// large, a TLS port named through plain HTTP) are each refused by the rule that says
// why, and the server nobody may reach sees none of them.
func TestEgressHostileRequests(t *testing.T) {
	e := newEgressServers(t)
	P, S, D := e.port(e.plain), e.port(e.secure), e.port(e.denied)
	d := strconv.Itoa(D)
	get := func(target string, hdrs ...string) string {
		return "GET " + target + " HTTP/1.1\r\n" + strings.Join(hdrs, "") + "\r\n"
	}
	conn := func(authority string) string {
		return "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n"
	}
	reqs := map[string]string{
		"decimal":         get("http://2130706433:" + d + "/"),
		"octal":           get("http://0177.0.0.1:" + d + "/"),
		"hex":             get("http://0x7f.0.0.1:" + d + "/"),
		"short":           get("http://127.1:" + d + "/"),
		"dotted_literal":  get("http://127.0.0.1:" + d + "/"),
		"v6_loopback":     get("http://[::1]:" + d + "/"),
		"v4_mapped":       get("http://[::ffff:127.0.0.1]:" + d + "/"),
		"v4_compatible":   conn("[::127.0.0.1]:" + d),
		"nat64":           conn("[64:ff9b::7f00:1]:" + d),
		"zone_id":         get("http://[fe80::1%25lo]:" + d + "/"),
		"mapped_metadata": conn("[::ffff:169.254.169.254]:80"),
		"metadata_name":   conn("metadata.test:80"),
		"userinfo":        get("http://allowed.test@denied.test:" + d + "/"),
		"userinfo_tunnel": conn("allowed.test@denied.test:" + d),
		"percent":         get("http://denied%2etest:" + d + "/"),
		"idn":             get("http://d\u00e9nied.test:" + d + "/"),
		"punycode":        get("http://xn--dnied-bsa.test:" + d + "/"),
		"https_absolute":  get("https://allowed.test:" + strconv.Itoa(S) + "/"),
		"origin_form":     get("/", "Host: denied.test:"+d+"\r\n"),
		"port_unlisted":   get("http://allowed.test:22/"),
		"port_zero":       conn("allowed.test:0"),
		"port_overflow":   conn("allowed.test:65616"),
		"proxy_itself":    get("http://127.0.0.1:3128/"),
		"localhost":       conn("localhost:" + d),
		"huge_head":       get("http://allowed.test:"+strconv.Itoa(P)+"/", "X-Pad: "+strings.Repeat("a", 80<<10)+"\r\n"),
		"obs_fold":        get("http://allowed.test:"+strconv.Itoa(P)+"/", "X-A: 1\r\n Host: denied.test\r\n"),
		"two_hosts":       get("http://allowed.test:"+strconv.Itoa(P)+"/", "Host: denied.test:"+d+"\r\n", "Host: denied.test:"+d+"\r\n"),
		// The checks that must still let the allowed name through, spelled otherwise.
		"upper_trailing_dot": get("http://ALLOWED.Test.:"+strconv.Itoa(P)+"/", "Host: denied.test:"+d+"\r\n"),
	}
	// Cloud metadata addresses inside the ranges allow_private opens stay refused.
	egressDNS.mu.Lock()
	egressDNS.answers["tencent.test"] = []netip.Addr{netip.MustParseAddr("169.254.0.23")}
	egressDNS.answers["oracle.test"] = []netip.Addr{netip.MustParseAddr("192.0.0.192")}
	egressDNS.answers["gcp6.test"] = []netip.Addr{netip.MustParseAddr("fd20:ce::254")}
	egressDNS.answers["eks.test"] = []netip.Addr{netip.MustParseAddr("169.254.170.23")}
	egressDNS.mu.Unlock()
	reqs["tencent_metadata"] = get("http://tencent.test:80/")
	reqs["oracle_metadata"] = conn("oracle.test:80")
	reqs["gcp_v6_metadata"] = conn("gcp6.test:80")
	reqs["eks_credentials"] = get("http://eks.test:80/")
	eg := e.egress(1 << 20)
	eg.Domains = append(eg.Domains, "tencent.test", "oracle.test", "gcp6.test", "eks.test")
	out := runRaw(t, eg, reqs)
	if out == nil {
		return
	}
	want := map[string]string{
		"decimal": "403 domain", "octal": "403 domain", "hex": "403 domain", "short": "403 domain",
		"dotted_literal": "403 ip-literal", "v6_loopback": "403 ip-literal", "v4_mapped": "403 ip-literal",
		"v4_compatible": "403 ip-literal", "nat64": "403 ip-literal", "mapped_metadata": "403 ip-literal",
		"metadata_name": "403 metadata", "tencent_metadata": "403 metadata", "oracle_metadata": "403 metadata",
		"gcp_v6_metadata": "403 metadata", "eks_credentials": "403 metadata",
		"userinfo": "403 domain", "userinfo_tunnel": "403 domain",
		"idn": "403 domain", "punycode": "403 domain",
		"https_absolute": "400 not-a-proxy-request", "origin_form": "400 not-a-proxy-request",
		"port_unlisted": "403 port", "port_zero": "400 malformed-request", "port_overflow": "400 malformed-request",
		"proxy_itself": "403 ip-literal", "localhost": "403 domain",
		"upper_trailing_dot": "200 hello from ALLOWED.Test.",
	}
	for key, w := range want {
		if got := out[key]; !strings.HasPrefix(got, w) {
			t.Errorf("%s: %q, want %q", key, got, w)
		}
	}
	// The parser refuses these before any rule (400), or reads them as the allowed name
	// alone; either way nothing reaches the denied server (checked below).
	for _, key := range []string{"zone_id", "percent", "huge_head", "obs_fold", "two_hosts"} {
		if got := out[key]; !strings.HasPrefix(got, "400 ") && !strings.HasPrefix(got, "403 ") && !strings.HasPrefix(got, "200 hello from allowed.test") {
			t.Errorf("%s: %q, want it refused or served by the allowed name", key, got)
		}
	}
	if n := e.deniedHits.Load(); n != 0 {
		t.Errorf("the denied server saw %d requests", n)
	}
	t.Logf("%v", out)
}

// hostService is a server on every interface of the host, as sshd or the server's own
// HTTP transport listens; hits counts the requests that reached it, by path.
func hostService(t *testing.T) (port int, hits func() map[string]int) {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]int{}
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path]++
		mu.Unlock()
		fmt.Fprint(w, "host service")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(seen)
	}
}

// ownAddr is one of the host's own addresses that is not loopback (eth0's); false on a
// host with none (a container without a network).
func ownAddr(t *testing.T) (netip.Addr, bool) {
	t.Helper()
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, ia := range ifs {
		if n, ok := ia.(*net.IPNet); ok {
			if a, ok := netip.AddrFromSlice(n.IP); ok && !a.IsLoopback() && !a.IsLinkLocalUnicast() {
				return a.Unmap(), true
			}
		}
	}
	return netip.Addr{}, false
}

// TestEgressPrivateIsNotThisHost: allow_private opens other hosts of private networks
// (an internal package index at 10.x), not this host: with it alone, a listed name that
// resolves to loopback or to one of the host's own addresses is refused, so the server's
// own HTTP port and the host's other services stay out of reach. allow_loopback opens
// them, explicitly: a call with it, in flight at the same time, is served, and neither
// call's proxy answers by the other's settings.
func TestEgressPrivateIsNotThisHost(t *testing.T) {
	egressSandbox(t)
	port, hits := hostService(t)
	own, hasOwn := ownAddr(t)
	if !hasOwn {
		t.Log("THIS HOST HAS NO ADDRESS BUT LOOPBACK AND LINK-LOCAL ONES: the own-address attempts are not made, loopback's are")
		own = netip.MustParseAddr("127.0.0.1")
	}
	egressDNS.mu.Lock()
	egressDNS.answers["self.test"] = []netip.Addr{own}
	egressDNS.answers["local.test"] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	egressDNS.mu.Unlock()
	p := strconv.Itoa(port)
	reqs := func(path string) map[string]string {
		return map[string]string{
			"loopback":        "GET http://local.test:" + p + path + " HTTP/1.1\r\n\r\n",
			"own_address":     "GET http://self.test:" + p + path + " HTTP/1.1\r\n\r\n",
			"own_tunnel":      "CONNECT self.test:" + p + " HTTP/1.1\r\n\r\n",
			"loopback_tunnel": "CONNECT local.test:" + p + " HTTP/1.1\r\n\r\n",
		}
	}
	private := &sandbox.Egress{Domains: []string{"local.test", "self.test"}, Ports: []int{port}, AllowPrivate: true, MaxBytes: 1 << 20}
	loopback := *private
	loopback.AllowLoopback = true
	open := reqs("/open")
	delete(open, "own_tunnel") // an open tunnel sends nothing and waits for the server
	delete(open, "loopback_tunnel")
	var wg sync.WaitGroup
	var outPrivate, outOpen map[string]string
	wg.Add(2)
	go func() { defer wg.Done(); outPrivate = runRaw(t, private, reqs("/private")) }()
	go func() { defer wg.Done(); outOpen = runRaw(t, &loopback, open) }()
	wg.Wait()
	if outPrivate != nil {
		ownRule := "403 host"
		if !hasOwn {
			ownRule = "403 loopback"
		}
		for key, w := range map[string]string{"loopback": "403 loopback", "loopback_tunnel": "403 loopback",
			"own_address": ownRule, "own_tunnel": ownRule} {
			if got := outPrivate[key]; !strings.HasPrefix(got, w) {
				t.Errorf("allow_private only, %s: %q, want %q", key, got, w)
			}
		}
	}
	if outOpen != nil {
		for _, key := range []string{"loopback", "own_address"} {
			if got := outOpen[key]; got != "200 host service" {
				t.Errorf("allow_loopback, %s: %q, want the host's service", key, got)
			}
		}
	}
	if got := hits(); got["/private"] != 0 || got["/open"] != 2 {
		t.Errorf("the host's service saw %v, want /open twice and /private never", got)
	}
}

// endlessHead is a destination whose answer never ends its head: one header line of up
// to 256 MiB, then silence until the proxy hangs up. It returns the port and how many
// bytes of it were written.
func endlessHead(t *testing.T) (int, *atomic.Int64) {
	t.Helper()
	var sent atomic.Int64
	port := tcpDestination(t, 30*time.Second, func(c net.Conn) {
		buf := make([]byte, 4096)
		_, _ = c.Read(buf)
		n, _ := c.Write([]byte("HTTP/1.1 200 OK\r\nX-Long: "))
		sent.Add(int64(n))
		chunk := []byte(strings.Repeat("a", 64<<10))
		for i := 0; i < 4096; i++ {
			n, err := c.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
		_, _ = c.Read(buf) // silence: the head never ends
	})
	return port, &sent
}

// tcpDestination listens on loopback until the test ends and serves each connection
// with serve, under a deadline of d; it returns the port.
func tcpDestination(t *testing.T, d time.Duration, serve func(net.Conn)) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(d))
				serve(c)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestEgressHostileDestination: an allowed destination that answers a forwarded
// request with a head that never ends costs the server a bounded read, not its memory
// up to the call's byte cap (which an operator may set to GiBs): the program gets a 502
// promptly and the destination's flood is cut short.
func TestEgressHostileDestination(t *testing.T) {
	egressSandbox(t)
	port, sent := endlessHead(t)
	egressDNS.mu.Lock()
	egressDNS.answers["hostile.test"] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	egressDNS.mu.Unlock()
	eg := &sandbox.Egress{Domains: []string{"hostile.test"}, Ports: []int{port}, AllowLoopback: true, MaxBytes: 16 << 30}
	out := runRaw(t, eg, map[string]string{"head": fmt.Sprintf("GET http://hostile.test:%d/ HTTP/1.1\r\n\r\n", port)})
	if got := out["head"]; !strings.HasPrefix(got, "502 bad-response") {
		t.Errorf("an endless response head: %q, want 502 bad-response", got)
	}
	if n := sent.Load(); n > 16<<20 {
		t.Errorf("the destination wrote %d MiB of one header line before the proxy hung up", n>>20)
	}
}

// uploadProgram sends 4 MiB to argv[1] (host:port) three ways: through a CONNECT
// tunnel, as a forwarded POST's body, and as a second request kept alive behind a
// first. It prints how far each got.
const uploadProgram = `
import json, socket, sys
dest = sys.argv[1]
blob = b"\0" * (4 << 20)  # binary: text with no line end would start a request line
out = {}
def attempt(key, first, rest=b""):
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
        s.sendall(first)
        if rest:
            s.recv(4096)
            s.sendall(rest)
        s.shutdown(socket.SHUT_WR)
        while s.recv(65536):
            pass
        out[key] = "done"
    except Exception as e:
        out[key] = type(e).__name__
attempt("tunnel", b"CONNECT %s HTTP/1.1\r\n\r\n" % dest.encode(), blob)
attempt("post", b"POST http://%s/ HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % (dest.encode(), len(blob)) + blob)
attempt("keepalive", b"GET http://%s/ HTTP/1.1\r\n\r\nPOST http://%s/ HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % (dest.encode(), dest.encode(), len(blob)) + blob)
print(json.dumps(out))
`

// TestEgressUploadCapped: the byte cap counts what leaves the sandbox too, over a
// tunnel, a forwarded body and a connection kept alive: a 1 MiB cap lets at most 1 MiB
// of 12 reach the destination.
func TestEgressUploadCapped(t *testing.T) {
	sb := egressSandbox(t)
	var got atomic.Int64
	port := tcpDestination(t, 20*time.Second, func(c net.Conn) {
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			got.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	egressDNS.mu.Lock()
	egressDNS.answers["sink.test"] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	egressDNS.mu.Unlock()
	const maxBytes = 1 << 20
	res, err := sb.Run(context.Background(), withDefaults(sandbox.Spec{
		Argv: []string{python, "-I", "-S", "main.py", fmt.Sprintf("sink.test:%d", port)}, Code: []byte(uploadProgram), CodeFile: "main.py",
		Network: sandbox.NetworkAllowlist, Limits: sandbox.Limits{Wall: 60 * time.Second},
		Egress: &sandbox.Egress{Domains: []string{"sink.test"}, Ports: []int{port}, AllowLoopback: true, MaxBytes: maxBytes}}))
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("run: %v %s", err, brief(res))
	}
	time.Sleep(200 * time.Millisecond)
	if n := got.Load(); n > maxBytes {
		t.Errorf("the destination received %d bytes through a cap of %d (%s)", n, maxBytes, res.Stdout.Bytes())
	}
	if nu := res.Network; nu == nil || !nu.Capped || nu.Sent+nu.Received > maxBytes {
		t.Errorf("network use: %+v, want capped within %d bytes", nu, maxBytes)
	}
	t.Logf("destination got %d bytes; program: %s", got.Load(), strings.TrimSpace(string(res.Stdout.Bytes())))
}

// helloProgram opens tunnels to allowed.test:argv[1] through the bridge and sends TLS
// first flights read from files: an encrypted ClientHello (ECH), and a ClientHello
// followed, once the destination has asked for a retry, by a second one for another
// host. It prints, per attempt, whether the answer was the proxy's alert.
const helloProgram = `
import json, socket, sys
port = int(sys.argv[1])
def recvn(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError
        b += c
    return b
out = {}
def attempt(key, first, second=None):
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
        s.sendall(b"CONNECT allowed.test:%d HTTP/1.1\r\n\r\n" % port)
        head = b""
        while b"\r\n\r\n" not in head:
            head += recvn(s, 1)
        s.sendall(first)
        if second is not None:
            hdr = recvn(s, 5)
            recvn(s, int.from_bytes(hdr[3:5], "big"))
            s.sendall(second)
        s.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
        out[key] = "alert" if data[:1] == b"\x15" else "answer of %d bytes" % len(data)
    except Exception as e:
        out[key] = type(e).__name__
attempt("ech", open("ech.bin", "rb").read())
attempt("second_hello", open("first.bin", "rb").read(), open("second.bin", "rb").read())
print(json.dumps(out))
`

// TestEgressSecondHello: from inside a sandbox, two ways to have an allowed name's front
// end serve another name: an encrypted ClientHello whose outer SNI is the allowed name
// (a front end that offers ECH serves the inner one), and, after the destination's
// HelloRetryRequest, a second ClientHello for another host (OpenSSL servers take its
// SNI). The proxy answers both with its alert and the destination never receives a
// hello for another name.
func TestEgressSecondHello(t *testing.T) {
	sb := egressSandbox(t)
	var mu sync.Mutex
	var got [][]byte
	port := tcpDestination(t, 20*time.Second, func(c net.Conn) {
		var all []byte
		defer func() {
			mu.Lock()
			got = append(got, all)
			mu.Unlock()
		}()
		hdr := make([]byte, 5)
		if _, err := io.ReadFull(c, hdr); err != nil {
			return
		}
		rec := make([]byte, int(hdr[3])<<8|int(hdr[4]))
		if _, err := io.ReadFull(c, rec); err != nil {
			return
		}
		all = append(hdr, rec...)
		_, _ = c.Write(tlstest.HelloRetry())
		rest, _ := io.ReadAll(c)
		all = append(all, rest...)
	})
	_, echList, _ := tlstest.ECHConfig(t, "allowed.test")
	res, err := sb.Run(context.Background(), withDefaults(sandbox.Spec{
		Argv: []string{python, "-I", "-S", "main.py", strconv.Itoa(port)}, Code: []byte(helloProgram), CodeFile: "main.py",
		Files: []sandbox.File{
			{Path: "ech.bin", Data: tlstest.Hello(t, "other.test", echList)},
			{Path: "first.bin", Data: tlstest.Hello(t, "allowed.test", nil)},
			{Path: "second.bin", Data: slices.Concat(tlstest.ChangeCipherSpec, tlstest.Hello(t, "other.test", nil))},
		},
		Network: sandbox.NetworkAllowlist, Limits: sandbox.Limits{Wall: 60 * time.Second},
		Egress: &sandbox.Egress{Domains: []string{"allowed.test"}, Ports: []int{port}, AllowLoopback: true, MaxBytes: 1 << 20}}))
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("run: %v %s", err, brief(res))
	}
	if out := strings.TrimSpace(string(res.Stdout.Bytes())); out != `{"ech": "alert", "second_hello": "alert"}` {
		t.Errorf("program: %s, want the proxy's alert for both", out)
	}
	rules := map[string]bool{}
	if res.Network != nil {
		for _, c := range res.Network.Connections {
			rules[c.Rule] = true
		}
	}
	if !rules["ech"] || !rules["sni-mismatch"] {
		t.Errorf("network use %+v, want connections refused as ech and sni-mismatch", res.Network)
	}
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for _, b := range got {
		if bytes.Contains(b, []byte("other.test")) || bytes.Contains(b, []byte{0xfe, 0x0d}) {
			t.Errorf("the destination received a hello for another name or an encrypted one (%d bytes)", len(b))
		}
	}
}

// vhostServer is Python's http.server as a destination that serves sites by Host, as
// a shared front end on a plain-HTTP port does; it appends each request's Host and
// path to the file it returns.
const vhostServer = `
import http.server, sys
log = open(sys.argv[1], "a", buffering=1)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        log.write("%s %s\n" % (self.headers.get("Host"), self.path))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"site " + self.headers.get("Host", "").encode())
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
`

// TestEgressLenientRequestLine: inside a CONNECT tunnel to an allowed plain-HTTP port,
// a request line whose separators are controls Python's http.server reads as spaces
// (str.split: \v, \f, 0x1c-0x1f) must not reach it unread: relayed as "not HTTP", it was
// a request for any Host, one after another. The proxy refuses such a tunnel
// (http-in-tunnel); a well-formed request line is still forwarded with the CONNECT's
// Host, and the server never sees the Host the program named.
func TestEgressLenientRequestLine(t *testing.T) {
	egressSandbox(t)
	logPath := filepath.Join(t.TempDir(), "hosts")
	cmd := exec.Command(python, "-I", "-S", "-c", vhostServer, logPath)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var port int
	if _, err := fmt.Fscan(stdout, &port); err != nil {
		t.Fatalf("vhost server: %v", err)
	}
	authority := "allowed.test:" + strconv.Itoa(port)
	tunnel := func(line string) string {
		return "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n" +
			line + "\r\nHost: evil.test\r\n\r\n" + "GET /second HTTP/1.1\r\nHost: evil.test\r\n\r\n"
	}
	out := runRaw(t, &sandbox.Egress{Domains: []string{"allowed.test"}, Ports: []int{port}, AllowLoopback: true, MaxBytes: 1 << 20},
		map[string]string{
			"plain":          tunnel("GET /plain HTTP/1.1"),
			"vertical_tab":   tunnel("GET\v/vt\vHTTP/1.1"),
			"form_feed":      tunnel("GET\f/ff\fHTTP/1.1"),
			"unit_separator": tunnel("GET\x1f/us\x1fHTTP/1.1"),
		})
	if out == nil {
		return
	}
	for _, key := range []string{"vertical_tab", "form_feed", "unit_separator"} {
		if !strings.Contains(out[key], "403 Forbidden") {
			t.Errorf("%s: %q, want the proxy's 403 http-in-tunnel", key, out[key])
		}
	}
	time.Sleep(100 * time.Millisecond)
	seen, _ := os.ReadFile(logPath)
	if want := authority + " /plain\n"; string(seen) != want {
		t.Errorf("the vhost server saw %q, want only %q", seen, want)
	}
	t.Logf("%v", out)
}
