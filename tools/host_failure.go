package tools

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/airlock-mcp/airlock/runner"
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/sanitize"
)

// hostFailure turns a failure of the host side (a cgroup that cannot be created, an
// interpreter that vanished, a mount that failed) into a structured sandbox_error
// result, so a client sees the same shape and status as any other failed run. It
// returns nil for errors that are the caller's (refusals), the server's load (busy) or
// a cancellation: those keep their own messages.
func hostFailure(ctx context.Context, out runner.Outcome, err error) *mcp.CallToolResult {
	if runner.FailureOf(ctx, err) != runner.HostFailure {
		return nil
	}
	res := ResultOf(out)
	res.Status = string(sandbox.StatusSandboxError)
	res.ExitCode = -1
	res.Detail = sanitize.String("the sandbox could not be set up, nothing ran: " + err.Error())
	r := mcp.NewToolResultStructured(res, renderRun(res, out.Limits))
	r.IsError = true
	return r
}
