// Package tools defines airlock's MCP tools: one constructor per tool returning its
// definition and handler. Handlers report every failure a model can act on as an
// isError result and return a nil Go error; protocol misuse stays a JSON-RPC error.
package tools

import (
	"github.com/mark3labs/mcp-go/server"

	"github.com/airlock-mcp/airlock/config"
	"github.com/airlock-mcp/airlock/runner"
)

// Deps is what the tools share.
type Deps struct {
	Runner  *runner.Runner
	Prober  Prober
	Config  config.Config
	Version string
	// Transport is what the server serves MCP on: "stdio", "http" (Streamable HTTP) or
	// "sse"; "" outside a server (airlock config). With http or sse, Config.HTTP.Addr is
	// the address really listened on.
	Transport string
}

// All lists every tool, in the order tools/list presents them after sorting by name.
func All(d Deps) []server.ServerTool {
	return []server.ServerTool{GetConfig(d), ProbeSandbox(d), RunCode(d)}
}

// Register adds every tool to s.
func Register(s *server.MCPServer, d Deps) {
	s.AddTools(All(d)...)
}
