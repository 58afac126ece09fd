package tools

import (
	"context"
	"fmt"

	"github.com/invopop/jsonschema"
	"github.com/mark3labs/mcp-go/server"
)

// sessionSchema describes run_code's session arguments.
func sessionSchema(s, closeSession *jsonschema.Schema, d Deps) {
	if d.Runner.Sessions == nil {
		s.Description = "Sessions are off on this server: omit."
		closeSession.Description = "Sessions are off on this server: omit."
		return
	}
	lim := d.Runner.Sessions.Limits()
	s.Description = fmt.Sprintf(`Omit for a single-use sandbox (the default). "new" starts a session and the result's session_id names it; pass that id to run the next call in the same sandbox: `+
		`python and javascript keep their globals, bash its variables and working directory, and the workspace its files. A call's timeout interrupts only that call. `+
		`A session ends after %s without a call, after %s in all, or with close_session; at most %d per client. Sessions run python, javascript and bash; `+
		`args, allow_domains and (javascript) stdin are not available in them, files only with "new". `+
		`Each call returns as its output files what is in the output directory when it ends, files of earlier calls included until the code removes them.`,
		lim.IdleTTL, lim.MaxLifetime, lim.MaxPerClient)
	closeSession.Description = "End the session after this call (its sandbox and files are destroyed)."
}

// owner is who a session belongs to: the stdio connection, the HTTP MCP session (with
// the token that opened it), or the client token's name where there is no MCP session:
// a 2026-07-28 request, or any request of a stateless server, whose Mcp-Session-Id is
// whatever the client sent (mcp-go does not check it there). Empty: no identity
// (stateless without tokens), and so no sessions.
func owner(ctx context.Context, principal string, stateless bool) string {
	if s := server.ClientSessionFromContext(ctx); s != nil && s.SessionID() != "" {
		switch {
		case stdio(s):
			return "stdio"
		case !stateless:
			return HTTPOwner(s.SessionID(), principal)
		}
	}
	if principal != "" {
		return "token:" + principal
	}
	return ""
}

// HTTPOwner is the owner of the run_code sessions started in the stateful HTTP session
// id by the client principal.
func HTTPOwner(id, principal string) string { return "http:" + id + ":" + principal }

// sessionsNote qualifies "nothing persists between calls" in run_code's description.
func sessionsNote(d Deps) string {
	if d.Runner.Sessions == nil {
		return ""
	}
	return ` unless they share a session (pass session: "new", then the returned session_id, to keep variables and files across calls)`
}
