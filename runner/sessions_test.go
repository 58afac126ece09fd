package runner

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/runner/runnertest"
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/session"
)

// fakeSessions is a backend whose sessions echo each call's code, prefixed with how
// many calls the session has had: state across calls, without a sandbox.
type fakeSessions struct {
	*runnertest.Sandbox
	specs []sandbox.Spec
}

func (f *fakeSessions) OpenSession(_ context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	f.specs = append(f.specs, spec)
	return &echoSession{done: make(chan struct{})}, nil
}

type echoSession struct {
	n    int
	once sync.Once
	done chan struct{}
}

func (e *echoSession) Call(_ context.Context, c sandbox.SessionCall) (sandbox.Result, error) {
	e.n++
	out := []byte(strings.Repeat("+", e.n) + string(c.Code))
	return sandbox.Result{ID: c.ID, Status: sandbox.StatusOK, Stdout: sandbox.Stream{Head: out, Total: int64(len(out))}}, nil
}
func (e *echoSession) Close()                { e.once.Do(func() { close(e.done) }) }
func (e *echoSession) Done() <-chan struct{} { return e.done }
func (e *echoSession) Gone() <-chan struct{} { return e.done }

func sessionRunner(t *testing.T) (*Runner, *fakeSessions) {
	var logs bytes.Buffer
	r, sb := newRunner(runnertest.Echo, &logs)
	f := &fakeSessions{Sandbox: sb}
	r.Sandbox = f
	r.Sessions = session.New(session.Limits{IdleTTL: time.Minute, MaxLifetime: time.Hour, MaxPerClient: 2, MaxTotal: 4}, nil)
	t.Cleanup(r.Sessions.Close)
	return r, f
}

func TestSessionCalls(t *testing.T) {
	r, f := sessionRunner(t)
	ctx := context.Background()
	out, err := r.Run(ctx, Call{Language: "python", Code: []byte("a"), Session: NewSession, Owner: "o"})
	if err != nil || out.Session == "" || string(out.Result.Stdout.Head) != "+a" {
		t.Fatalf("new: %v %+v", err, out)
	}
	// The session's program is the language's driver, from the same spec as a call's.
	driver, _ := policy.SessionDriver("python")
	if len(f.specs) != 1 || !bytes.Equal(f.specs[0].Code, driver) || f.specs[0].Language != "python" {
		t.Fatalf("session spec: %+v", f.specs)
	}
	id := out.Session
	out, err = r.Run(ctx, Call{Code: []byte("b"), Session: id, Owner: "o"})
	if err != nil || string(out.Result.Stdout.Head) != "++b" || out.Language.Name != "python" {
		t.Fatalf("continue: %v %+v", err, out)
	}
	refused := []struct {
		name string
		call Call
		want error
	}{
		{"another owner", Call{Code: []byte("c"), Session: id, Owner: "p"}, session.ErrUnknown},
		{"a guessed id", Call{Code: []byte("c"), Session: session.NewID(), Owner: "o"}, session.ErrUnknown},
		{"no owner", Call{Language: "python", Code: []byte("c"), Session: NewSession}, policy.ErrInvalidRequest},
		{"args", Call{Code: []byte("c"), Session: id, Owner: "o", Args: []string{"x"}}, policy.ErrInvalidRequest},
		{"files later", Call{Code: []byte("c"), Session: id, Owner: "o", Files: []policy.FileInput{{Path: "a", Content: "x"}}}, policy.ErrInvalidRequest},
		{"another language", Call{Language: "bash", Code: []byte("c"), Session: id, Owner: "o"}, policy.ErrInvalidRequest},
		{"close without a session", Call{Language: "python", Code: []byte("c"), CloseSession: true}, policy.ErrInvalidRequest},
	}
	for _, c := range refused {
		if _, err := r.Run(ctx, c.call); !errors.Is(err, c.want) || !IsRefusal(err) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	out, err = r.Run(ctx, Call{Code: []byte("d"), Session: id, Owner: "o", CloseSession: true})
	if err != nil || !out.SessionClosed || string(out.Result.Stdout.Head) != "+++d" {
		t.Fatalf("close: %v %+v", err, out)
	}
	if _, err := r.Run(ctx, Call{Code: []byte("e"), Session: id, Owner: "o"}); !errors.Is(err, session.ErrUnknown) {
		t.Fatalf("after close: %v", err)
	}
}

func TestSessionsRefusedWhereOff(t *testing.T) {
	var logs bytes.Buffer
	r, _ := newRunner(runnertest.Echo, &logs)
	call := Call{Language: "python", Code: []byte("a"), Session: NewSession, Owner: "o"}
	if _, err := r.Run(context.Background(), call); !errors.Is(err, policy.ErrInvalidRequest) || !strings.Contains(err.Error(), "sessions.enabled") {
		t.Fatalf("sessions off: %v", err)
	}
	r.Sessions = session.New(session.Limits{IdleTTL: time.Minute, MaxLifetime: time.Hour, MaxPerClient: 2, MaxTotal: 4}, nil)
	defer r.Sessions.Close()
	if _, err := r.Run(context.Background(), call); !errors.Is(err, policy.ErrInvalidRequest) || !strings.Contains(err.Error(), "platform") {
		t.Fatalf("a backend without sessions: %v", err)
	}
	rs, _ := sessionRunner(t)
	rs.Imports = policy.Imports{DenyImport: []string{"socket"}}
	if _, err := rs.Run(context.Background(), call); !errors.Is(err, policy.ErrInvalidRequest) || !strings.Contains(err.Error(), "import policy") {
		t.Fatalf("python session under an import policy: %v", err)
	}
}
