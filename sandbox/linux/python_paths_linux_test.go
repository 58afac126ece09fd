package linux

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/sandbox"
)

// A helper module sent as an input file imports, as with `python3 main.py`: cold, from
// the warm pool, and under the import guard. Under the guard, a workspace file named like
// a module the guard uses (ast.py) does not replace it.
func TestPythonImportsItsOwnModules(t *testing.T) {
	py := poolLanguages(t)["python"]
	cold := testSandbox(t)
	warm := testSandbox(t)
	limits := sandbox.Limits{Wall: 10 * time.Second, Memory: 256 << 20, Pids: 32, Output: 1 << 20}
	warm.Warm([]sandbox.Spec{withDefaults(py.Spec(nil, nil, limits, policy.BoundByRlimit))}, 1)
	t.Cleanup(func() { warm.Close() })
	files := []sandbox.File{
		{Path: "helper.py", Data: []byte("GREETING = 'hello from helper'\n")},
		{Path: "ast.py", Data: []byte("raise SystemExit('the workspace ast.py was imported')\n")},
	}
	const code = "import sys, helper\nprint(helper.GREETING, sys.path[0])\n"
	const want = "hello from helper /workspace\n"

	spec := py.Spec([]byte(code), nil, limits, policy.BoundByRlimit)
	spec.Files = files
	res, err := cold.Run(context.Background(), withDefaults(spec))
	if err != nil || string(res.Stdout.Bytes()) != want {
		t.Fatalf("cold: %v %s", err, brief(res))
	}

	deadline := time.Now().Add(10 * time.Second)
	for warm.PoolStats().Ready < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	hits := warm.PoolStats().Hits
	res, err = warm.Run(context.Background(), withDefaults(spec))
	if err != nil || string(res.Stdout.Bytes()) != want || warm.PoolStats().Hits != hits+1 {
		t.Fatalf("pooled: %v %s (hits %d→%d)", err, brief(res), hits, warm.PoolStats().Hits)
	}

	guard := policy.Imports{DenyImport: []string{"socket"}}
	guarded := guard.Apply(spec)
	res, err = cold.Run(context.Background(), withDefaults(guarded))
	if err != nil || string(res.Stdout.Bytes()) != want {
		t.Fatalf("guarded: %v %s", err, brief(res))
	}
	denied := spec
	denied.Code = []byte("import helper\nimport socket\n")
	res, err = cold.Run(context.Background(), withDefaults(guard.Apply(denied)))
	if v, ok := guard.Denied(res); err != nil || !ok || v.Module != "socket" || strings.Contains(string(res.Stderr.Bytes()), "workspace ast.py") {
		t.Fatalf("guarded denial: %v %+v %s", err, v, brief(res))
	}
}
