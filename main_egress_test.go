package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfCallProgram asks the egress proxy (the bridge, 127.0.0.1:3128) for the server's
// own HTTP port through a listed name, and prints the answer's status line and rule.
const selfCallProgram = `
import socket, sys
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
s.sendall(b"GET http://localhost:%s/mcp HTTP/1.1\r\nAccept: application/json, text/event-stream\r\n\r\n" % sys.argv[1].encode())
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
head = data.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
rule = [l for l in head if l.lower().startswith("x-airlock-egress-rule")]
print("ANSWER", head[0], rule)
`

// TestE2EEgressCannotCallItsServer: a real server on loopback with network "allowlist",
// "localhost" listed with the server's own port and allow_private on. A program inside
// its sandbox asks the proxy for http://localhost:PORT/mcp, the tokenless loopback
// transport that runs code. allow_private opens other hosts' private ranges, not this
// host: the proxy refuses it as loopback.
func TestE2EEgressCannotCallItsServer(t *testing.T) {
	bin := needSandbox(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cfg := filepath.Join(t.TempDir(), "airlock.toml")
	toml := fmt.Sprintf("network = \"allowlist\"\n[egress]\ndomains = [\"localhost\"]\nports = [%d]\nallow_private = true\n", port)
	if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, _ := servedClient(t, ctx, exec.Command(bin, "serve", "--config", cfg, "--http", fmt.Sprintf("127.0.0.1:%d", port)))
	res, err := c.CallTool(ctx, callReq("run_code", map[string]any{"code": selfCallProgram, "args": []string{fmt.Sprint(port)}}, nil))
	if err != nil {
		t.Fatal(err)
	}
	out := resultText(res)
	if !strings.Contains(out, "ANSWER HTTP/1.1 403 Forbidden ['X-Airlock-Egress-Rule: loopback']") {
		t.Errorf("the program asked for the server's own port through the proxy:\n%s", out)
	}
}
