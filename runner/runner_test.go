package runner

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/runner/runnertest"
	"github.com/airlock-mcp/airlock/sandbox"
)

func newRunner(fn func(context.Context, sandbox.Spec) (sandbox.Result, error), logs *bytes.Buffer) (*Runner, *runnertest.Sandbox) {
	sb := &runnertest.Sandbox{Fn: fn, Report: runnertest.Report()}
	return &Runner{Sandbox: sb, Languages: runnertest.Python(), Bounds: runnertest.Bounds(),
		Network: sandbox.NetworkNone, MaxCodeBytes: 1 << 10, MaxStdinBytes: 1 << 10,
		Limiter: NewLimiter(1, 1, 50*time.Millisecond),
		Log:     slog.New(slog.NewJSONHandler(logs, nil))}, sb
}

// withAudit gives r an audit log of at most maxBytes in a temporary directory, closed
// at the test's end, and returns its path.
func withAudit(t *testing.T, r *Runner, maxBytes int64) string {
	t.Helper()
	path := t.TempDir() + "/audit.jsonl"
	a, err := OpenAudit(path, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	r.Audit = a
	return path
}

func TestRunPassesStdinAndNetworkAndLogsOneLine(t *testing.T) {
	var logs bytes.Buffer
	var got sandbox.Spec
	r, _ := newRunner(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
		got = s
		return runnertest.Echo(ctx, s)
	}, &logs)
	out, err := r.Run(context.Background(), Call{Language: "python", Code: []byte("print('secret-code')"), Stdin: []byte("in")})
	if err != nil {
		t.Fatal(err)
	}
	if out.Result.Status != sandbox.StatusOK || out.ID == "" || got.ID != out.ID {
		t.Errorf("outcome = %+v, spec id %q", out, got.ID)
	}
	if string(got.Stdin) != "in" || got.Network != sandbox.NetworkNone || got.Language != "python" {
		t.Errorf("spec = %+v", got)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one log line per run, got %d: %s", len(lines), logs.String())
	}
	for _, want := range []string{`"id":"` + out.ID, `"code_sha256":"`, `"code_bytes":20`, `"status":"ok"`, `"wall_limit"`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("log line lacks %s: %s", want, lines[0])
		}
	}
	if strings.Contains(logs.String(), "secret-code") {
		t.Error("the code leaked into the log")
	}
}

func TestRunRefusesBadCalls(t *testing.T) {
	tests := []struct {
		name string
		call Call
		want error
	}{
		{"empty", Call{Language: "python"}, policy.ErrInvalidRequest},
		{"too large", Call{Language: "python", Code: bytes.Repeat([]byte("x"), 1<<10+1)}, policy.ErrCodeTooLarge},
		{"nul", Call{Language: "python", Code: []byte("print(1)\x00")}, policy.ErrInvalidRequest},
		{"invalid utf8", Call{Language: "python", Code: []byte("print('\xff')")}, policy.ErrInvalidRequest},
		{"stdin too large", Call{Language: "python", Code: []byte("1"), Stdin: make([]byte, 1<<10+1)}, policy.ErrInvalidRequest},
		{"negative timeout", Call{Language: "python", Code: []byte("1"), Timeout: -time.Second}, policy.ErrInvalidRequest},
		{"nul arg", Call{Language: "python", Code: []byte("1"), Args: []string{"a\x00"}}, policy.ErrInvalidRequest},
		{"disabled language", Call{Language: "node", Code: []byte("1")}, policy.ErrLanguageNotEnabled},
		{"unknown language", Call{Language: "cobol", Code: []byte("1")}, policy.ErrLanguageNotEnabled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			r, sb := newRunner(runnertest.Echo, &logs)
			_, err := r.Run(context.Background(), tt.call)
			if !errors.Is(err, tt.want) || !IsRefusal(err) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if sb.Runs.Load() != 0 {
				t.Error("a refused call reached the sandbox")
			}
			if !strings.Contains(logs.String(), "run refused") {
				t.Error("refusal not logged")
			}
		})
	}
}

func TestBusy(t *testing.T) {
	var logs bytes.Buffer
	r, _ := newRunner(runnertest.Block, &logs)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	started := make(chan struct{})
	go func() {
		defer wg.Done()
		close(started)
		_, _ = r.Run(ctx, Call{Language: "python", Code: []byte("1")})
	}()
	<-started
	deadline := time.Now().Add(2 * time.Second)
	for r.Limiter.Running() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	t0 := time.Now()
	_, err := r.Run(context.Background(), Call{Language: "python", Code: []byte("2")})
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("second call: err = %v, want busy", err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("busy took %v; the queue timeout is 50ms", d)
	}
	cancel()
	wg.Wait()
	// The slot must be free again once the blocked run ended.
	ctx3, cancel3 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel3()
	if out, err := r.Run(ctx3, Call{Language: "python", Code: []byte("3")}); err != nil || out.Result.Status != sandbox.StatusCancelled {
		t.Fatalf("third call: %v %+v", err, out.Result)
	}
}

func TestQueueFullIsBusyAtOnce(t *testing.T) {
	l := NewLimiter(1, 0, time.Hour)
	rel, err := l.Acquire(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer rel()
	t0 := time.Now()
	// An hour-long queue timeout: anything but an immediate answer would be a hang.
	if _, err := l.Acquire(context.Background(), ""); !errors.Is(err, ErrBusy) || time.Since(t0) > 5*time.Second {
		t.Fatalf("err = %v after %v, want immediate busy", err, time.Since(t0))
	}
}

func TestSandboxErrorIsWrapped(t *testing.T) {
	var logs bytes.Buffer
	r, _ := newRunner(func(context.Context, sandbox.Spec) (sandbox.Result, error) {
		return sandbox.Result{}, errors.Join(sandbox.ErrUnavailable, errors.New("user namespaces disabled"))
	}, &logs)
	_, err := r.Run(context.Background(), Call{Language: "python", Code: []byte("1")})
	if !errors.Is(err, sandbox.ErrUnavailable) || IsRefusal(err) {
		t.Fatalf("err = %v", err)
	}
}

// A language or session the call names is the client's text, as long as its request: it
// is repeated clipped in the log line and the audit line.
func TestRunClipsWhatTheCallNamed(t *testing.T) {
	var logs bytes.Buffer
	r, _ := newRunner(runnertest.Echo, &logs)
	path := withAudit(t, r, 0)
	long := strings.Repeat("x", 1<<20)
	if _, err := r.Run(context.Background(), Call{Language: long, Code: []byte("1")}); err == nil {
		t.Fatal("a language nobody has ran")
	}
	if _, err := r.Run(context.Background(), Call{Language: "python", Session: long, Code: []byte("1")}); err == nil {
		t.Fatal("a session nobody has ran")
	}
	rec, _ := os.ReadFile(path)
	for name, b := range map[string][]byte{"log": logs.Bytes(), "audit": rec} {
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if len(line) > 4096 {
				t.Errorf("a %s line of %d bytes: %.120s...", name, len(line), line)
			}
		}
	}
}

func TestAuditLogAndRotation(t *testing.T) {
	var logs bytes.Buffer
	r, _ := newRunner(runnertest.Echo, &logs)
	path := withAudit(t, r, 1200)
	for i := 0; i < 4; i++ {
		_, _ = r.Run(context.Background(), Call{Language: "python", Code: []byte("print('top-secret')")})
	}
	_, _ = r.Run(context.Background(), Call{Language: "cobol", Code: []byte("x")})
	cur, _ := os.ReadFile(path)
	old, _ := os.ReadFile(path + ".1")
	all := string(old) + string(cur)
	if n := strings.Count(all, "\n"); n != 5 {
		t.Fatalf("want 5 records, got %d:\n%s", n, all)
	}
	if len(old) == 0 || len(cur) > 1200 {
		t.Errorf("no rotation at 1200 bytes: current %d bytes, rotated %d", len(cur), len(old))
	}
	if strings.Contains(all, "top-secret") || !strings.Contains(all, `"status":"refused"`) || !strings.Contains(all, `"status":"ok"`) {
		t.Errorf("records:\n%s", all)
	}
}
