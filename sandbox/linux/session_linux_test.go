package linux

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/sandbox"
)

// sessionSpec is a session of lang with the real interpreter and its driver.
func sessionSpec(t *testing.T, lang string) sandbox.Spec {
	t.Helper()
	code, ok := policy.SessionDriver(lang)
	if !ok {
		t.Fatalf("no driver for %s", lang)
	}
	spec := sandbox.Spec{Language: lang, Code: code}
	switch lang {
	case "python":
		spec.Argv, spec.CodeFile = []string{python, "-I", "-S", "main.py"}, "main.py"
	case "javascript":
		spec.Argv, spec.CodeFile = []string{"/usr/bin/node", "main.js"}, "main.js"
		spec.Limits.AddressSpace = 8 << 30
	case "bash":
		spec.Argv, spec.CodeFile = []string{"/bin/bash", "main.sh"}, "main.sh"
	}
	return spec
}

func openSession(t *testing.T, spec sandbox.Spec) sandbox.Session {
	t.Helper()
	s := testSandbox(t)
	requireSandbox(t, s.sessionUnavailable())
	ss, err := s.OpenSession(context.Background(), spec)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	t.Cleanup(ss.Close)
	return ss
}

// call runs code in ss with a 10 s wall limit (or wall, when given).
func call(t *testing.T, ss sandbox.Session, code string, wall ...time.Duration) sandbox.Result {
	t.Helper()
	lim := sandbox.Limits{Wall: 10 * time.Second}
	if len(wall) > 0 {
		lim.Wall = wall[0]
	}
	res, err := ss.Call(context.Background(), sandbox.SessionCall{Code: []byte(code), Limits: lim})
	if err != nil {
		t.Fatalf("Call %q: %v", code, err)
	}
	return res
}

func wantOut(t *testing.T, res sandbox.Result, status sandbox.Status, stdout string) {
	t.Helper()
	if res.Status != status || strings.TrimSpace(string(res.Stdout.Bytes())) != stdout {
		t.Fatalf("want %s with stdout %q, got %s", status, stdout, brief(res))
	}
}

func TestSessionKeepsStateAndFiles(t *testing.T) {
	cases := map[string][3]string{
		"python":     {"x = 41\nopen('kept.txt', 'w').write('hi')", "print(x + 1)", "print(open('kept.txt').read())"},
		"javascript": {"var x = 41; require('fs').writeFileSync('kept.txt', 'hi')", "console.log(x + 1)", "console.log(require('fs').readFileSync('kept.txt', 'utf8'))"},
		"bash":       {"x=41; mkdir d; cd d; echo hi > ../kept.txt", "echo $((x + 1))", "cat ../kept.txt"},
	}
	for lang, c := range cases {
		t.Run(lang, func(t *testing.T) {
			ss := openSession(t, sessionSpec(t, lang))
			wantOut(t, call(t, ss, c[0]), sandbox.StatusOK, "")
			wantOut(t, call(t, ss, c[1]), sandbox.StatusOK, "42")
			wantOut(t, call(t, ss, c[2]), sandbox.StatusOK, "hi")
			// Each call has its own streams and status.
			res := call(t, ss, map[string]string{"python": "import sys; print('e', file=sys.stderr); sys.exit(3)",
				"javascript": "console.error('e'); process.exitCode = 3", "bash": "echo e >&2; (exit 3)"}[lang])
			if res.Status != sandbox.StatusError || res.ExitCode != 3 || strings.TrimSpace(string(res.Stderr.Bytes())) != "e" || res.Stdout.Total != 0 {
				t.Fatalf("want error 3 with stderr e: %s", brief(res))
			}
			wantOut(t, call(t, ss, c[1]), sandbox.StatusOK, "42")
		})
	}
}
