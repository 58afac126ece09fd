// Package serve builds airlock's MCP server and serves it over stdio, Streamable HTTP
// or the legacy SSE transport.
package serve

import (
	"github.com/mark3labs/mcp-go/server"

	"github.com/airlock-mcp/airlock/tools"
)

const instructions = `airlock runs untrusted code in a fresh, isolated, single-use sandbox per call.
Use run_code to execute a program and read its stdout, stderr and status; nothing persists between calls.
Use get_config to see the enabled languages and limits, and probe_sandbox to check the isolation on this host.`

// New builds the MCP server with every tool registered.
func New(d tools.Deps) *server.MCPServer {
	hooks := &server.Hooks{}
	hooks.AddOnRequestInitialization(beforeInitialize)
	s := server.NewMCPServer("airlock", d.Version,
		server.WithHooks(hooks),
		server.WithToolCapabilities(false),
		server.WithRecovery(),
		server.WithInstructions(instructions),
		server.WithToolHandlerMiddleware(endWithStream),
	)
	tools.Register(s, d)
	return s
}
