package tools

import (
	"context"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// origin names where a call came from, for the audit log: the transport ("stdio" is the
// id of serve's stdio session; any other session is an HTTP one; no session means an
// in-process caller) and the client's name/version, from the session's initialize or
// from the request's own _meta (2026-07-28 clients send no initialize).
func origin(ctx context.Context, req mcp.CallToolRequest) (transport, client string) {
	transport = "in-process"
	if s := server.ClientSessionFromContext(ctx); s != nil {
		transport = "http"
		if s.SessionID() == "stdio" {
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

// implName caps what a client may put in the audit log.
func implName(name, version string) string {
	if name == "" {
		return ""
	}
	s := strings.TrimSuffix(name+"/"+version, "/")
	if len(s) > 128 {
		s = s[:128]
	}
	return strings.ToValidUTF8(s, "?")
}
