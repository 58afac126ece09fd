package serve

import (
	"path/filepath"
	"testing"

	"github.com/airlock-mcp/airlock/runner"
	"github.com/airlock-mcp/airlock/runner/runnertest"
)

// BenchmarkStdioCall is one sequential run_code call over the stdio transport, the
// sandbox excepted (a fake one echoes): the request's line, mcp-go's dispatch, the
// handler and the runner, the result's JSON and its line. With the audit log, the
// line's write and fsync (to the test's temporary directory) too.
func BenchmarkStdioCall(b *testing.B) {
	for _, audit := range []bool{false, true} {
		name := map[bool]string{false: "no-audit", true: "audit"}[audit]
		b.Run(name, func(b *testing.B) {
			d := fakeDeps(runnertest.Echo, 1)
			if audit {
				a, err := runner.OpenAudit(filepath.Join(b.TempDir(), "audit.jsonl"), 0)
				if err != nil {
					b.Fatal(err)
				}
				defer a.Close()
				d.Runner.Audit = a
			}
			p := startStdio(b, d, StdioOptions{})
			line := callLine(1, "print(1)", "")
			for b.Loop() {
				p.send(b, line)
				if m := p.recv(b); m["result"] == nil {
					b.Fatal(m)
				}
			}
		})
	}
}
