package serve

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/runner/runnertest"
	runsession "github.com/airlock-mcp/airlock/session"
)

var (
	sessionIDField = regexp.MustCompile(`"session_id":"([0-9a-f]{32})"`)
	detailField    = regexp.MustCompile(`"detail":"((?:[^"\\]|\\.)*)"`)
)

// TestRunSessionBelongsToItsOpener: a run_code session id is no capability by itself.
// Over Streamable HTTP with client tokens, alice's session answers only in the MCP
// session that opened it: bob in his own MCP session, alice in a second one, and either
// of them in a 2026-07-28 request (no MCP session: owner the token) get the answer a
// guessed id gets, and bob's close_session closes nothing. On a stateless server the
// owner is the token: alice's id works for her from any request, never for bob.
func TestRunSessionBelongsToItsOpener(t *testing.T) {
	const aliceToken, bobToken = "Bearer aaaaaaaaaaaaaaaaaaaa", "Bearer bbbbbbbbbbbbbbbbbbbb"
	modern := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "run_code"}
	args := func(body, extra string) string {
		return strings.Replace(body, `"code":"CODE"`, `"code":"x = 1"`+extra, 1)
	}
	in := func(token, mcpSession string, hdr map[string]string) map[string]string {
		m := map[string]string{"Authorization": token}
		if mcpSession != "" {
			m["Mcp-Session-Id"] = mcpSession
		}
		for k, v := range hdr {
			m[k] = v
		}
		return m
	}
	for _, stateless := range []bool{false, true} {
		name := map[bool]string{false: "stateful", true: "stateless"}[stateless]
		t.Run(name, func(t *testing.T) {
			d := fakeDeps(runnertest.Echo, 2)
			d.Runner.Sandbox = openSessions{d.Runner.Sandbox.(*runnertest.Sandbox)}
			d.Runner.Sessions = runsession.New(runsession.Limits{IdleTTL: time.Minute, MaxLifetime: time.Hour, MaxPerClient: 4, MaxTotal: 16}, quiet)
			t.Cleanup(d.Runner.Sessions.Close)
			d.Config.HTTP.Stateless = stateless
			ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20, Stateless: stateless, Clients: aliceAndBob(t)})
			url := ts.URL + "/mcp"
			var s1, s2, bobS string
			if !stateless {
				s1 = initSession(t, url, in(aliceToken, "", nil))
				s2 = initSession(t, url, in(aliceToken, "", nil))
				bobS = initSession(t, url, in(bobToken, "", nil))
			}
			r := do(t, http.MethodPost, url, args(callBody, `,"session":"new"`), in(aliceToken, s1, nil))
			m := sessionIDField.FindStringSubmatch(r.body)
			if r.code != 200 || m == nil {
				t.Fatalf("alice's new session: %d %s", r.code, r.body)
			}
			id := m[1]
			use := func(body, extra string) string { return args(body, `,"session":"`+id+`"`+extra) }
			guessed := strings.Repeat("0", 32)
			unknown := func(who string, r reply) {
				t.Helper()
				g := do(t, http.MethodPost, url, args(callBody, `,"session":"`+guessed+`"`), in(bobToken, bobS, nil))
				// The run's own id differs per call; the detail must not, but for the id asked.
				norm := func(s string) string {
					m := detailField.FindStringSubmatch(s)
					if m == nil {
						return "no detail in " + s
					}
					return strings.ReplaceAll(strings.ReplaceAll(m[1], id, "ID"), guessed, "ID")
				}
				if r.code != 200 || !strings.Contains(r.body, "unknown session") || !strings.Contains(r.body, `"isError":true`) || norm(r.body) != norm(g.body) {
					t.Errorf("%s using alice's session: %d %s\nwant the answer to a guessed id: %s", who, r.code, r.body, g.body)
				}
			}
			unknown("bob, closing it", do(t, http.MethodPost, url, use(callBody, `,"close_session":true`), in(bobToken, bobS, nil)))
			unknown("bob in a 2026-07-28 request", do(t, http.MethodPost, url, use(modernCall, `,"close_session":true`), in(bobToken, "", modern)))
			if !stateless {
				unknown("alice from another MCP session", do(t, http.MethodPost, url, use(callBody, `,"close_session":true`), in(aliceToken, s2, nil)))
				unknown("alice in a 2026-07-28 request", do(t, http.MethodPost, url, use(modernCall, `,"close_session":true`), in(aliceToken, "", modern)))
			} else {
				// Stateless: the token is the owner, whatever Mcp-Session-Id says.
				if r := do(t, http.MethodPost, url, use(callBody, ""), in(aliceToken, "anything", nil)); !strings.Contains(r.body, `"session_id":"`+id+`"`) {
					t.Errorf("alice's own session from another request: %d %s", r.code, r.body)
				}
			}
			if n := d.Runner.Sessions.Stats().Open; n != 1 {
				t.Fatalf("%d sessions open after the others' attempts, want alice's 1", n)
			}
			r = do(t, http.MethodPost, url, use(callBody, `,"close_session":true`), in(aliceToken, s1, nil))
			if !strings.Contains(r.body, `"session_id":"`+id+`"`) || strings.Contains(r.body, "unknown session") {
				t.Fatalf("alice's own call in her session: %d %s", r.code, r.body)
			}
			if n := d.Runner.Sessions.Stats().Open; n != 0 {
				t.Fatalf("%d sessions open after alice closed hers", n)
			}
		})
	}
}
