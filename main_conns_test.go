package main

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A peer without a token opened idle connections to a loopback server until its file
// descriptors ran out: the warm pool could not refill and an authenticated client's
// calls, on the connection it already held, came back sandbox_error ("stdout pipe:
// pipe2: too many open files"). The server is started under a 256-descriptor limit so
// that 400 connections pass it; every call after them must still run.
func TestE2EIdleConnectionsLeaveSandboxFds(t *testing.T) {
	bin := needSandbox(t)
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("SKIPPING: prlimit (util-linux) is not installed; it lowers the server's descriptor limit")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, url := servedClient(t, ctx, exec.Command(prlimit, "--nofile=256:256", "--", bin, "serve", "--http", "127.0.0.1:0"))
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	var flood []net.Conn
	defer func() {
		for _, fc := range flood {
			_ = fc.Close()
		}
	}()
	for range 400 {
		fc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", len(flood), err)
		}
		flood = append(flood, fc)
	}
	time.Sleep(500 * time.Millisecond) // let the server accept what it will
	// More calls than the warm pool holds (2), so that some need new sandboxes.
	for i := range 4 {
		res, err := c.CallTool(ctx, callReq("run_code", map[string]any{"code": "print('alive')"}, nil))
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if text := resultText(res); res.IsError || !strings.Contains(text, "status: ok") {
			t.Fatalf("call %d with 400 idle connections open: %s", i, text)
		}
	}
}
