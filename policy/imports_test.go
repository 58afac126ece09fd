package policy

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-mcp/airlock/sandbox"
)

var (
	pyOnce sync.Once
	pyLang Language
	pyErr  error
)

// hostPython is the detected python, shared by the guard tests.
func hostPython(t testing.TB) Language {
	t.Helper()
	pyOnce.Do(func() {
		r, err := Detect([]string{"python"})
		if err != nil {
			pyErr = err
			return
		}
		pyLang, pyErr = r.Lookup("python")
	})
	if pyErr != nil {
		t.Skipf("no python: %v", pyErr)
	}
	return pyLang
}

// runGuarded runs code the way the sandbox would (Spec, then Apply, files written into a
// fresh workspace), directly on the host with the real interpreter.
func runGuarded(t testing.TB, p Imports, code string, args ...string) (sandbox.Result, string) {
	t.Helper()
	spec := p.Apply(hostPython(t).Spec([]byte(code), args, DefaultBounds().Clamp(Request{}), BoundByRlimit))
	dir := t.TempDir()
	files := append([]sandbox.File{{Path: spec.CodeFile, Data: spec.Code}}, spec.Files...)
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.Path), f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir, cmd.Env = dir, spec.Env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := sandbox.Result{Stderr: sandbox.Stream{Head: stderr.Bytes(), Total: int64(stderr.Len())}}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.ExitCode = exit.ExitCode()
	default:
		t.Fatal(err)
	}
	return res, stdout.String()
}

type guardCase struct {
	name   string
	policy Imports
	code   string
	module string // "" means the run must NOT be denied
	line   int
	how    string
}

func runCases(t *testing.T, cases []guardCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, stdout := runGuarded(t, tc.policy, tc.code)
			v, denied := tc.policy.Denied(res)
			if tc.module == "" {
				if denied || res.ExitCode != 0 {
					t.Fatalf("denied=%v exit=%d, want a normal run\nstderr: %s", denied, res.ExitCode, res.Stderr.Bytes())
				}
				return
			}
			if !denied {
				t.Fatalf("not denied (exit %d)\nstdout: %s\nstderr: %s", res.ExitCode, stdout, res.Stderr.Bytes())
			}
			if want := (Violation{Module: tc.module, Line: tc.line, How: tc.how}); v != want {
				t.Fatalf("violation %+v, want %+v", v, want)
			}
			if strings.Contains(stdout, "RAN") {
				t.Fatalf("user code ran past the denial: %q", stdout)
			}
		})
	}
}

// TestGuardCaught lists the bypass attempts the guard stops. Each program prints RAN after
// the forbidden import, so a denial that comes too late fails too.
func TestGuardCaught(t *testing.T) {
	strict := StrictImports()
	runCases(t, []guardCase{
		{"import", strict, "x = 1\n\nimport os\nprint('RAN')\n", "os", 3, "static"},
		{"import submodule", strict, "import os.path\n", "os.path", 1, "static"},
		{"import as alias", strict, "import json\nimport socket as s\n", "socket", 2, "static"},
		{"from import", strict, "from os import path\n", "os", 1, "static"},
		{"from submodule import", strict, "from os.path import join\n", "os.path", 1, "static"},
		{"lowest line of several", strict, "print('RAN')\nimport subprocess\nimport os\n", "subprocess", 2, "static"},
		{"nested in uncalled function", strict, "print('RAN')\ndef f():\n    if True:\n        import ctypes\n", "ctypes", 4, "static"},
		{"under try/except", strict, "try:\n    import socket\nexcept ImportError:\n    pass\nprint('RAN')\n", "socket", 2, "static"},
		{"literal __import__", strict, "print('RAN')\nm = __import__('os')\n", "os", 2, "static"},
		{"literal import_module", strict, "import importlib\nprint('RAN')\nimportlib.import_module('subprocess')\n", "subprocess", 3, "static"},
		{"computed __import__", strict, "m = __import__('o' + 's')\nprint('RAN')\n", "os", 1, "runtime"},
		{"computed import_module", strict, "import importlib\nm = importlib.import_module(''.join(['o', 's']))\nprint('RAN')\n", "os", 2, "runtime"},
		{"importlib.__import__", strict, "import importlib\nimportlib.__import__('sub' + 'process')\nprint('RAN')\n", "subprocess", 2, "runtime"},
		{"exec string", strict, "exec('import so' + 'cket')\nprint('RAN')\n", "socket", 1, "runtime"},
		{"eval string", strict, "eval(\"__import__('sh' + 'util')\")\nprint('RAN')\n", "shutil", 1, "runtime"},
		{"compile with custom name", strict, "exec(compile('import mm' + 'ap', '<x>', 'exec'))\nprint('RAN')\n", "mmap", 1, "runtime"},
		{"builtins dict", strict, "import builtins\nbuiltins.__dict__['__import__']('o' + 's')\nprint('RAN')\n", "os", 2, "runtime"},
		{"forged __package__ relative import", strict, "g = {'__package__': 'os', '__name__': 'os.x'}\nexec('from . import path', g)\nprint('RAN')\n", "os", 2, "runtime"},
		{"catching does not help", strict, "try:\n    __import__('o' + 's')\nexcept BaseException:\n    pass\nprint('RAN')\n", "os", 2, "runtime"},
		{"nested function call", strict, "def f(n):\n    return __import__(n)\n\nf('sig' + 'nal')\nprint('RAN')\n", "signal", 2, "runtime"},
		{"deny_from attribute", Imports{DenyFrom: []string{"os.system"}}, "import os\nfrom os import getpid\nfrom os import system\n", "os.system", 3, "static"},
		{"deny_from at runtime", Imports{DenyFrom: []string{"os.system"}}, "exec('from os import sys' + 'tem')\nprint('RAN')\n", "os.system", 1, "runtime"},
	})
}

// TestGuardGaps pins the known advisory gaps documented in imports.go: these are NOT
// caught. A test here that starts failing means the guard got stronger; move the case
// to TestGuardCaught and update the doc.
func TestGuardGaps(t *testing.T) {
	strict := StrictImports()
	runCases(t, []guardCase{
		{"sys.modules of a loaded module", strict, "import sys\nsys.modules['o' + 's'].getpid()\n", "", 0, ""},
		{"attribute of a library", strict, "import random\nrandom._os.getpid()\n", "", 0, ""},
		{"original __import__ from the closure", strict,
			"for c in __import__.__closure__:\n    v = c.cell_contents\n    if getattr(v, '__name__', '') == '__import__' and type(v).__name__ == 'builtin_function_or_method':\n        v('o' + 's').getpid()\n", "", 0, ""},
		{"library-looking file name", strict, "exec(compile('import os', '/usr/lib/python3/x.py', 'exec'))\n", "", 0, ""},
		{"os.system when only subprocess is denied", Imports{DenyImport: []string{"subprocess"}}, "import os\nos.system('true')\n", "", 0, ""},
		{"library exposing a denied module", strict, "import asyncio\nasyncio.base_events.socket.gethostname()\n", "", 0, ""},
	})
}

// TestGuardAllowed checks that the guard does not break ordinary programs.
func TestGuardAllowed(t *testing.T) {
	strict := StrictImports()
	common := "import random, json, math, datetime, collections, re, pathlib, tempfile, logging, csv, " +
		"statistics, decimal, dataclasses, uuid, hashlib, zipfile, unittest, argparse, inspect, asyncio, " +
		"importlib, sys, threading, sqlite3, xml.etree.ElementTree, urllib.parse\nprint('ok')\n"
	res, out := runGuarded(t, strict, common)
	if res.ExitCode != 0 || out != "ok\n" {
		t.Fatalf("common stdlib under StrictImports: exit %d out %q\n%s", res.ExitCode, out, res.Stderr.Bytes())
	}

	res, out = runGuarded(t, strict, "import sys\nprint(sys.argv, __name__, __file__.rsplit('/', 1)[-1])\n", "a", "b c")
	if res.ExitCode != 0 || out != "['main.py', 'a', 'b c'] __main__ main.py\n" {
		t.Fatalf("argv/name: exit %d out %q\n%s", res.ExitCode, out, res.Stderr.Bytes())
	}

	res, _ = runGuarded(t, strict, "import sys\nsys.exit(3)\n")
	if res.ExitCode != 3 {
		t.Fatalf("sys.exit(3) gave %d", res.ExitCode)
	}

	res, _ = runGuarded(t, strict, "def f():\n    raise ValueError('boom')\n\nf()\n")
	tb := string(res.Stderr.Bytes())
	if res.ExitCode != 1 || !strings.Contains(tb, `main.py", line 2, in f`) || !strings.Contains(tb, `main.py", line 4`) ||
		strings.Contains(tb, GuardFile) || !strings.Contains(tb, "ValueError: boom") {
		t.Fatalf("traceback (exit %d):\n%s", res.ExitCode, tb)
	}

	res, _ = runGuarded(t, strict, "x = (\n")
	if res.ExitCode != 1 || !strings.Contains(string(res.Stderr.Bytes()), "SyntaxError") || strings.Contains(string(res.Stderr.Bytes()), GuardFile) {
		t.Fatalf("syntax error (exit %d):\n%s", res.ExitCode, res.Stderr.Bytes())
	}

	res, out = runGuarded(t, strict, "class A: pass\nimport pickle\nprint(type(pickle.loads(pickle.dumps(A()))).__name__)\n")
	if res.ExitCode != 0 || out != "A\n" {
		t.Fatalf("pickling a __main__ class: exit %d out %q\n%s", res.ExitCode, out, res.Stderr.Bytes())
	}
}

func TestGuardExitCodeMatches(t *testing.T) {
	if !bytes.Contains(guardScript, []byte("DENIED_EXIT = "+strconv.Itoa(DeniedExitCode)+"\n")) ||
		!bytes.Contains(guardScript, []byte(`MARKER = b"`+deniedMarker+`"`)) {
		t.Fatal("guard script and Go disagree on the exit code or the marker")
	}
}

func TestApply(t *testing.T) {
	py := Language{Name: "python", File: "main.py", Argv: []string{"/usr/bin/python3", "-E", "-s", "-B", "main.py"}}
	in := py.Spec([]byte("x"), []string{"main.py", "arg"}, sandbox.Limits{}, BoundByRlimit)
	in.Files = make([]sandbox.File, 1, 4)
	in.Files[0] = sandbox.File{Path: "data.txt"}
	p := Imports{DenyImport: []string{"os", "bad,name"}, DenyFrom: []string{"os.system"}}

	out := p.Apply(in)
	want := []string{"/usr/bin/python3", "-I", "-B", GuardFile, "os", "os.system", "main.py", "main.py", "arg"}
	if !slices.Equal(out.Argv, want) {
		t.Fatalf("argv %q, want %q", out.Argv, want)
	}
	if len(out.Files) != 2 || out.Files[1].Path != GuardFile || !bytes.Equal(out.Files[1].Data, guardScript) {
		t.Fatalf("files %+v", out.Files)
	}
	if len(in.Files) != 1 || in.Files[:2][1].Path == GuardFile || in.Argv[4] != "main.py" {
		t.Fatal("Apply changed its input spec")
	}

	if got := (Imports{}).Apply(in); !slices.Equal(got.Argv, in.Argv) || len(got.Files) != 1 {
		t.Fatalf("empty policy changed the spec: %q", got.Argv)
	}
	js := Language{Name: "javascript", File: "main.js", Argv: []string{"/usr/bin/node", "main.js"}}.Spec(nil, nil, sandbox.Limits{}, BoundByRlimit)
	if got := p.Apply(js); !slices.Equal(got.Argv, js.Argv) || len(got.Files) != 0 {
		t.Fatalf("javascript changed: %q", got.Argv)
	}
	broken := in
	broken.Argv = []string{"/usr/bin/python3", "-c", "pass"}
	if got := p.Apply(broken); got.Argv != nil {
		t.Fatalf("spec without its code file in argv must fail closed, got %q", got.Argv)
	}
}

func TestDenied(t *testing.T) {
	p := StrictImports()
	report := "\nairlock-policy-denied {\"module\":\"os\",\"line\":3,\"how\":\"static\"}\n"
	res := func(code int, stderr string) sandbox.Result {
		return sandbox.Result{ExitCode: code, Stderr: sandbox.Stream{Head: []byte(stderr), Total: int64(len(stderr))}}
	}
	tests := []struct {
		name string
		p    Imports
		res  sandbox.Result
		want bool
	}{
		{"report and exit code", p, res(DeniedExitCode, "output\n"+report), true},
		{"report at start", p, res(DeniedExitCode, report[1:]), true},
		{"report in the tail of a truncated stream", p, sandbox.Result{ExitCode: DeniedExitCode,
			Stderr: sandbox.Stream{Head: []byte("xxxx"), Tail: []byte(report), Total: 1 << 20}}, true},
		{"other exit code", p, res(1, report), false},
		{"no report", p, res(DeniedExitCode, "Traceback\n"), false},
		{"marker mid-line", p, res(DeniedExitCode, "print: airlock-policy-denied {\"module\":\"os\",\"line\":3,\"how\":\"static\"}\n"), false},
		{"module the policy allows", p, res(DeniedExitCode, "\nairlock-policy-denied {\"module\":\"json\",\"line\":1,\"how\":\"static\"}\n"), false},
		{"bad how", p, res(DeniedExitCode, "\nairlock-policy-denied {\"module\":\"os\",\"line\":1,\"how\":\"x\"}\n"), false},
		{"bad json", p, res(DeniedExitCode, "\nairlock-policy-denied {\"module\":\n"), false},
		{"empty policy", Imports{}, res(DeniedExitCode, report), false},
		// The program can write the line itself: what it names must be a module name.
		{"module with escapes", p, res(DeniedExitCode, "\nairlock-policy-denied {\"module\":\"os.\\u001b]52;c;eA==\\u0007\",\"line\":3,\"how\":\"static\"}\n"), false},
		{"module with spaces", p, res(DeniedExitCode, "\nairlock-policy-denied {\"module\":\"os.the secret is 42\",\"line\":3,\"how\":\"static\"}\n"), false},
		{"module too long", p, res(DeniedExitCode, "\nairlock-policy-denied {\"module\":\"os."+strings.Repeat("a", 300)+"\",\"line\":3,\"how\":\"static\"}\n"), false},
	}
	for _, tt := range tests {
		v, ok := tt.p.Denied(tt.res)
		if ok != tt.want {
			t.Errorf("%s: Denied = %v (%+v), want %v", tt.name, ok, v, tt.want)
		}
		if ok && (v != Violation{Module: "os", Line: 3, How: "static"}) {
			t.Errorf("%s: violation %+v", tt.name, v)
		}
	}
}

func TestImportsValidate(t *testing.T) {
	if err := StrictImports().Validate(); err != nil {
		t.Fatal(err)
	}
	err := Imports{DenyImport: []string{"os", "a..b", "1x"}, DenyFrom: []string{"x,y", ""}}.Validate()
	for _, want := range []string{"deny_import[1]", "deny_import[2]", "deny_from[0]", "deny_from[1]"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Validate() = %v, want it to name %s", err, want)
		}
	}
}

// BenchmarkPythonStart compares a bare interpreter start with a guarded one.
func BenchmarkPythonStart(b *testing.B) {
	for _, c := range []struct {
		name string
		p    Imports
	}{{"bare", Imports{}}, {"guarded", StrictImports()}} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if res, _ := runGuarded(b, c.p, "print(1)\n"); res.ExitCode != 0 {
					b.Fatalf("exit %d", res.ExitCode)
				}
			}
		})
	}
}
