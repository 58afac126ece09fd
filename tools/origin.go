package tools

import (
	"context"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/airlock-mcp/airlock/sanitize"
)

// origin names where a call came from, for the audit log: the transport ("stdio" for
// serve's stdio session; any other session is an HTTP one; no session means an
// in-process caller) and the client's name/version, from the session's initialize or
// from the request's own _meta (2026-07-28 clients send no initialize).
func origin(ctx context.Context, req mcp.CallToolRequest) (transport, client string) {
	transport = "in-process"
	if s := server.ClientSessionFromContext(ctx); s != nil {
		transport = "http"
		if stdio(s) {
			transport = "stdio"
		}
		if ci, ok := s.(server.SessionWithClientInfo); ok {
			client = implName(ci.GetClientInfo().Name, ci.GetClientInfo().Version)
		}
	}
	if req.Params.Meta != nil {
		if info, ok := req.Params.Meta.AdditionalFields["io.modelcontextprotocol/clientInfo"].(map[string]any); ok {
			name, _ := info["name"].(string)
			version, _ := info["version"].(string)
			if n := implName(name, version); n != "" {
				client = n
			}
		}
	}
	return transport, client
}

// StdioSession is implemented by serve's stdio session. The stdio client is known by
// it, not by its id "stdio": a stateless HTTP server's session id is whatever the client
// sent as Mcp-Session-Id (mcp-go takes it as it comes), so "stdio" can come over HTTP.
type StdioSession interface {
	server.ClientSession
	StdioTransport()
}

// stdio reports whether s is the stdio client's session.
func stdio(s server.ClientSession) bool {
	_, ok := s.(StdioSession)
	return ok
}

// implName caps what a client may put in the audit log, and escapes what is not visible
// there (sanitize.Escape; JSON escapes only C0).
func implName(name, version string) string {
	if name == "" {
		return ""
	}
	s := strings.TrimSuffix(name+"/"+version, "/")
	if len(s) > 128 {
		s = s[:128]
	}
	return sanitize.Escape(s)
}
