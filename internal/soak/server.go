package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Server is one `airlock serve` process driven over stdio by an mcp-go client. The
// process is started here rather than by client.NewStdioMCPClient so that its stdout
// can be teed: the client matches answers to requests and silently drops one it does
// not expect, so counting answers per id must happen on the wire.
type Server struct {
	Cmd     *exec.Cmd
	Client  *client.Client
	LogPath string
	Wire    *Wire
	stdin   io.WriteCloser
	exited  chan struct{}
	waitErr error
}

// StartServer starts bin serve with env (and nothing of this process's environment) and
// initializes an MCP session with it.
func StartServer(ctx context.Context, bin string, env []string, logPath string, args ...string) (*Server, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("server log: %w", err)
	}
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	cmd.Env = env
	cmd.Stderr = logf
	stdin, err := cmd.StdinPipe()
	if err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	_ = logf.Close() // the child holds its own copy
	s := &Server{Cmd: cmd, LogPath: logPath, Wire: &Wire{ids: map[string]int{}}, stdin: stdin, exited: make(chan struct{})}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	tr := transport.NewIO(s.Wire.tee(stdout), stdin, nil)
	s.Client = client.NewClient(tr)
	if err := s.Client.Start(ctx); err != nil {
		s.Kill()
		return nil, fmt.Errorf("client start: %w", err)
	}
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := s.Client.Initialize(ictx, mcp.InitializeRequest{}); err != nil {
		s.Kill()
		return nil, fmt.Errorf("initialize: %w (server log: %s)", err, tail(logPath))
	}
	return s, nil
}

// PID is the server's process id.
func (s *Server) PID() int { return s.Cmd.Process.Pid }

// Kill ends the server with SIGKILL and waits for it.
func (s *Server) Kill() {
	_ = s.Cmd.Process.Kill()
	<-s.exited
}

// CloseStdin ends the session the way a client does (stdin EOF) and waits up to
// timeout for the server to exit.
func (s *Server) CloseStdin(timeout time.Duration) (exitCode int, took time.Duration, err error) {
	t0 := time.Now()
	_ = s.stdin.Close()
	return s.wait(t0, timeout)
}

// Signal sends sig and waits up to timeout for the server to exit.
func (s *Server) Signal(sig syscall.Signal, timeout time.Duration) (exitCode int, took time.Duration, err error) {
	t0 := time.Now()
	if err := s.Cmd.Process.Signal(sig); err != nil {
		return -1, 0, fmt.Errorf("signal: %w", err)
	}
	return s.wait(t0, timeout)
}

func (s *Server) wait(t0 time.Time, timeout time.Duration) (int, time.Duration, error) {
	select {
	case <-s.exited:
	case <-time.After(timeout):
		s.Kill()
		return -1, time.Since(t0), fmt.Errorf("server still running %s after being told to stop; killed", timeout)
	}
	return s.Cmd.ProcessState.ExitCode(), time.Since(t0), nil
}

// Exited is closed when the server process has ended.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// Log returns the server's stderr so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.LogPath)
	return string(b)
}

var goroutineHeader = regexp.MustCompile(`(?m)^goroutine [1-9]\d* .*\[`)

// Goroutines ends the server with SIGQUIT, which makes the Go runtime print every
// goroutine's stack (the server must run with GOTRACEBACK=all), and counts them. It is the only view of a Go process's goroutines
// from outside without a debug endpoint in the server.
func (s *Server) Goroutines(timeout time.Duration) (int, error) {
	if _, _, err := s.Signal(syscall.SIGQUIT, timeout); err != nil {
		return 0, err
	}
	log := s.Log()
	i := strings.Index(log, "SIGQUIT")
	if i < 0 {
		return 0, fmt.Errorf("no goroutine dump after SIGQUIT")
	}
	return len(goroutineHeader.FindAllStringIndex(log[i:], -1)), nil
}

// Wire counts what the server wrote on stdout: answers per request id, and lines that
// are not JSON at all.
type Wire struct {
	mu      sync.Mutex
	partial []byte
	ids     map[string]int
	nonJSON int
	notes   int
}

func (w *Wire) tee(r io.Reader) io.Reader { return &teeReader{r: r, w: w} }

type teeReader struct {
	r io.Reader
	w *Wire
}

func (t *teeReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.w.feed(p[:n])
	return n, err
}

func (w *Wire) feed(b []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return
		}
		line := w.partial[:i]
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		switch {
		case json.Unmarshal(line, &m) != nil:
			w.nonJSON++
		case m.Method != "":
			w.notes++
		case len(m.ID) > 0:
			w.ids[string(m.ID)]++
		}
		w.partial = append(w.partial[:0], w.partial[i+1:]...)
	}
}

// Counts returns the number of distinct answered ids, ids answered more than once,
// non-JSON lines and notifications.
func (w *Wire) Counts() (answered, duplicates, nonJSON, notes int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.ids {
		answered++
		if n > 1 {
			duplicates++
		}
	}
	return answered, duplicates, w.nonJSON, w.notes
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// ServerEnv is the environment a soak server runs with: only what it needs, so that the
// caller's AIRLOCK_* settings cannot change the expected statuses.
func ServerEnv(dir string, extra ...string) []string {
	env := []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + dir,
		"TMPDIR=" + filepath.Join(dir, "tmp"),
		"AIRLOCK_LANGUAGES=python",
	}
	return append(env, extra...)
}
