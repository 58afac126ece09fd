package egress

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/airlock-mcp/airlock/sandbox"
)

// hostAddrs are this machine's own interface addresses that no address class covers
// (a public, or documentation-range, address on eth0): the ones a name could resolve to
// and reach the server's host past the loopback rule.
func hostAddrs(t *testing.T) []netip.Addr {
	t.Helper()
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []netip.Addr
	for _, ia := range ifs {
		n, ok := ia.(*net.IPNet)
		if !ok {
			continue
		}
		a, ok := netip.AddrFromSlice(n.IP)
		if !ok || a.IsLinkLocalUnicast() {
			continue // a link-local one needs a zone to be dialled
		}
		out = append(out, a.Unmap())
	}
	return out
}

// TestHostOwnAddress: a name that resolves to one of the host's own addresses reaches
// the host's services bound to every interface (sshd, the server's own HTTP transport)
// just as loopback does, whatever class the address is in. It is refused like loopback.
func TestHostOwnAddress(t *testing.T) {
	var seen hits
	ln, err := net.Listen("tcp", ":0") // every interface, as a host service listens
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: seen.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "host service") }))}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	p := ln.Addr().(*net.TCPAddr).Port
	addrs := hostAddrs(t)
	if len(addrs) == 0 {
		t.Fatal("no interface address on this host")
	}
	answers := map[string][][]netip.Addr{}
	var names []string
	for i, a := range addrs {
		name := fmt.Sprintf("host%d.test", i)
		answers[name] = [][]netip.Addr{{a}}
		names = append(names, name)
	}
	dns := &fakeDNS{answers: answers, lookups: map[string]int{}}
	h := newHarness(t, sandbox.Egress{Domains: names, Ports: []int{p}}, dns)
	c := h.client(nil)
	for i, name := range names {
		code, body := get(t, c, fmt.Sprintf("http://%s:%d/", name, p))
		if code != http.StatusForbidden || strings.Contains(body, "host service") {
			t.Errorf("%s resolving to %s, an address of this host: %d %q, want 403", name, addrs[i], code, body)
		}
	}
	if n := seen.n.Load(); n != 0 {
		t.Errorf("the host's service saw %d requests through the proxy", n)
	}
}

// TestHostOwnAddressEmbedded: an IPv6 spelling of one of the host's own IPv4 addresses
// (NAT64, 6to4, IPv4-compatible, translated) is the host too wherever the network
// carries it to that address (a NAT64 gateway, a sit tunnel): with allow_private, which
// opens the IPv4 address's class but not this host, it is refused as the host, before
// any dial.
func TestHostOwnAddressEmbedded(t *testing.T) {
	var names []string
	answers := map[string][][]netip.Addr{}
	for _, a := range hostAddrs(t) {
		if !a.Is4() || a.IsLoopback() {
			continue
		}
		v4 := a.As4()
		for _, s := range []string{
			fmt.Sprintf("64:ff9b::%02x%02x:%02x%02x", v4[0], v4[1], v4[2], v4[3]),
			fmt.Sprintf("2002:%02x%02x:%02x%02x::1", v4[0], v4[1], v4[2], v4[3]),
			"::" + a.String(),
			"::ffff:0:" + a.String(),
		} {
			name := fmt.Sprintf("own%d.test", len(names))
			answers[name] = [][]netip.Addr{{netip.MustParseAddr(s)}}
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		t.Fatal("no IPv4 interface address on this host besides loopback")
	}
	h := newHarness(t, sandbox.Egress{Domains: names, Ports: []int{80}, AllowPrivate: true}, &fakeDNS{answers: answers, lookups: map[string]int{}})
	c := h.client(nil)
	for _, name := range names {
		code, body := get(t, c, "http://"+name+"/")
		if code != http.StatusForbidden || !strings.Contains(body, "host:") {
			t.Errorf("%s resolving to %s: %d %q, want 403 host", name, answers[name][0][0], code, strings.TrimSpace(body))
		}
	}
}
