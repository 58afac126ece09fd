package darwin

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

func TestBaseEnv(t *testing.T) {
	env, err := baseEnv("/ws", "/ws/tmp", []string{"PYTHONDONTWRITEBYTECODE=1", "PATH=/evil", "HOME=/Users/alice", "DYLD_INSERT_LIBRARIES=/x.dylib",
		"BASH_ENV=/ws/evil.sh", "ENV=/ws/evil.sh", "BASH_FUNC_ulimit%%=() { :; }", "SHELLOPTS=xtrace", "PS4=$(id)"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PATH=/usr/bin:/bin", "HOME=/ws", "TMPDIR=/ws/tmp", "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1"}
	if !slices.Equal(env, want) {
		t.Errorf("env = %q, want %q", env, want)
	}
	for _, bad := range []string{"NOEQUALS", "=value", "K=a\x00b"} {
		if _, err := baseEnv("/ws", "/ws/tmp", []string{bad}); !errors.Is(err, sandbox.ErrInvalidSpec) {
			t.Errorf("%q: err = %v, want ErrInvalidSpec", bad, err)
		}
	}
}

func TestInterpreterPrefix(t *testing.T) {
	for in, want := range map[string]string{
		"/opt/homebrew/Cellar/node/21.1.0/bin/node":                                                        "/opt/homebrew/Cellar/node/21.1.0",
		"/opt/homebrew/Cellar/python@3.12/3.12.1/Frameworks/Python.framework/Versions/3.12/bin/python3.12": "/opt/homebrew/Cellar/python@3.12/3.12.1/Frameworks/Python.framework/Versions/3.12",
		"/usr/bin/python3": "",
		"/bin/sh":          "",
		"/Library/Frameworks/Python.framework/Versions/3.12/bin/python3.12": "",
		"/opt/tool/python": "/opt/tool",
		// Intel Homebrew: /usr/local is not a system directory, so it gets a read root.
		"/usr/local/Cellar/python@3.12/3.12.1/bin/python3.12": "/usr/local/Cellar/python@3.12/3.12.1",
		"/usr/libexec/x": "",
		"/python":        "",
	} {
		if got := interpreterPrefix(in); got != want {
			t.Errorf("interpreterPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    outcome
		want sandbox.Status
		code int
	}{
		{"exit 0", outcome{exited: true}, sandbox.StatusOK, 0},
		{"exit 3", outcome{exited: true, code: 3}, sandbox.StatusError, 3},
		{"wall kill", outcome{signal: "SIGKILL", wallLimit: true}, sandbox.StatusTimeout, -1},
		{"sigxcpu", outcome{signal: "SIGXCPU"}, sandbox.StatusTimeout, -1},
		{"cpu hard limit", outcome{signal: "SIGKILL", cpuUsed: 3 * time.Second, cpuLimit: 2 * time.Second}, sandbox.StatusTimeout, -1},
		{"output flood", outcome{signal: "SIGKILL", outputLimit: true}, sandbox.StatusOutputLimit, -1},
		{"cancel beats timeout", outcome{signal: "SIGKILL", cancelled: true, wallLimit: true}, sandbox.StatusCancelled, -1},
		{"segv", outcome{signal: "SIGSEGV"}, sandbox.StatusKilled, -1},
		{"fsize", outcome{signal: "SIGXFSZ"}, sandbox.StatusKilled, -1},
		{"setup", outcome{exited: true, code: exitSetupForTest, setupErr: "rlimit nproc: EPERM"}, sandbox.StatusSandboxError, exitSetupForTest},
		{"profile refused", outcome{exited: true, code: 65, denied: "syntax error"}, sandbox.StatusSandboxError, 65},
	} {
		status, code, detail := classify(tc.o)
		if status != tc.want || code != tc.code {
			t.Errorf("%s: got %s/%d (%s), want %s/%d", tc.name, status, code, detail, tc.want, tc.code)
		}
		if status != sandbox.StatusOK && detail == "" {
			t.Errorf("%s: no detail", tc.name)
		}
	}
}

// exitSetupForTest mirrors the darwin child's reserved code without importing darwin-only
// files into this platform-neutral test.
const exitSetupForTest = 125

func TestSandboxExecFailure(t *testing.T) {
	if got := sandboxExecFailure(65, []byte("sandbox-exec: unbound variable: FOO\n")); got != "unbound variable: FOO" {
		t.Errorf("got %q", got)
	}
	if got := sandboxExecFailure(0, []byte("sandbox-exec: x")); got != "" {
		t.Errorf("exit 0 must never be a sandbox-exec failure, got %q", got)
	}
	if got := sandboxExecFailure(1, []byte("Traceback ...\nsandbox-exec: x")); got != "" {
		t.Errorf("only the first line counts, got %q", got)
	}
}

func TestDeveloperTool(t *testing.T) {
	installed := map[string]bool{
		"/Library/Developer/CommandLineTools/usr/bin/python3":        true,
		"/Applications/Xcode.app/Contents/Developer/usr/bin/python3": true,
	}
	exists := func(p string) bool { return installed[p] }
	for _, tc := range []struct {
		stub, link, tool, dir string
		ok                    bool
	}{
		{"/usr/bin/python3", "", "/Library/Developer/CommandLineTools/usr/bin/python3", "/Library/Developer/CommandLineTools", true},
		{"/usr/bin/python3", "/Applications/Xcode.app/Contents/Developer", "/Applications/Xcode.app/Contents/Developer/usr/bin/python3", "/Applications/Xcode.app/Contents/Developer", true},
		{"/usr/bin/python3", "relative/dir", "", "", false},
		{"/usr/bin/perl", "", "", "", false},                            // not installed there: no stub
		{"/opt/homebrew/bin/python3", "", "", "", false},                // not a /usr/bin stub
		{"/usr/local/bin/python3", "", "", "", false},                   // not a /usr/bin stub
		{"/usr/bin/python3", "/Library/Developer/Other", "", "", false}, // link to an empty dir
	} {
		tool, dir, ok := developerTool(tc.stub, tc.link, exists)
		if tool != tc.tool || dir != tc.dir || ok != tc.ok {
			t.Errorf("developerTool(%q, %q) = %q, %q, %v; want %q, %q, %v", tc.stub, tc.link, tool, dir, ok, tc.tool, tc.dir, tc.ok)
		}
	}
}

// The Command Line Tools ship Python3.framework, whose app binary is Python3, not Python.
func TestFrameworkApps(t *testing.T) {
	root := t.TempDir()
	for _, fw := range []struct{ framework, app string }{{"Python.framework", "Python"}, {"Python3.framework", "Python3"}} {
		version := filepath.Join(root, fw.framework, "Versions", "3.9")
		macos := filepath.Join(version, "Resources", "Python.app", "Contents", "MacOS")
		if err := os.MkdirAll(macos, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(version, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(macos, fw.app), nil, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(fw.app, filepath.Join(macos, "link")); err != nil {
			t.Fatal(err)
		}
		got := frameworkApps(filepath.Join(version, "bin", "python3.9"))
		if want := []string{filepath.Join(macos, fw.app)}; !slices.Equal(got, want) {
			t.Errorf("%s: frameworkApps = %q, want %q", fw.framework, got, want)
		}
	}
	if got := frameworkApps("/usr/bin/python3"); len(got) != 0 {
		t.Errorf("a non-framework interpreter has no app: %q", got)
	}
}
