//go:build linux

package main

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/airlock-mcp/airlock/internal/soak"
)

// SIGTERM drains the legacy SSE transport too: a call posted to a stream runs on in a
// real sandbox, its answer reaches the client on the stream, and only then does the
// server stop, exit 0. With the call counted out at its POST's 202, the drain saw nothing
// in flight and ended the streams at once, which cancelled the call: its answer was lost.
func TestE2ESSEDrainDeliversTheAnswer(t *testing.T) {
	bin := needSandbox(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "serve", "--sse", addr, "--drain-grace", "20s")
	cmd.Env = soak.ServerEnv(t.TempDir(), "AIRLOCK_POOL_SIZE=0", "AIRLOCK_AUDIT=off")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill(); <-exited }()
	c, err := client.NewSSEMCPClient(loggedEndpoint(t, stderr, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	mark := marker(t)
	type answer struct {
		r   *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := c.CallTool(ctx, runCall("import sys, time\ntime.sleep(2)\nprint('answered in the drain', sys.argv[1])", mark, 20))
		done <- answer{r, err}
	}()
	if n, _ := waitProcs(t, mark, 15*time.Second, func(n int) bool { return n >= 1 }); n < 1 {
		t.Fatal("the sleeper never started")
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case a := <-done:
		if a.err != nil || a.r.IsError || !strings.Contains(resultText(a.r), "answered in the drain") {
			t.Fatalf("the call in flight at SIGTERM: %v %+v", a.err, a.r)
		}
	case <-ctx.Done():
		t.Fatal("no answer to the call in flight at SIGTERM")
	}
	select {
	case err := <-exited:
		exited <- nil // for the deferred kill's wait
		if err != nil {
			t.Errorf("exit after the drain: %v, want 0", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the server did not exit after the drain")
	}
}
