package tools

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/airlock-mcp/airlock/runner/runnertest"
)

// FuzzRunCodeArgs feeds run_code arbitrary JSON arguments through the real handler with a
// fake sandbox: it must never panic and always return a result, an error result whenever
// the required string "code" is missing, and status ok otherwise.
func FuzzRunCodeArgs(f *testing.F) {
	for _, s := range []string{
		`{"code":"print(1)"}`,
		`{"code":"print(1)","language":"python","timeout_seconds":2.5,"stdin":"x","args":["a","b"]}`,
		`{"code":1}`, `{"code":null}`, `{}`, `[]`, `"code"`, `null`, `{"code":"x","extra":true}`,
		`{"code":"x","timeout_seconds":-1}`, `{"code":"x","timeout_seconds":1e308}`, `{"code":"x","language":"cobol"}`,
		`{"code":"\u0000\ud800","stdin":"\u0000"}`, `{"code":"x","args":[1,null]}`, `{"code":"x","args":"a"}`,
		`{"code":"x","files":[{"path":"../etc/passwd","content":"x"}]}`, `{"code":"x","timeout_seconds":"5"}`,
	} {
		f.Add([]byte(s))
	}
	h := RunCode(fakeDeps(runnertest.Echo)).Handler
	f.Fuzz(func(t *testing.T, raw []byte) {
		var args any
		if json.Unmarshal(raw, &args) != nil {
			return // not JSON: the JSON-RPC layer rejects it before any tool runs (FuzzStdioLine)
		}
		req := mcp.CallToolRequest{}
		req.Params.Name = "run_code"
		req.Params.Arguments = args
		res, err := h(context.Background(), req)
		if err != nil || res == nil {
			t.Fatalf("handler returned (%v, %v) for %s; want a result", res, err, raw)
		}
		m, _ := args.(map[string]any)
		if code, ok := m["code"].(string); (!ok || code == "") && !res.IsError {
			t.Fatalf("no valid code but not an error result: %s -> %s", raw, text(res))
		}
		if !res.IsError {
			var out RunCodeResult
			b, _ := json.Marshal(res.StructuredContent)
			if json.Unmarshal(b, &out) != nil || out.Status != "ok" {
				t.Fatalf("success without an ok structured result: %s -> %s", raw, b)
			}
		}
	})
}
