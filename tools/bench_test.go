package tools

import (
	"context"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/airlock-mcp/airlock/runner/runnertest"
)

// BenchmarkRunCodeHandler is the server's own work per run_code call, the sandbox
// excepted (a fake one echoes): argument decoding and validation, the runner, output
// sanitising and the structured result.
func BenchmarkRunCodeHandler(b *testing.B) {
	h := RunCode(fakeDeps(runnertest.Echo)).Handler
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_code"
	req.Params.Arguments = map[string]any{"code": "print(1)", "language": "python", "timeout_seconds": 10.0,
		"stdin": "input", "args": []any{"a", "b"}}
	for b.Loop() {
		res, err := h(context.Background(), req)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

// BenchmarkRunCodeHandlerLargeOutput adds a 1 MiB program output to sanitise and encode.
func BenchmarkRunCodeHandlerLargeOutput(b *testing.B) {
	h := RunCode(fakeDeps(runnertest.Echo)).Handler
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_code"
	req.Params.Arguments = map[string]any{"code": strings.Repeat("x", 1<<20)}
	for b.Loop() {
		if _, err := h(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBindRunCodeArgs is the argument check alone: decoding run_code's arguments
// strictly against their schema (unknown fields and wrong types refused), with two files.
func BenchmarkBindRunCodeArgs(b *testing.B) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_code"
	req.Params.Arguments = map[string]any{"code": "print(1)", "language": "python", "timeout_seconds": 10.0,
		"stdin": "input", "args": []any{"a", "b"}, "files": []any{
			map[string]any{"path": "data/in.csv", "content": "a,b\n1,2\n"},
			map[string]any{"path": "img.png", "content": "iVBORw0KGgo=", "encoding": "base64"},
		}}
	for b.Loop() {
		var args RunCodeArgs
		if err := bindStrict(req, &args, runCodeArgNames); err != nil || len(args.Files) != 2 {
			b.Fatal(err, args)
		}
	}
}
