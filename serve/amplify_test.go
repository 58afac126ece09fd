package serve

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/airlock-mcp/airlock/sandbox"
)

// flood is a program that printed sixteen caps of '<' to stdout and to stderr, as the
// sandbox's capture keeps them: the first and last half cap of each.
func flood(_ context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	limit := int(spec.Limits.Output)
	half := bytes.Repeat([]byte("<"), limit/2)
	s := sandbox.Stream{Head: half, Tail: half, Total: 16 * int64(limit)}
	return sandbox.Result{Status: sandbox.StatusOK, Stdout: s, Stderr: s}, nil
}

// maxAmplification bounds an answer's bytes against the two streams' caps: each stream
// appears twice (structuredContent and the text block) and the rest is small.
const maxAmplification = 2.5

// countingBody counts the bytes a client reads from the server.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if resp != nil {
		resp.Body = countingBody{resp.Body, &c.n}
	}
	return resp, err
}

func checkAnswer(t *testing.T, transport string, n int64, limit int64) {
	t.Helper()
	ratio := float64(n) / float64(2*limit)
	t.Logf("%s: an answer of %d bytes for two %d-byte caps of '<' (%.2fx)", transport, n, limit, ratio)
	if ratio > maxAmplification {
		t.Errorf("%s: the answer is %.2fx the output caps, more than %gx: escaping amplifies output on the wire", transport, ratio, maxAmplification)
	}
}

func floodResult(t *testing.T, r *mcp.CallToolResult, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := r.StructuredContent.(map[string]any)
	if sc["stdout_truncated"] != true || sc["stderr_truncated"] != true {
		t.Errorf("a cut stream is not flagged: %v %v", sc["stdout_truncated"], sc["stderr_truncated"])
	}
}

// TestAnswerNotAmplifiedByEscaping: a program printing a cap's worth of '<' (six bytes
// each in HTML-safe JSON) on both streams gets an answer of a small multiple of the caps
// on every transport.
func TestAnswerNotAmplifiedByEscaping(t *testing.T) {
	d := fakeDeps(flood, 1)
	limit := d.Runner.Bounds.Default.Output
	call := func(t *testing.T, c *client.Client) {
		ctx := context.Background()
		startClient(t, ctx, c)
		r, err := runCode(ctx, c, "flood")
		floodResult(t, r, err)
	}
	t.Run("stdio", func(t *testing.T) {
		p := startStdio(t, d, StdioOptions{})
		p.send(t, callLine(7, "flood", ""))
		if !p.out.Scan() {
			t.Fatalf("stdout ended: %v", p.out.Err())
		}
		checkAnswer(t, "stdio", int64(len(p.out.Bytes())), limit)
	})
	t.Run("streamable-http", func(t *testing.T) {
		ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20})
		ct := &countingTransport{}
		tr, err := transport.NewStreamableHTTP(ts.URL+"/mcp", transport.WithHTTPBasicClient(&http.Client{Transport: ct}))
		if err != nil {
			t.Fatal(err)
		}
		c := client.NewClient(tr)
		defer c.Close()
		call(t, c)
		checkAnswer(t, "streamable-http", ct.n.Load(), limit)
	})
	t.Run("sse", func(t *testing.T) {
		ts := httpServer(t, d, HTTPOptions{SSE: true, MaxBodyBytes: 1 << 20})
		ct := &countingTransport{}
		c, err := client.NewSSEMCPClient(ts.URL+"/sse", transport.WithHTTPClient(&http.Client{Transport: ct}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		call(t, c)
		checkAnswer(t, "sse", ct.n.Load(), limit)
	})
}

// startClient starts c and initializes its session, failing the test if either fails.
func startClient(t *testing.T, ctx context.Context, c *client.Client) {
	t.Helper()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
}

// runCode calls run_code with code.
func runCode(ctx context.Context, c *client.Client, code string) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_code"
	req.Params.Arguments = map[string]any{"code": code}
	return c.CallTool(ctx, req)
}
