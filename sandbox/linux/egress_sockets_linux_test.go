package linux

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

// socketsProgram tries every way out of an allowlist sandbox but the proxy: other
// address families, raw and ping sockets, the proxy port over IPv6, and (with a port
// argument) another sandbox's loopback listener. It prints one JSON object: each
// attempt's outcome, "ok" when it worked.
const socketsProgram = `
import json, socket, sys, time
out = {}
def attempt(name, f):
    try:
        f()
        out[name] = "ok"
    except Exception as e:
        out[name] = type(e).__name__ + ":" + str(getattr(e, "errno", ""))
def sock(fam, typ, proto=0):
    return lambda: socket.socket(fam, typ, proto).close()
attempt("packet", sock(17, socket.SOCK_RAW))                 # AF_PACKET
attempt("netlink", sock(16, socket.SOCK_RAW, 0))              # AF_NETLINK route
attempt("vsock", sock(40, socket.SOCK_STREAM))                # AF_VSOCK
attempt("raw_icmp", sock(socket.AF_INET, socket.SOCK_RAW, 1)) # raw ICMP
attempt("raw_ip", sock(socket.AF_INET, socket.SOCK_RAW, 255))
attempt("raw_icmp6", sock(socket.AF_INET6, socket.SOCK_RAW, 58))
def ping():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, 1)
    s.sendto(b"\x08\x00\xf7\xff\x00\x00\x00\x00", ("192.0.2.1", 0))
attempt("ping", ping)
def v6_proxy():
    socket.create_connection(("::1", 3128), timeout=2).close()
attempt("v6_proxy", v6_proxy)
def udp_out():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"x", ("192.0.2.1", 53))
attempt("udp_out", udp_out)
mode = sys.argv[1]
if mode == "listen":
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", 47123))
    l.listen(8)
    l.settimeout(6)
    attempt("accepted", lambda: l.accept())
else:
    time.sleep(1)
    attempt("neighbour", lambda: socket.create_connection(("127.0.0.1", 47123), timeout=2).close())
print(json.dumps(out))
`

// TestEgressSocketsInAllowlist: in network "allowlist" the proxy on 127.0.0.1:3128 is
// the one way out. No other address family opens, raw and ping sockets get nothing off
// the namespace's lo, and one sandbox's loopback is not another's, with both in flight.
func TestEgressSocketsInAllowlist(t *testing.T) {
	sb := egressSandbox(t)
	e := newEgressServers(t)
	var wg sync.WaitGroup
	outs := make([]map[string]string, 2)
	for i, mode := range []string{"listen", "connect"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := sb.Run(context.Background(), withDefaults(sandbox.Spec{Argv: []string{python, "-I", "-S", "main.py", mode},
				Code: []byte(socketsProgram), CodeFile: "main.py", Network: sandbox.NetworkAllowlist, Egress: e.egress(1 << 20),
				Limits: sandbox.Limits{Wall: 30 * time.Second}}))
			if err != nil {
				t.Errorf("%s: %v", mode, err)
				return
			}
			lines := strings.Split(strings.TrimSpace(string(res.Stdout.Bytes())), "\n")
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &outs[i]); err != nil {
				t.Errorf("%s: decode: %v (%s)", mode, err, brief(res))
			}
		}()
	}
	wg.Wait()
	for i, out := range outs {
		if out == nil {
			continue
		}
		for k, v := range out {
			if v == "ok" {
				t.Errorf("sandbox %d: %s worked, want it refused (%v)", i, k, out)
			}
		}
	}
	if outs[1] != nil && outs[1]["neighbour"] == "" {
		t.Errorf("the neighbour attempt did not run: %v", outs[1])
	}
	t.Logf("listen: %v", outs[0])
	t.Logf("connect: %v", outs[1])
}
