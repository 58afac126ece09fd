package clients

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The protocol versions the SDK is driven at: its default (2026-07-28, stateless, found
// through server/discover) and the last handshake-era version.
var versions = []struct{ name, version string }{
	{"2026-07-28", ""},
	{"2025-11-25", "2025-11-25"},
}

func TestGoSDK(t *testing.T) {
	for _, tr := range []struct {
		name  string
		start func(*testing.T) *server
	}{
		{"stdio", startStdio},
		{"streamable-http", func(t *testing.T) *server { return startHTTP(t, false) }},
		{"sse", func(t *testing.T) *server { return startHTTP(t, true) }},
	} {
		for _, v := range versions {
			t.Run(tr.name+"/"+v.name, func(t *testing.T) {
				s := tr.start(t)
				cs, prog := connect(t, s, v.version)
				exercise(t, s, cs, prog)
			})
		}
	}
}

// runCodeSchema is run_code's output schema, resolved with the SDK's own JSON Schema
// library; every structuredContent is validated against it.
type checker struct {
	schema *jsonschema.Resolved
}

func exercise(t *testing.T, s *server, cs *mcp.ClientSession, prog *progressLog) {
	if info := cs.InitializeResult(); info == nil || info.ServerInfo == nil || info.ServerInfo.Name != "airlock" {
		t.Fatalf("initialize/discover: server info %+v", info)
	}
	t.Logf("negotiated protocol %s", cs.InitializeResult().ProtocolVersion)
	ctx := context.Background()
	var chk checker
	t.Run("tools/list", func(t *testing.T) {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("%v\nserver log:\n%s", err, s.logTail())
		}
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
			if tool.Name != "run_code" {
				continue
			}
			b, _ := json.Marshal(tool.OutputSchema)
			var sch jsonschema.Schema
			if err := json.Unmarshal(b, &sch); err != nil {
				t.Fatalf("run_code outputSchema: %v", err)
			}
			r, err := sch.Resolve(nil)
			if err != nil {
				t.Fatalf("run_code outputSchema does not resolve: %v", err)
			}
			chk.schema = r
		}
		slices.Sort(names)
		if strings.Join(names, " ") != "get_config probe_sandbox run_code" || chk.schema == nil {
			t.Fatalf("tools: %v (run_code outputSchema found: %t)", names, chk.schema != nil)
		}
	})
	if chk.schema == nil {
		t.FailNow()
	}

	t.Run("print", func(t *testing.T) {
		out, r := chk.run(t, cs, map[string]any{"code": "print('hello from', 6*7)"})
		if r.IsError || out["status"] != "ok" || out["stdout"] != "hello from 42\n" {
			t.Fatalf("isError=%t %v", r.IsError, out)
		}
	})
	t.Run("error exit", func(t *testing.T) {
		out, r := chk.run(t, cs, map[string]any{"code": "import sys\nprint('bye', file=sys.stderr)\nsys.exit(3)"})
		if !r.IsError || out["status"] != "error" || out["exit_code"] != float64(3) || out["stderr"] != "bye\n" {
			t.Fatalf("isError=%t %v", r.IsError, out)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		out, r := chk.run(t, cs, map[string]any{"code": "while True: pass", "timeout_seconds": 1})
		if !r.IsError || out["status"] != "timeout" {
			t.Fatalf("isError=%t %v", r.IsError, out)
		}
	})
	t.Run("image artifact", func(t *testing.T) {
		out, r := chk.run(t, cs, map[string]any{"code": pngProgram})
		var img *mcp.ImageContent
		for _, c := range r.Content {
			if i, ok := c.(*mcp.ImageContent); ok {
				img = i
			}
		}
		if r.IsError || img == nil || img.MIMEType != "image/png" || !strings.HasPrefix(string(img.Data), "\x89PNG") {
			t.Fatalf("isError=%t image=%v %v", r.IsError, img != nil, out)
		}
		if arts, _ := out["artifacts"].([]any); len(arts) != 1 {
			t.Errorf("artifacts: %v", out["artifacts"])
		}
	})
	t.Run("escape sequences", func(t *testing.T) {
		out, r := chk.run(t, cs, map[string]any{"code": `print("\x1b[31mred\x1b[0m\x07 \x1b]0;title\x07 \u202eevil")`})
		stdout, _ := out["stdout"].(string)
		text := textOf(r)
		for _, bad := range []string{"\x1b", "\x07", "\u202e"} {
			if strings.Contains(stdout, bad) || strings.Contains(text, bad) {
				t.Errorf("%q reached the client: stdout %q", bad, stdout)
			}
		}
		if r.IsError || !strings.Contains(stdout, "red") || !strings.Contains(stdout, "evil") {
			t.Fatalf("isError=%t stdout %q", r.IsError, stdout)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		for _, args := range []map[string]any{
			{"code": "1", "language": "cobol"},
			{"code": "1", "steps": 2},
			{"code": "1", "timeout_seconds": -1},
			{"language": "python"},
		} {
			out, r := chk.run(t, cs, args)
			if !r.IsError || out["status"] != "invalid_request" || out["detail"] != textOf(r) {
				t.Errorf("%v: isError=%t %v, text %q", args, r.IsError, out, textOf(r))
			}
		}
	})
	t.Run("progress", func(t *testing.T) {
		tok := "tok-" + randomHex(6)
		marker := "done-" + randomHex(6)
		params := &mcp.CallToolParams{Name: "run_code",
			Arguments: map[string]any{"code": fmt.Sprintf("import time\ntime.sleep(3.5)\nprint(%q)", marker)}}
		params.SetProgressToken(tok)
		out, _ := chk.call(t, cs, ctx, params)
		wall, _ := out["wall_ms"].(float64)
		// The sandbox ticks every second of the program's run: at least floor(wall) ticks.
		want := int(math.Floor(wall / 1000))
		wired, before := s.wire.order(tok, marker)
		if len(wired) < want || want < 3 {
			t.Fatalf("%d progress notifications on the wire for a %.0f ms run, want at least %d: %v", len(wired), wall, want, wired)
		}
		for i, v := range wired {
			if i > 0 && v <= wired[i-1] {
				t.Errorf("progress values do not strictly increase: %v", wired)
			}
			if !before[i] {
				t.Errorf("progress %v arrived after the result", v)
			}
		}
		time.Sleep(200 * time.Millisecond) // the SDK dispatches notifications on its own goroutine
		if got := prog.values(tok); len(got) != len(wired) {
			t.Errorf("the SDK handed %d progress notifications to the client, %d were on the wire", len(got), len(wired))
		}
	})
	t.Run("cancel", func(t *testing.T) {
		// The program re-executes itself with a marker in its command line, found by
		// on the host (a pooled interpreter's own command line is the pool's).
		marker := "airlock-cancel-" + randomHex(8)
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{
				"code": fmt.Sprintf("import os, sys\nos.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', %q])", marker)}})
			done <- err
		}()
		deadline := time.Now().Add(20 * time.Second)
		for len(withArg(marker)) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("the sandboxed program never showed up on the host")
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		t0 := time.Now()
		for len(withArg(marker)) > 0 {
			if time.Since(t0) > 2*time.Second {
				t.Fatalf("the sandboxed program %v is still on the host 2 s after the cancel", withArg(marker))
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("sandbox gone %v after the cancel", time.Since(t0).Round(time.Millisecond))
		if err := <-done; err == nil {
			t.Errorf("the cancelled call returned no error")
		}
		if out, r := chk.run(t, cs, map[string]any{"code": "print('alive')"}); r.IsError || out["stdout"] != "alive\n" {
			t.Fatalf("the session did not survive the cancel: %v", out)
		}
	})
	t.Run("8 parallel calls", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				out, r := chk.run(t, cs, map[string]any{"code": fmt.Sprintf("import time\ntime.sleep(0.5)\nprint(%d)", i)})
				if r.IsError || out["stdout"] != fmt.Sprintf("%d\n", i) {
					t.Errorf("call %d: isError=%t %v", i, r.IsError, out)
				}
			})
		}
		wg.Wait()
	})
	t.Run("20 MB message", func(t *testing.T) {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		t0 := time.Now()
		r, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "run_code",
			Arguments: map[string]any{"code": strings.Repeat("#", 20<<20)}})
		switch {
		case err == nil && r.IsError:
			t.Logf("refused as a tool error: %.200s", textOf(r))
		case err == nil:
			t.Fatalf("a 20 MB message was run")
		case cctx.Err() != nil:
			t.Fatalf("no answer to a 20 MB message within %v (%v)", time.Since(t0).Round(time.Millisecond), err)
		default:
			t.Logf("refused in %v: %v", time.Since(t0).Round(time.Millisecond), err)
		}
		if out, r := chk.run(t, cs, map[string]any{"code": "print('alive')"}); r.IsError || out["stdout"] != "alive\n" {
			t.Fatalf("the session did not survive the 20 MB message: %v", out)
		}
	})
}

// pngProgram writes a 1x1 PNG into out/, which comes back as image content.
const pngProgram = `import struct, zlib
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b"")
open("out/dot.png", "wb").write(png)
print("wrote", len(png))`

func (c *checker) run(t *testing.T, cs *mcp.ClientSession, args map[string]any) (map[string]any, *mcp.CallToolResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return c.call(t, cs, ctx, &mcp.CallToolParams{Name: "run_code", Arguments: args})
}

// call calls run_code and validates its structuredContent against the output schema
// (refusals and failed runs included: the schema binds every result).
func (c *checker) call(t *testing.T, cs *mcp.ClientSession, ctx context.Context, p *mcp.CallToolParams) (map[string]any, *mcp.CallToolResult) {
	t.Helper()
	r, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("run_code: protocol error %v", err)
	}
	b, _ := json.Marshal(r.StructuredContent)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil || out == nil {
		t.Fatalf("run_code returned no structuredContent (isError=%t): %s", r.IsError, textOf(r))
	}
	if err := c.schema.Validate(out); err != nil {
		t.Errorf("structuredContent does not validate against run_code's outputSchema: %v\n%s", err, b)
	}
	return out, r
}

func textOf(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// withArg lists host processes with arg in their command line.
func withArg(arg string) []string {
	var pids []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err == nil && slices.Contains(strings.Split(string(b), "\x00"), arg) {
			pids = append(pids, filepath.Base(d))
		}
	}
	return pids
}
