package clients

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// token is the bearer token of the HTTP servers; the client sends it with a lowercase
// scheme ("bearer"), which RFC 7235 allows.
const token = "client-test-token"

// binary is the airlock under test: AIRLOCK_BIN, else the repository's bin/airlock.
func binary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("AIRLOCK_BIN")
	if bin == "" {
		bin = "../../bin/airlock"
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Fatalf("no airlock binary at %s (run make build, or set AIRLOCK_BIN): %v", abs, err)
	}
	return abs
}

// wire records, in the order the client reads them, the JSON-RPC messages the server
// sends: progress notifications and responses. It sits below the SDK (on the stdio
// pipe, or on every HTTP response body), so it sees the order on the wire, not the order
// in which the SDK happens to dispatch them.
type wire struct {
	mu   sync.Mutex
	msgs []map[string]any
}

func (w *wire) line(b []byte) {
	b = bytes.TrimSpace(b)
	b = bytes.TrimSpace(bytes.TrimPrefix(b, []byte("data:")))
	if len(b) == 0 || b[0] != '{' {
		return
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return
	}
	if m["method"] != "notifications/progress" && m["result"] == nil && m["error"] == nil {
		return
	}
	// A 20 MB message is never echoed back, so what is kept stays small.
	w.mu.Lock()
	w.msgs = append(w.msgs, m)
	w.mu.Unlock()
}

// order returns the progress values sent for tok, and whether each came before the
// response whose result mentions marker (the call's own output).
func (w *wire) order(tok, marker string) (values []float64, before []bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	answered := false
	for _, m := range w.msgs {
		if m["method"] == "notifications/progress" {
			p, _ := m["params"].(map[string]any)
			if fmt.Sprint(p["progressToken"]) == tok {
				v, _ := p["progress"].(float64)
				values = append(values, v)
				before = append(before, !answered)
			}
			continue
		}
		if b, _ := json.Marshal(m["result"]); strings.Contains(string(b), marker) {
			answered = true
		}
	}
	return values, before
}

// tapReader feeds every line read through it to a wire.
type tapReader struct {
	r    io.ReadCloser
	w    *wire
	mu   sync.Mutex
	part []byte
}

func (t *tapReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	data := p[:n]
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if len(t.part) < 1<<20 {
				t.part = append(t.part, data...)
			}
			break
		}
		t.w.line(append(t.part, data[:i]...))
		t.part, data = t.part[:0], data[i+1:]
	}
	if err != nil && len(t.part) > 0 {
		t.w.line(t.part)
		t.part = nil
	}
	return n, err
}

func (t *tapReader) Close() error { return t.r.Close() }

// authTap adds the bearer token (lowercase scheme) and taps every response body.
type authTap struct {
	w *wire
}

func (a authTap) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "bearer "+token)
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		resp.Body = &tapReader{r: resp.Body, w: a.w}
	}
	return resp, err
}

// server is one airlock process and the way to reach it.
type server struct {
	transport func() mcp.Transport
	wire      *wire
	stderr    *lockedBuffer
}

// logTail is the end of the server's log, for failure messages.
func (s *server) logTail() string {
	lines := strings.Split(strings.TrimSpace(s.stderr.String()), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serverArgs keep the tests' sandboxes small and their count enough for 8 parallel calls.
var serverArgs = []string{"-max-parallel", "8", "-queue-size", "16"}

// startStdio runs `airlock serve` and talks to it over its stdin and stdout.
func startStdio(t *testing.T) *server {
	bin := binary(t)
	s := &server{wire: &wire{}, stderr: &lockedBuffer{}}
	s.transport = func() mcp.Transport {
		cmd := exec.Command(bin, append([]string{"serve"}, serverArgs...)...)
		cmd.Stderr = s.stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			stdin.Close()
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		})
		return &mcp.IOTransport{Reader: &tapReader{r: stdout, w: s.wire}, Writer: stdin}
	}
	return s
}

var endpointRE = regexp.MustCompile(`endpoint=(http://\S+)`)

// startHTTP runs `airlock serve -http` (or -sse) on a free port with a bearer token.
func startHTTP(t *testing.T, sse bool) *server {
	bin := binary(t)
	flag := "-http"
	if sse {
		flag = "-sse"
	}
	s := &server{wire: &wire{}, stderr: &lockedBuffer{}}
	cmd := exec.Command(bin, append([]string{"serve", flag, "127.0.0.1:0", "-auth-token", token}, serverArgs...)...)
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	var endpoint string
	for deadline := time.Now().Add(30 * time.Second); endpoint == ""; time.Sleep(20 * time.Millisecond) {
		if m := endpointRE.FindStringSubmatch(s.stderr.String()); m != nil {
			endpoint = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("airlock did not start serving:\n%s", s.stderr.String())
		}
	}
	hc := &http.Client{Transport: authTap{w: s.wire}}
	s.transport = func() mcp.Transport {
		if sse {
			return &mcp.SSEClientTransport{Endpoint: endpoint, HTTPClient: hc}
		}
		return &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1}
	}
	return s
}

// progressLog collects the progress notifications the SDK hands to the client.
type progressLog struct {
	mu  sync.Mutex
	got map[string][]float64
}

func (p *progressLog) add(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tok := fmt.Sprint(req.Params.ProgressToken)
	p.got[tok] = append(p.got[tok], req.Params.Progress)
}

func (p *progressLog) values(tok string) []float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]float64(nil), p.got[tok]...)
}

// connect opens a client session at the given protocol version ("" = the SDK's latest).
func connect(t *testing.T, s *server, version string) (*mcp.ClientSession, *progressLog) {
	t.Helper()
	prog := &progressLog{got: map[string][]float64{}}
	c := mcp.NewClient(&mcp.Implementation{Name: "airlock-go-sdk-test", Version: "1"},
		&mcp.ClientOptions{ProgressNotificationHandler: prog.add})
	// Not a context that ends: the SSE transport's stream lives on Connect's context.
	cs, err := c.Connect(context.Background(), s.transport(), &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v\nserver log:\n%s", err, s.logTail())
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, prog
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
