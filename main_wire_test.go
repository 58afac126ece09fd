package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/airlock-mcp/airlock/config"
	"github.com/airlock-mcp/airlock/internal/soak"
)

// floodLT prints four caps' worth of '<' to stdout and to stderr: six bytes each in the
// HTML-safe JSON that mcp-go writes.
const floodLT = `import sys
n = int(sys.argv[1])
sys.stdout.write("<" * n)
sys.stdout.flush()
sys.stderr.write("<" * n)
`

// wireCounter counts what the server sends a client over HTTP.
type wireCounter struct{ n atomic.Int64 }

type countedBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func (c *wireCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if resp != nil {
		resp.Body = countedBody{resp.Body, &c.n}
	}
	return resp, err
}

// vmHWM is the server's peak resident memory, from /proc.
func vmHWM(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "VmHWM:"))
		}
	}
	return "?"
}

// TestE2EAnswerNotAmplifiedOnTheWire: a real sandboxed program floods both streams with
// '<'; the answer, counted on the wire, is a small multiple of the two output caps on
// stdio, Streamable HTTP and SSE. It was 12x: each '<' six bytes, each stream twice.
func TestE2EAnswerNotAmplifiedOnTheWire(t *testing.T) {
	bin := needSandbox(t)
	limit := int64(config.Default().Limits.Default.Output)
	args := map[string]any{"code": floodLT, "args": []string{fmt.Sprint(4 * limit)}}
	check := func(t *testing.T, name string, n int64, pid int) {
		ratio := float64(n) / float64(2*limit)
		t.Logf("%s: answer %d bytes for two %d-byte caps (%.2fx); server VmHWM %s", name, n, limit, ratio, vmHWM(pid))
		if ratio > 2.5 {
			t.Errorf("%s: the answer is %.2fx the output caps, more than 2.5x", name, ratio)
		}
	}
	env := func(t *testing.T) []string {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
			t.Fatal(err)
		}
		return soak.ServerEnv(dir, "AIRLOCK_POOL_SIZE=0", "AIRLOCK_AUDIT=off")
	}
	callTool := func(t *testing.T, c *client.Client) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
			t.Fatal(err)
		}
		r, err := c.CallTool(ctx, callReq("run_code", args, nil))
		if err != nil {
			t.Fatal(err)
		}
		sc, _ := r.StructuredContent.(map[string]any)
		if sc["status"] != "ok" || sc["stdout_truncated"] != true || sc["stderr_truncated"] != true ||
			sc["stdout_bytes"] != float64(4*limit) || sc["stderr_bytes"] != float64(4*limit) {
			t.Errorf("result: status %v, truncated %v/%v, bytes %v/%v", sc["status"], sc["stdout_truncated"], sc["stderr_truncated"], sc["stdout_bytes"], sc["stderr_bytes"])
		}
		if !strings.Contains(resultText(r), " bytes truncated ...]") {
			t.Error("the text block does not say the output was cut")
		}
	}
	t.Run("stdio", func(t *testing.T) {
		cmd := exec.Command(bin, "serve")
		cmd.Env = env(t)
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 64<<20)
		send := func(s string) {
			if _, err := io.WriteString(stdin, s+"\n"); err != nil {
				t.Fatal(err)
			}
		}
		send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		if !sc.Scan() {
			t.Fatal("no answer to initialize")
		}
		send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_code","arguments":{"code":%q,"args":["%d"]}}}`, floodLT, 4*limit))
		for sc.Scan() {
			if bytes.Contains(sc.Bytes(), []byte(`"id":2`)) {
				if !bytes.Contains(sc.Bytes(), []byte(`"stdout_truncated":true`)) {
					t.Errorf("answer does not flag stdout as cut: %.300s", sc.Bytes())
				}
				check(t, "stdio", int64(len(sc.Bytes())), cmd.Process.Pid)
				return
			}
		}
		t.Fatalf("no answer: %v", sc.Err())
	})
	for _, tc := range []struct{ name, flag string }{{"streamable-http", "--http"}, {"sse", "--sse"}} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, "serve", tc.flag, "127.0.0.1:0")
			cmd.Env = env(t)
			stderr, _ := cmd.StderrPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
			url := loggedEndpoint(t, stderr, nil)
			wc := &wireCounter{}
			var c *client.Client
			if tc.flag == "--sse" {
				var err error
				if c, err = client.NewSSEMCPClient(url, transport.WithHTTPClient(&http.Client{Transport: wc})); err != nil {
					t.Fatal(err)
				}
			} else {
				tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPBasicClient(&http.Client{Transport: wc}))
				if err != nil {
					t.Fatal(err)
				}
				c = client.NewClient(tr)
			}
			defer c.Close()
			callTool(t, c)
			// What initialize and the tool list cost is small next to the caps: counted in.
			check(t, tc.name, wc.n.Load(), cmd.Process.Pid)
		})
	}
}
