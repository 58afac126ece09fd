package darwin

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

// SandboxExec is run by absolute path only: a sandbox-exec found on PATH could be anything.
const SandboxExec = "/usr/bin/sandbox-exec"

// systemRoots are readable by the static profile already; an interpreter prefix inside
// one of them needs no read root of its own.
var systemRoots = []string{"/usr", "/bin", "/System/Library", "/Library/Frameworks"}

// baseEnv is the whole environment of the sandboxed program: a fixed base plus the
// language's own variables. The server's environment is never consulted. Spec.Env cannot
// override the base or set DYLD_* (library injection into the interpreter).
func baseEnv(workspace, tmp string, extra []string) ([]string, error) {
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + workspace, "TMPDIR=" + tmp, "LANG=C.UTF-8"}
	fixed := []string{"PATH", "HOME", "TMPDIR", "LANG"}
	for _, kv := range extra {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsRune(kv, 0) {
			return nil, fmt.Errorf("%w: malformed env entry %q", sandbox.ErrInvalidSpec, k)
		}
		if slices.Contains(fixed, k) || strings.HasPrefix(k, "DYLD_") {
			continue
		}
		env = append(env, kv)
	}
	return env, nil
}

// interpreterPrefix is the install prefix of a resolved interpreter binary (the parent of
// its bin directory), or "" when the static profile already covers it.
func interpreterPrefix(real string) string {
	dir := filepath.Dir(real)
	if filepath.Base(dir) == "bin" {
		dir = filepath.Dir(dir)
	}
	if dir == "/" {
		return ""
	}
	for _, r := range systemRoots {
		if within(dir, r) {
			return ""
		}
	}
	return dir
}

// frameworkApp is the binary a framework build of Python (python.org, Homebrew) re-execs
// itself into: bin/python3 is a stub that starts Resources/Python.app. It must be on the
// exec list or every such python dies at start-up.
func frameworkApp(realInterpreter string) (string, bool) {
	app := filepath.Join(filepath.Dir(filepath.Dir(realInterpreter)), "Resources", "Python.app", "Contents", "MacOS", "Python")
	fi, err := os.Lstat(app)
	if err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	return app, true
}

// outcome is everything Run observed about how the program ended.
type outcome struct {
	exited      bool   // exited normally (code is valid)
	code        int    // exit code when exited
	signal      string // signal name when killed by one ("SIGKILL")
	wallLimit   bool   // the wall-clock timer fired
	cpuUsed     time.Duration
	cpuLimit    time.Duration
	outputLimit bool // killed for passing the output ceiling
	cancelled   bool // the caller's context ended first
	setupErr    string
	// denied is set when sandbox-exec itself refused (profile did not compile, exec of
	// the interpreter denied): its own message on stderr, before any user output.
	denied string
}

// classify maps an outcome to a Status, an exit code and a one-line detail. The order
// matters: our own reasons for killing outrank the signal that did the killing.
func classify(o outcome) (sandbox.Status, int, string) {
	code := o.code
	if !o.exited {
		code = -1
	}
	switch {
	case o.setupErr != "":
		return sandbox.StatusSandboxError, code, "sandbox setup failed: " + o.setupErr
	case o.cancelled:
		return sandbox.StatusCancelled, code, "cancelled by the caller"
	case o.outputLimit:
		return sandbox.StatusOutputLimit, code, "killed: output passed the ceiling"
	case o.wallLimit:
		return sandbox.StatusTimeout, code, "killed at the wall-clock limit"
	case o.signal == "SIGXCPU" || (!o.exited && o.cpuLimit > 0 && o.cpuUsed >= o.cpuLimit):
		return sandbox.StatusTimeout, code, "killed at the CPU-time limit (RLIMIT_CPU)"
	case o.denied != "":
		return sandbox.StatusSandboxError, code, "sandbox-exec refused: " + o.denied
	case o.signal == "SIGXFSZ":
		return sandbox.StatusKilled, code, "killed at the file size limit (RLIMIT_FSIZE)"
	case !o.exited:
		return sandbox.StatusKilled, code, "killed by " + o.signal
	case o.code == 0:
		return sandbox.StatusOK, 0, ""
	default:
		return sandbox.StatusError, code, fmt.Sprintf("exited with code %d", code)
	}
}

// sandboxExecFailure recognises sandbox-exec's own complaint (a profile that does not
// compile, an exec it was not allowed to make). User code can print the same prefix, but
// then it only mislabels its own failed run.
func sandboxExecFailure(code int, stderr []byte) string {
	if code == 0 {
		return ""
	}
	line, _, _ := strings.Cut(string(stderr), "\n")
	if !strings.HasPrefix(line, "sandbox-exec:") {
		return ""
	}
	return strings.TrimSpace(strings.TrimPrefix(line, "sandbox-exec:"))
}
