package egress

import (
	"bufio"
	"bytes"
	"errors"
	"net/netip"
	"testing"

	"github.com/airlock-mcp/airlock/internal/tlstest"
	"github.com/airlock-mcp/airlock/sandbox"
)

func TestNormalizePattern(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"PyPI.org", "pypi.org"},
		{"pypi.org.", "pypi.org"},
		{"*.PythonHosted.org", "*.pythonhosted.org"},
		{"10.0.0.1", "10.0.0.1"},
		{"[::1]", "::1"},
		{"::ffff:1.2.3.4", "1.2.3.4"},
		{"_srv.example.org", "_srv.example.org"},
		{"1e100.net", "1e100.net"},
		{"127.0.0.1.", "127.0.0.1"},
	} {
		got, err := NormalizePattern(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("NormalizePattern(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "*", "*.", "a..b", "ex ample.org", "*.*.org", "a*.org", "*.1.2.3.4x/", "exa\x00mple.org", "fe80::1%eth0", "*.10.0.0.1",
		// Numbers resolvers read as addresses (inet_aton): 127.0.0.1 in other spellings.
		"127.1", "0x7f.1", "0177.0.0.1", "2130706433", "0x7f000001", "*.example.0x1", "a.0x"} {
		if got, err := NormalizePattern(bad); err == nil {
			t.Errorf("NormalizePattern(%q) = %q, want an error", bad, got)
		}
	}
}

func TestMatchPattern(t *testing.T) {
	for _, tc := range []struct {
		pattern, host string
		want          bool
	}{
		{"pypi.org", "pypi.org", true},
		{"pypi.org", "www.pypi.org", false},
		{"pypi.org", "evilpypi.org", false},
		{"*.pythonhosted.org", "files.pythonhosted.org", true},
		{"*.pythonhosted.org", "a.b.pythonhosted.org", true},
		{"*.pythonhosted.org", "pythonhosted.org", false}, // subdomains only
		{"*.pythonhosted.org", "evilpythonhosted.org", false},
		{"*.pythonhosted.org", "pythonhosted.org.evil.com", false},
	} {
		if got := matchPattern(tc.pattern, tc.host); got != tc.want {
			t.Errorf("matchPattern(%q, %q) = %v, want %v", tc.pattern, tc.host, got, tc.want)
		}
	}
}

func TestNarrow(t *testing.T) {
	op := []string{"pypi.org", "*.pythonhosted.org", "10.1.2.3"}
	for _, tc := range []struct {
		call []string
		want []string
	}{
		{nil, op},
		{[]string{"PyPI.org"}, []string{"pypi.org"}},
		{[]string{"files.pythonhosted.org"}, []string{"files.pythonhosted.org"}},
		{[]string{"*.files.pythonhosted.org"}, []string{"*.files.pythonhosted.org"}},
		{[]string{"*.pythonhosted.org", "10.1.2.3"}, []string{"*.pythonhosted.org", "10.1.2.3"}},
	} {
		got, err := Narrow(op, tc.call)
		if err != nil || !equal(got, tc.want) {
			t.Errorf("Narrow(%q) = %q, %v; want %q", tc.call, got, err, tc.want)
		}
	}
	// Each of these would widen the operator's list.
	for _, call := range [][]string{{"evil.org"}, {"pythonhosted.org"}, {"*.org"}, {"*.pypi.org"}, {"10.1.2.4"}, {"pypi.org", "evil.org"}, {"*"}} {
		if got, err := Narrow(op, call); !errors.Is(err, ErrPattern) {
			t.Errorf("Narrow(%q) = %q, %v; want ErrPattern", call, got, err)
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestDeniedAddr(t *testing.T) {
	for _, tc := range []struct {
		addr string
		// The rule with nothing opened, with allow_private, with allow_loopback.
		strict, allowPrivate, allowLoopback string
	}{
		{"93.184.215.14", "", "", ""},
		{"2606:4700::1111", "", "", ""},
		{"127.0.0.1", "loopback", "loopback", ""},
		{"127.8.9.10", "loopback", "loopback", ""},
		{"::1", "loopback", "loopback", ""},
		{"10.0.0.1", "private", "", "private"},
		{"172.16.0.1", "private", "", "private"},
		{"172.31.255.255", "private", "", "private"},
		{"172.32.0.1", "", "", ""},
		{"192.168.1.1", "private", "", "private"},
		{"169.254.1.1", "link-local", "", "link-local"},
		{"fe80::1", "link-local", "", "link-local"},
		{"100.64.0.1", "cgnat", "", "cgnat"},
		{"100.127.255.255", "cgnat", "", "cgnat"},
		{"fd12:3456::1", "ula", "", "ula"},
		{"fc00::1", "ula", "", "ula"},
		// Documentation ranges are never on the internet; labs number networks with
		// them (this host's eth0 is 192.0.2.2/24, its gateway 192.0.2.1).
		{"192.0.2.1", "documentation", "", "documentation"},
		{"198.51.100.7", "documentation", "", "documentation"},
		{"203.0.113.9", "documentation", "", "documentation"},
		{"2001:db8::1", "documentation", "", "documentation"},
		// Never a destination, allow_private or not.
		{"169.254.169.254", "metadata", "metadata", "metadata"},
		{"fd00:ec2::254", "metadata", "metadata", "metadata"},
		{"100.100.100.200", "metadata", "metadata", "metadata"},
		{"169.254.0.23", "metadata", "metadata", "metadata"},
		{"192.0.0.192", "metadata", "metadata", "metadata"},
		{"168.63.129.16", "metadata", "metadata", "metadata"},
		{"::ffff:168.63.129.16", "metadata", "metadata", "metadata"},
		// Inside the link-local and ULA ranges allow_private opens: still never.
		{"fd20:ce::254", "metadata", "metadata", "metadata"},      // GCP IPv6
		{"169.254.170.23", "metadata", "metadata", "metadata"},    // EKS Pod Identity
		{"fd00:ec2::23", "metadata", "metadata", "metadata"},      // EKS Pod Identity IPv6
		{"fd00:a9fe:a9fe::1", "metadata", "metadata", "metadata"}, // Akamai (Linode) IPv6
		{"169.254.42.42", "metadata", "metadata", "metadata"},     // Scaleway
		{"fd00:42::42", "metadata", "metadata", "metadata"},       // Scaleway IPv6
		{"fe80::a9fe:a9fe", "metadata", "metadata", "metadata"},   // OpenStack IPv6
		{"0.0.0.0", "unspecified", "unspecified", "unspecified"},
		{"::", "unspecified", "unspecified", "unspecified"},
		{"224.0.0.1", "multicast", "multicast", "multicast"},
		{"ff02::1", "multicast", "multicast", "multicast"},
		{"255.255.255.255", "reserved", "reserved", "reserved"},
		// IPv6 spellings of IPv4 addresses are judged by the IPv4 address.
		{"::ffff:127.0.0.1", "loopback", "loopback", ""},
		{"::ffff:169.254.169.254", "metadata", "metadata", "metadata"},
		{"64:ff9b::a00:1", "private", "", "private"},
		{"64:ff9b::a9fe:a9fe", "metadata", "metadata", "metadata"},
		{"2002:a9fe:a9fe::1", "metadata", "metadata", "metadata"},
		{"2002:7f00:1::1", "loopback", "loopback", ""},
		{"::127.0.0.1", "loopback", "loopback", ""},
		{"::ffff:0:7f00:1", "loopback", "loopback", ""},
		{"::ffff:0:a9fe:a9fe", "metadata", "metadata", "metadata"},
		{"64:ff9b::5db8:d70e", "", "", ""},
		// The local-use NAT64 prefix (RFC 8215) is a /48: a translator may use any RFC
		// 6052 length from 48 to 96, each placing the IPv4 address elsewhere.
		{"64:ff9b:1:a9fe:a9:fe00::", "metadata", "metadata", "metadata"}, // /48
		{"64:ff9b:1:a9:fe:a9fe::", "metadata", "metadata", "metadata"},   // /56
		{"64:ff9b:1:0:7f:0:100:0", "loopback", "loopback", ""},           // /64
		{"64:ff9b:1::a9fe:a9fe", "metadata", "metadata", "metadata"},     // /96
		{"64:ff9b:1:5db8:d7:e00::", "", "", ""},                          // a public address, /48
		{"64:ff9b:1:0:5d:b8d7:e00:0", "", "", ""},                        // /64
		{"64:ff9b:1::5db8:d70e", "", "", ""},                             // /96
		{"64:ff9b:1::", "unspecified", "unspecified", "unspecified"},
	} {
		a := netip.MustParseAddr(tc.addr)
		if got := DeniedAddr(a, sandbox.Egress{}); got != tc.strict {
			t.Errorf("DeniedAddr(%s) = %q, want %q", a, got, tc.strict)
		}
		if got := DeniedAddr(a, sandbox.Egress{AllowPrivate: true}); got != tc.allowPrivate {
			t.Errorf("DeniedAddr(%s, allow_private) = %q, want %q", a, got, tc.allowPrivate)
		}
		if got := DeniedAddr(a, sandbox.Egress{AllowLoopback: true}); got != tc.allowLoopback {
			t.Errorf("DeniedAddr(%s, allow_loopback) = %q, want %q", a, got, tc.allowLoopback)
		}
	}
}

func TestDecide(t *testing.T) {
	cfg := sandbox.Egress{Domains: []string{"pypi.org", "*.example.org", "93.184.215.14"}, Ports: []int{443, 80}}
	for _, tc := range []struct {
		host string
		port int
		rule string // "" allowed
	}{
		{"pypi.org", 443, ""},
		{"PYPI.ORG.", 80, ""},
		{"a.example.org", 443, ""},
		{"example.org", 443, "domain"},
		{"pypi.org", 22, "port"},
		{"evil.com", 443, "domain"},
		{"1.2.3.4", 443, "ip-literal"},
		{"[::1]", 443, "ip-literal"},
		{"93.184.215.14", 443, ""}, // listed literally
		{"pypi.org\x00.evil", 443, "domain"},
		// strings.ToLower maps the Kelvin sign to k: the name checked would be
		// kelvin.example.org's, the name looked up another.
		{"\u212aelvin.example.org", 443, "domain"},
		{"p\u0131pi.org", 443, "domain"},
		{"", 443, "domain"},
	} {
		r := Decide(cfg, tc.host, tc.port)
		got := ""
		if r != nil {
			got = r.Rule
		}
		if got != tc.rule {
			t.Errorf("Decide(%q, %d) = %q (%v), want %q", tc.host, tc.port, got, r, tc.rule)
		}
	}
	// A mixed answer is refused as a whole.
	addrs := []netip.Addr{netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("10.0.0.1")}
	if r := CheckAddrs("pypi.org", addrs, sandbox.Egress{}); r == nil || r.Rule != "private" {
		t.Errorf("CheckAddrs(public+private) = %v, want private", r)
	}
	if r := CheckAddrs("pypi.org", nil, sandbox.Egress{}); r == nil {
		t.Error("CheckAddrs(no answer) allowed")
	}
}

func TestClientHelloSNI(t *testing.T) {
	for _, name := range []string{"pypi.org", "files.pythonhosted.org", ""} {
		b := tlstest.Hello(t, name, nil)
		raw, hello, err := readClientHello(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			t.Fatalf("readClientHello(%q): %v", name, err)
		}
		if !bytes.Equal(raw, b) {
			t.Errorf("raw bytes differ from what was read")
		}
		got, err := helloSNI(hello)
		if err != nil || got != name {
			t.Errorf("helloSNI = %q, %v; want %q", got, err, name)
		}
	}
	// The same hello split over records of one byte each.
	b := tlstest.Hello(t, "pypi.org", nil)
	body := b[5:]
	var split []byte
	for _, c := range body {
		split = append(split, 22, 3, 1, 0, 1, c)
	}
	_, hello, err := readClientHello(bufio.NewReader(bytes.NewReader(split)))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := helloSNI(hello); got != "pypi.org" {
		t.Errorf("split hello: SNI %q", got)
	}
	for name, bad := range map[string][]byte{
		"not handshake": {23, 3, 3, 0, 1, 0},
		"empty record":  {22, 3, 3, 0, 0},
		"huge record":   {22, 3, 3, 0xff, 0xff},
		"truncated":     b[:len(b)-10],
		"server hello":  {22, 3, 3, 0, 4, 2, 0, 0, 0},
	} {
		if _, _, err := readClientHello(bufio.NewReader(bytes.NewReader(bad))); err == nil {
			t.Errorf("%s: readClientHello accepted it", name)
		}
	}
	if _, err := helloSNI([]byte{3, 3}); err == nil {
		t.Error("helloSNI accepted a truncated hello")
	}
}

func FuzzHelloSNI(f *testing.F) {
	b := tlstest.Hello(f, "pypi.org", nil)
	f.Add(b[9:])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, hello []byte) {
		name, err := helloSNI(hello)
		if err != nil && name != "" {
			t.Fatalf("a name with an error: %q", name)
		}
	})
}

func FuzzReadClientHello(f *testing.F) {
	f.Add(tlstest.Hello(f, "pypi.org", nil))
	f.Add([]byte{22, 3, 1, 0, 1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		raw, hello, err := readClientHello(bufio.NewReader(bytes.NewReader(b)))
		if len(raw) > len(b) {
			t.Fatalf("read %d of %d bytes", len(raw), len(b))
		}
		if err == nil && len(hello) > maxClientHello {
			t.Fatalf("hello of %d bytes", len(hello))
		}
	})
}

func FuzzNormalizePattern(f *testing.F) {
	for _, s := range []string{"pypi.org", "*.a.b", "10.0.0.1", "[::1]", "*."} {
		f.Add(s, "x.a.b")
	}
	f.Fuzz(func(t *testing.T, p, host string) {
		n, err := NormalizePattern(p)
		if err != nil {
			return
		}
		again, err := NormalizePattern(n)
		if err != nil || again != n {
			t.Fatalf("not idempotent: %q → %q → %q, %v", p, n, again, err)
		}
		// A pattern always covers itself, and a narrowed list never admits more.
		if !covers(n, n) {
			t.Fatalf("%q does not cover itself", n)
		}
		if h, ok := normalizeHost(host); ok && matchPattern(n, h) {
			if got, err := Narrow([]string{n}, []string{h}); err != nil || len(got) != 1 {
				t.Fatalf("Narrow([%q], [%q]) = %q, %v", n, h, got, err)
			}
		}
	})
}

// TestCheckServerPort: with allow_loopback, the server's own HTTP port on the list is
// refused at start; without allow_loopback, or on another port, it is not.
func TestCheckServerPort(t *testing.T) {
	open := &sandbox.Egress{Ports: []int{443, 8765}, AllowLoopback: true}
	for _, tc := range []struct {
		e      *sandbox.Egress
		listen string
		bad    bool
	}{
		{open, "127.0.0.1:8765", true},
		{open, "[::1]:8765", true},
		{open, "0.0.0.0:8765", true},
		{open, "127.0.0.1:8766", false},
		{open, "127.0.0.1:0", false},
		{&sandbox.Egress{Ports: []int{8765}, AllowPrivate: true}, "127.0.0.1:8765", false},
		{nil, "127.0.0.1:8765", false},
	} {
		if err := CheckServerPort(tc.e, tc.listen); (err != nil) != tc.bad {
			t.Errorf("CheckServerPort(%+v, %s) = %v, want refused=%t", tc.e, tc.listen, err, tc.bad)
		}
	}
}
