package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/runner/runnertest"
)

// FuzzStdioLine writes an arbitrary line into a running stdio server, then a ping: every
// byte the server writes must be a JSON-RPC line, and the ping must be answered, i.e. no
// input crashes or wedges the loop.
func FuzzStdioLine(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"print(1)"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_code","arguments":{"code":7}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"nope"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`, `{"jsonrpc":"2.0","id":{},"method":"ping"}`,
		`not json`, `{`, `[]`, `[{"jsonrpc":"2.0","id":5,"method":"ping"}]`, "\x00\xff\xfe", `{"jsonrpc":"1.0","id":6}`,
		`{"jsonrpc":"2.0","id":7,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01"}}}`,
	} {
		f.Add([]byte(s))
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		_ = Stdio(context.Background(), New(fakeDeps(runnertest.Echo, 4)), inR, outW, StdioOptions{MaxLine: 1 << 16, Log: quiet})
		outW.Close()
	}()
	lines := make(chan []byte, 64)
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- append([]byte(nil), sc.Bytes()...)
		}
		close(lines)
	}()
	send := func(s string) { _, _ = io.WriteString(inW, s+"\n") }
	send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}`)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	n := 0
	f.Fuzz(func(t *testing.T, line []byte) {
		n++
		probe := fmt.Sprintf("probe-%d", n)
		if _, err := inW.Write(append(append([]byte(nil), line...), '\n')); err != nil {
			t.Fatalf("server stopped reading: %v", err)
		}
		send(`{"jsonrpc":"2.0","id":"` + probe + `","method":"ping"}`)
		deadline := time.After(10 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("server exited after %q", line)
				}
				var m struct {
					JSONRPC string          `json:"jsonrpc"`
					ID      json.RawMessage `json:"id"`
				}
				if err := json.Unmarshal(l, &m); err != nil || m.JSONRPC != "2.0" {
					t.Fatalf("stdout line is not JSON-RPC after %q: %q", line, l)
				}
				if string(m.ID) == `"`+probe+`"` {
					return
				}
			case <-deadline:
				t.Fatalf("ping not answered within 10 s after %q", line)
			}
		}
	})
}
