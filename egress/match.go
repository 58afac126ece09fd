// Package egress is the network allowlist of sandboxes with network "allowlist": the
// decisions (which names, ports and addresses, what a ClientHello names) as pure
// functions, and the proxy that applies them to one call's connections.
//
// The sandbox has loopback only; its one way out is a listener on 127.0.0.1 whose
// connections end in Proxy, outside the sandbox. The proxy resolves every name itself,
// checks every address it gets, and connects to the address it checked: there is no
// second lookup for a rebinding resolver to answer differently.
package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/airlock-mcp/airlock/sandbox"
)

// ErrPattern means a domain pattern is malformed or not covered by the operator's list.
var ErrPattern = errors.New("domain pattern")

// normalizeHost lowercases a host name and drops one trailing dot; ok is false for
// anything that is not a plausible DNS name (empty labels, bytes outside [a-z0-9-_]).
func normalizeHost(h string) (string, bool) {
	// Bytes first, then case: strings.ToLower maps the Kelvin sign (U+212A) to an ASCII
	// k, which would let one name be checked and another looked up.
	for i := 0; i < len(h); i++ {
		if h[i] >= 0x80 {
			return "", false
		}
	}
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if h == "" || len(h) > 253 {
		return "", false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return "", false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", false
			}
		}
	}
	return h, true
}

// ipLiteral parses a host that is an IP address (bracketed IPv6 included), unmapping
// IPv4-in-IPv6 so the one address has one spelling.
func ipLiteral(h string) (netip.Addr, bool) {
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	a, err := netip.ParseAddr(h)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// NormalizePattern checks one allowlist entry and returns its canonical form: an exact
// name, "*." and a name (subdomains only), or an IP literal.
func NormalizePattern(p string) (string, error) {
	if a, ok := ipLiteral(p); ok {
		return a.String(), nil
	}
	name, wild := strings.CutPrefix(p, "*.")
	n, ok := normalizeHost(name)
	if !ok || strings.Contains(n, "*") {
		return "", fmt.Errorf("%w %q: want a name (example.org), *.suffix (*.example.org) or an IP address", ErrPattern, p)
	}
	if _, isIP := ipLiteral(n); isIP && wild {
		return "", fmt.Errorf("%w %q: a wildcard takes a name, not an address", ErrPattern, p)
	}
	if _, isIP := ipLiteral(n); !isIP && numericLabel(n[strings.LastIndexByte(n, '.')+1:]) {
		return "", fmt.Errorf("%w %q: a name ending in a number is an address to resolvers that read inet_aton's forms (127.1, 0x7f.0.0.1 and 2130706433 are all 127.0.0.1); write the address as a.b.c.d or [ipv6], or list the name", ErrPattern, p)
	}
	if wild {
		return "*." + n, nil
	}
	return n, nil
}

// numericLabel reports whether a name's last label is a number, decimal, octal or hex
// (0x...): inet_aton reads such a name as an IPv4 address, and no top-level domain is
// all-numeric (RFC 3696 section 2).
func numericLabel(l string) bool {
	digits, hex := l, false
	if rest, ok := strings.CutPrefix(l, "0x"); ok {
		digits, hex = rest, true
	}
	if digits == "" {
		return hex
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if !(c >= '0' && c <= '9' || hex && c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// matchPattern reports whether a canonical pattern admits a normalized host. "*.s"
// admits names ending in ".s", never s itself.
func matchPattern(pattern, host string) bool {
	if suffix, wild := strings.CutPrefix(pattern, "*."); wild {
		return strings.HasSuffix(host, "."+suffix)
	}
	return pattern == host
}

// covers reports whether the operator's pattern op admits everything p admits.
func covers(op, p string) bool {
	if suffix, wild := strings.CutPrefix(p, "*."); wild {
		opSuffix, opWild := strings.CutPrefix(op, "*.")
		return opWild && (suffix == opSuffix || strings.HasSuffix(suffix, "."+opSuffix))
	}
	return matchPattern(op, p)
}

// Narrow is a call's allowlist: the operator's when the call names none, else the
// call's own entries, each of which must be covered by an operator entry. A call can
// only narrow the list, never widen it.
func Narrow(operator, call []string) ([]string, error) {
	if len(call) == 0 {
		return operator, nil
	}
	out := make([]string, 0, len(call))
	for _, raw := range call {
		p, err := NormalizePattern(raw)
		if err != nil {
			return nil, err
		}
		ok := false
		for _, op := range operator {
			if covers(op, p) {
				ok = true
				break
			}
		}
		if !ok {
			return nil, fmt.Errorf("%w %q is not on the operator's allowlist (%s)", ErrPattern, raw, strings.Join(operator, ", "))
		}
		out = append(out, p)
	}
	return out, nil
}

// ProxyPort is where the sandbox reaches the proxy: 127.0.0.1 in its own network
// namespace, whose only interface is loopback.
const ProxyPort = 3128

// Env is the environment that points a sandbox's programs at the proxy: the proxy
// variables curl, Python, Go and most tools read (both cases), pip's and npm's own.
// A program that ignores them has no route anywhere.
func Env() []string {
	u := fmt.Sprintf("http://127.0.0.1:%d", ProxyPort)
	var env []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		env = append(env, k+"="+u, strings.ToLower(k)+"="+u)
	}
	const local = "localhost,127.0.0.1,::1"
	return append(env, "NO_PROXY="+local, "no_proxy="+local,
		"PIP_PROXY="+u, "npm_config_proxy="+u, "npm_config_https_proxy="+u)
}

// CheckServerPort refuses an allowlist that would let a sandbox call the server that
// runs it: with allow_loopback, a listed port that the server's own HTTP transport
// listens on (listen, host:port) is reachable from every sandbox, and a loopback bind
// needs no token. A nil e (no allowlist) or a port chosen by the kernel (0) passes.
func CheckServerPort(e *sandbox.Egress, listen string) error {
	if e == nil || !e.AllowLoopback {
		return nil
	}
	_, ps, err := net.SplitHostPort(listen)
	if err != nil {
		return nil // the listener's own check reports a bad address
	}
	if p, err := strconv.Atoi(ps); err == nil && p != 0 && slices.Contains(e.Ports, p) {
		return fmt.Errorf("egress.allow_loopback with port %d in egress.ports would let every sandbox call this server's own HTTP transport (%s): list the loopback service's own port only, or serve elsewhere", p, listen)
	}
	return nil
}
