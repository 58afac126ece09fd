package egress

import (
	"fmt"
	"net/netip"

	"github.com/airlock-mcp/airlock/sandbox"
)

// class is who may open a range of addresses.
type class int

const (
	// never: no setting opens it (metadata, unspecified, multicast, reserved).
	never class = iota
	// private: other hosts of a private network; allow_private opens it.
	private
	// local: this host itself; allow_loopback opens it. allow_private does not: an
	// operator who opens an internal index at 10.x has not opened the server's own
	// HTTP port or the host's other loopback services.
	local
)

// addrRule is one range of addresses and the rule that refuses it.
type addrRule struct {
	prefix netip.Prefix
	rule   string
	class  class
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// addrRules are checked in order: the metadata addresses come before the link-local
// and ULA ranges that contain them, so allow_private never opens them.
var addrRules = []addrRule{
	{pfx("169.254.169.254/32"), "metadata", never}, // AWS, GCP, Azure, OCI instance metadata
	{pfx("169.254.170.2/32"), "metadata", never},   // AWS ECS task credentials
	{pfx("fd00:ec2::254/128"), "metadata", never},  // AWS IPv6 instance metadata
	{pfx("100.100.100.200/32"), "metadata", never}, // Alibaba Cloud metadata
	// Inside the ranges allow_private opens, or in a public one: still never.
	{pfx("169.254.0.23/32"), "metadata", never},       // Tencent Cloud metadata (metadata.tencentyun.com)
	{pfx("192.0.0.192/32"), "metadata", never},        // Oracle Cloud's legacy metadata address
	{pfx("168.63.129.16/32"), "metadata", never},      // Azure WireServer: VM agent config, certificates
	{pfx("fd20:ce::254/128"), "metadata", never},      // GCP IPv6 instance metadata
	{pfx("169.254.170.23/32"), "metadata", never},     // EKS Pod Identity agent: pod credentials
	{pfx("fd00:ec2::23/128"), "metadata", never},      // EKS Pod Identity agent, IPv6
	{pfx("fd00:a9fe:a9fe::1/128"), "metadata", never}, // Akamai (Linode) IPv6 metadata
	{pfx("169.254.42.42/32"), "metadata", never},      // Scaleway metadata
	{pfx("fd00:42::42/128"), "metadata", never},       // Scaleway IPv6 metadata
	{pfx("fe80::a9fe:a9fe/128"), "metadata", never},   // OpenStack IPv6 metadata (Neutron)
	{pfx("0.0.0.0/8"), "unspecified", never},          // "this network": 0.0.0.0 reaches the host
	{pfx("::/128"), "unspecified", never},
	{pfx("224.0.0.0/4"), "multicast", never},
	{pfx("ff00::/8"), "multicast", never},
	{pfx("240.0.0.0/4"), "reserved", never}, // and 255.255.255.255
	{pfx("127.0.0.0/8"), "loopback", local},
	{pfx("::1/128"), "loopback", local},
	{pfx("10.0.0.0/8"), "private", private}, // RFC 1918
	{pfx("172.16.0.0/12"), "private", private},
	{pfx("192.168.0.0/16"), "private", private},
	{pfx("198.18.0.0/15"), "private", private}, // benchmarking, used inside labs
	{pfx("192.0.0.0/24"), "private", private},  // IETF protocol assignments
	{pfx("169.254.0.0/16"), "link-local", private},
	{pfx("fe80::/10"), "link-local", private},
	{pfx("fec0::/10"), "private", private}, // deprecated site-local
	{pfx("100.64.0.0/10"), "cgnat", private},
	// Documentation ranges (RFC 5737, RFC 3849): never on the internet, so an address in
	// one is a lab's own network, numbered with them.
	{pfx("192.0.2.0/24"), "documentation", private},
	{pfx("198.51.100.0/24"), "documentation", private},
	{pfx("203.0.113.0/24"), "documentation", private},
	{pfx("2001:db8::/32"), "documentation", private},
	{pfx("fc00::/7"), "ula", private},
}

// embedded is the IPv4 address an IPv6 one stands for, where the network would route
// it to that IPv4 address (mapped, translated, IPv4-compatible, NAT64, 6to4). An
// address of the local-use NAT64 prefix has one reading per translator prefix length.
func embedded(a netip.Addr) []netip.Addr {
	if !a.Is6() {
		return nil
	}
	if a.Is4In6() {
		return []netip.Addr{a.Unmap()}
	}
	b := a.As16()
	switch {
	case pfx("64:ff9b:1::/48").Contains(a):
		return localNAT64(b)
	case pfx("64:ff9b::/96").Contains(a):
		return []netip.Addr{netip.AddrFrom4([4]byte(b[12:]))}
	case pfx("::ffff:0:0:0/96").Contains(a): // IPv4-translated (RFC 2765 SIIT)
		return []netip.Addr{netip.AddrFrom4([4]byte(b[12:]))}
	case pfx("2002::/16").Contains(a):
		return []netip.Addr{netip.AddrFrom4([4]byte(b[2:6]))}
	case pfx("::/96").Contains(a) && a != netip.IPv6Unspecified() && a != netip.IPv6Loopback():
		return []netip.Addr{netip.AddrFrom4([4]byte(b[12:]))}
	}
	return nil
}

// localNAT64 reads an address of 64:ff9b:1::/48 (RFC 8215) at every RFC 6052 prefix
// length a translator of that prefix may use (48, 56, 64, 96; bits 64-71 are skipped),
// so the address is judged by whatever IPv4 address it may be translated to. Readings
// in 0.0.0.0/8 are what the zero padding of another length gives, and are dropped
// unless every reading is one.
func localNAT64(b [16]byte) []netip.Addr {
	all := []netip.Addr{
		netip.AddrFrom4([4]byte{b[6], b[7], b[9], b[10]}),  // /48
		netip.AddrFrom4([4]byte{b[7], b[9], b[10], b[11]}), // /56
		netip.AddrFrom4([4]byte(b[9:13])),                  // /64
		netip.AddrFrom4([4]byte(b[12:])),                   // /96
	}
	var out []netip.Addr
	for _, v4 := range all {
		if !pfx("0.0.0.0/8").Contains(v4) {
			out = append(out, v4)
		}
	}
	if len(out) == 0 {
		return all[3:]
	}
	return out
}

// DeniedAddr returns the rule that refuses a as a destination under cfg, or "" when it
// may be reached. An IPv6 address that embeds an IPv4 one is judged by the IPv4 one too.
func DeniedAddr(a netip.Addr, cfg sandbox.Egress) string {
	r, _ := deniedRule(a, cfg)
	return r.rule
}

func deniedRule(a netip.Addr, cfg sandbox.Egress) (addrRule, bool) {
	a = a.WithZone("")
	for _, v4 := range embedded(a) {
		if r, ok := deniedRule(v4, cfg); ok {
			return r, true
		}
	}
	for _, r := range addrRules {
		if r.prefix.Contains(a) {
			if r.class == private && cfg.AllowPrivate || r.class == local && cfg.AllowLoopback {
				return addrRule{}, false
			}
			return r, true
		}
	}
	return addrRule{}, false
}

// CheckPattern refuses a canonical allowlist entry that is an address the proxy refuses
// under cfg: it would refuse every connection to it, and the operator should learn that
// when the server starts, with the setting that opens it, not from a failed call.
func CheckPattern(p string, cfg sandbox.Egress) error {
	a, ok := ipLiteral(p)
	if !ok {
		return nil
	}
	r, denied := deniedRule(a, cfg)
	switch {
	case !denied:
		return nil
	case r.class == private:
		return fmt.Errorf("%w %q is a %s address, which the proxy refuses unless egress.allow_private = true: set it to reach other hosts' private ranges, or remove the entry", ErrPattern, p, r.rule)
	case r.class == local:
		return fmt.Errorf("%w %q is this host's own (%s), which the proxy refuses unless egress.allow_loopback = true: set it to reach a service on this host (every sandbox can then reach it), or remove the entry", ErrPattern, p, r.rule)
	}
	return fmt.Errorf("%w %q is a %s address, which no setting opens: remove the entry", ErrPattern, p, r.rule)
}
