package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/airlock-mcp/airlock/runner"
	"github.com/airlock-mcp/airlock/session"
)

// sessionDeps are realDeps with sessions on, python and bash.
func sessionDeps(t *testing.T, lim session.Limits) Deps {
	t.Helper()
	d := realDeps(t)
	d.Runner.Sessions = session.New(lim, nil)
	t.Cleanup(d.Runner.Sessions.Close)
	return d
}

var testSessionLimits = session.Limits{IdleTTL: time.Minute, MaxLifetime: time.Hour, MaxPerClient: 2, MaxTotal: 16}

// clients starts n in-process clients of one server: n MCP sessions, n owners.
func clients(t *testing.T, d Deps, n int) []*client.Client {
	t.Helper()
	s := server.NewMCPServer("airlock", "test", server.WithToolCapabilities(false), server.WithRecovery())
	Register(s, d)
	var out []*client.Client
	for i := 0; i < n; i++ {
		c, err := client.NewInProcessClient(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Initialize(context.Background(), mcp.InitializeRequest{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		out = append(out, c)
	}
	return out
}

func TestRealSessionAcrossCalls(t *testing.T) {
	d := sessionDeps(t, testSessionLimits)
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	audit, err := runner.OpenAudit(auditPath, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	d.Runner.Audit = audit
	cs := clients(t, d, 2)
	a, b := cs[0], cs[1]
	r := call(t, a, "run_code", map[string]any{"code": "x = 41\nopen('kept.txt', 'w').write('hi')", "session": "new"})
	first := structured(t, r)
	if first.Status != "ok" || len(first.SessionID) != 32 {
		t.Fatalf("session new: %s", text(r))
	}
	id := first.SessionID
	next := structured(t, call(t, a, "run_code", map[string]any{"code": "print(x + 1, open('kept.txt').read())", "session": id}))
	if next.Status != "ok" || strings.TrimSpace(next.Stdout) != "42 hi" || next.SessionID != id {
		t.Fatalf("second call: %+v", next)
	}
	// A single-use call sees none of it.
	single := structured(t, call(t, a, "run_code", map[string]any{"code": "import os; print('x' in globals(), os.path.exists('kept.txt'))"}))
	if strings.TrimSpace(single.Stdout) != "False False" || single.SessionID != "" {
		t.Fatalf("single-use call: %+v", single)
	}
	// Another client using the id, and a guessed id: the same answer.
	other := call(t, b, "run_code", map[string]any{"code": "print(x)", "session": id})
	guessed := session.NewID()
	guess := call(t, a, "run_code", map[string]any{"code": "print(x)", "session": guessed})
	refusedAs(t, other, statusInvalidRequest)
	refusedAs(t, guess, statusInvalidRequest)
	if strings.ReplaceAll(text(other), id, "ID") != strings.ReplaceAll(text(guess), guessed, "ID") || !strings.Contains(text(other), "unknown session") {
		t.Fatalf("another client's use and a guess differ:\n%s\n%s", text(other), text(guess))
	}
	// The timeout interrupts the call; the session goes on.
	to := structured(t, call(t, a, "run_code", map[string]any{"code": "while True: pass", "session": id, "timeout_seconds": 1}))
	if to.Status != "timeout" {
		t.Fatalf("timeout: %+v", to)
	}
	after := structured(t, call(t, a, "run_code", map[string]any{"code": "print(x)", "session": id}))
	if after.Status != "ok" || (strings.TrimSpace(after.Stdout) != "41" && !to.SessionRestarted) {
		t.Fatalf("after the timeout: %+v (timeout restarted=%v)", after, to.SessionRestarted)
	}
	// get_config counts it; close_session ends it.
	var cfg ConfigView
	decodeStructured(t, call(t, a, "get_config", map[string]any{}), &cfg)
	if !cfg.Sessions.Enabled || cfg.Sessions.Open != 1 || cfg.Sessions.MaxPerClient != 2 {
		t.Fatalf("get_config sessions: %+v", cfg.Sessions)
	}
	closed := structured(t, call(t, a, "run_code", map[string]any{"code": "print('bye')", "session": id, "close_session": true}))
	if closed.Status != "ok" || !closed.SessionClosed {
		t.Fatalf("close: %+v", closed)
	}
	refusedAs(t, call(t, a, "run_code", map[string]any{"code": "print(x)", "session": id}), statusInvalidRequest)
	// The audit log records each call with its session.
	log, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	inSession := 0
	for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		var rec runner.AuditRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if rec.Session == id {
			inSession++
		}
	}
	// new, the second call, the other client's and the late attempt (refused, with the
	// id they named), the timeout, the one after it, the close.
	if inSession != 7 {
		t.Fatalf("the audit log has %d records of session %s, want 7:\n%s", inSession, id, log)
	}
}

func TestRealSessionCapNamesOpenSessions(t *testing.T) {
	d := sessionDeps(t, testSessionLimits)
	a := clients(t, d, 1)[0]
	var ids []string
	for i := 0; i < 2; i++ {
		ids = append(ids, structured(t, call(t, a, "run_code", map[string]any{"code": "pass", "session": runner.NewSession})).SessionID)
	}
	r := call(t, a, "run_code", map[string]any{"code": "pass", "session": runner.NewSession})
	refusedAs(t, r, statusBusy)
	for _, id := range ids {
		if !strings.Contains(text(r), id) {
			t.Fatalf("the cap's error does not name session %s: %s", id, text(r))
		}
	}
}

func decodeStructured(t *testing.T, r *mcp.CallToolResult, out any) {
	t.Helper()
	b, _ := json.Marshal(r.StructuredContent)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("structuredContent: %v", err)
	}
}

// A session call's output files come back as a single-use call's do: as content, and
// listed with their sha256 in structuredContent; each call gets what is in out/ when it
// ends, and a symlink the session planted is listed, never followed.
func TestRealSessionArtifacts(t *testing.T) {
	a := clients(t, sessionDeps(t, testSessionLimits), 1)[0]
	r := call(t, a, "run_code", map[string]any{"code": "open('out/a.txt', 'w').write('first\\n')", "session": "new"})
	first := structured(t, r)
	if r.IsError || first.SessionID == "" {
		t.Fatalf("session new: %s", textOf(r))
	}
	if txt, ok := resources(r)["airlock://run/"+first.ID+"/out/a.txt"].(mcp.TextResourceContents); !ok || txt.Text != "first\n" {
		t.Fatalf("call 1's a.txt = %#v\n%s", txt, textOf(r))
	}
	if art, ok := artifactByPath(first, "a.txt"); !ok || !art.Returned || art.SHA256 != sha([]byte("first\n")) {
		t.Fatalf("call 1's a.txt listed as %+v", art)
	}
	code := "import os\nos.remove('out/a.txt')\nopen('out/b.txt', 'w').write('second\\n')\nos.symlink('/etc/passwd', 'out/passwd')"
	r = call(t, a, "run_code", map[string]any{"code": code, "session": first.SessionID})
	second := structured(t, r)
	if r.IsError || len(second.Artifacts) != 2 {
		t.Fatalf("call 2: %s", textOf(r))
	}
	if art, ok := artifactByPath(second, "b.txt"); !ok || !art.Returned || art.SHA256 != sha([]byte("second\n")) {
		t.Fatalf("call 2's b.txt listed as %+v", art)
	}
	if art, ok := artifactByPath(second, "passwd"); !ok || art.Returned || art.Skipped != "symlink" {
		t.Fatalf("call 2's symlink listed as %+v", art)
	}
	if _, ok := resources(r)["airlock://run/"+second.ID+"/out/b.txt"]; !ok || len(resources(r)) != 1 {
		t.Fatalf("call 2's resources: %v", resources(r))
	}
	if b, _ := json.Marshal(r); strings.Contains(string(b), "root:x:0:0") || strings.Contains(string(b), "cm9vdDp4OjA6") {
		t.Fatal("call 2's result holds the host's /etc/passwd")
	}
}
