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
// one of them needs no read root of its own. /usr is listed by its system directories,
// so an interpreter under /usr/local (Intel Homebrew) gets its own read root.
var systemRoots = []string{"/usr/bin", "/usr/lib", "/usr/libexec", "/usr/sbin", "/usr/share", "/bin", "/System/Library", "/Library/Frameworks"}

// defaultDeveloperDir is where the stubs look when xcode-select was never run.
const defaultDeveloperDir = "/Library/Developer/CommandLineTools"

// developerTool returns the tool a /usr/bin developer stub runs, and the developer
// directory it lives in (the read root the tool needs), or ok=false when stub is not one
// of those stubs or the tool is not installed. link is the target of xcode-select's link
// (xcodeSelectLink; "" when it is missing); exists tells whether a path is a regular file.
func developerTool(stub, link string, exists func(string) bool) (tool, devDir string, ok bool) {
	if filepath.Dir(stub) != "/usr/bin" {
		return "", "", false
	}
	devDir = defaultDeveloperDir
	if link != "" {
		devDir = filepath.Clean(link)
	}
	if !filepath.IsAbs(devDir) {
		return "", "", false
	}
	tool = filepath.Join(devDir, "usr", "bin", filepath.Base(stub))
	if !exists(tool) {
		return "", "", false
	}
	return tool, devDir, true
}

// shellStartup are variables that make a shell run code before its script: the memory
// shim is a shell outside the sandbox, started with the program's environment.
var shellStartup = []string{"BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "ZDOTDIR", "PS4"}

// baseEnv is the whole environment of the sandboxed program: a fixed base plus the
// language's own variables. The server's environment is never consulted. Spec.Env cannot
// override the base, set DYLD_* (library injection into the interpreter) or a shell's
// start-up variables (shellStartup, exported BASH_FUNC_ functions).
func baseEnv(workspace, tmp string, extra []string) ([]string, error) {
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + workspace, "TMPDIR=" + tmp, "LANG=C.UTF-8"}
	fixed := []string{"PATH", "HOME", "TMPDIR", "LANG"}
	for _, kv := range extra {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsRune(kv, 0) {
			return nil, fmt.Errorf("%w: malformed env entry %q", sandbox.ErrInvalidSpec, k)
		}
		if slices.Contains(fixed, k) || slices.Contains(shellStartup, k) || strings.HasPrefix(k, "DYLD_") || strings.HasPrefix(k, "BASH_FUNC_") {
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
	for _, r := range systemRoots {
		if within(dir, r) {
			return ""
		}
	}
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

// frameworkApps are the binaries a framework build of Python (python.org, Homebrew,
// Command Line Tools) re-execs itself into: bin/python3 is a stub that starts
// Resources/Python.app. They must be on the exec list or every such python dies at
// start-up. The executable's name is the framework's (Python in Python.framework,
// Python3 in the Command Line Tools' Python3.framework), so every regular file in
// Contents/MacOS counts.
func frameworkApps(realInterpreter string) []string {
	dir := filepath.Join(filepath.Dir(filepath.Dir(realInterpreter)), "Resources", "Python.app", "Contents", "MacOS")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var apps []string
	for _, e := range ents {
		if e.Type().IsRegular() {
			apps = append(apps, filepath.Join(dir, e.Name()))
		}
	}
	return apps
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
	stderr sandbox.Stream
	// memory: RLIMIT_AS and RLIMIT_DATA bounded the run's memory.
	memory bool
	limits sandbox.Limits // the run's, for the detail (cpuLimit is its CPU)
}

// classify maps an outcome to a Status, an exit code and a one-line detail, by
// sandbox.Classify. Our own reasons for killing outrank the signal that did the killing,
// and the caller's cancel outranks them.
func classify(o outcome) (sandbox.Status, int, string) {
	code := o.code
	if !o.exited {
		code = -1
	}
	so := sandbox.Outcome{Ended: true, Exited: o.exited, Code: o.code, Signal: o.signal,
		CPU: o.cpuUsed, Stderr: o.stderr, RlimitMemory: o.memory}
	if o.setupErr != "" {
		so.Setup = "sandbox setup failed: " + o.setupErr
	}
	if o.denied != "" {
		so.Refused = "sandbox-exec refused: " + o.denied
	}
	switch {
	case o.cancelled:
		so.Stopped, so.StopDetail = sandbox.StatusCancelled, "cancelled by the caller"
	case o.outputLimit:
		so.Stopped, so.StopDetail = sandbox.StatusOutputLimit, "killed: output passed the ceiling"
	case o.wallLimit:
		so.Stopped, so.StopDetail = sandbox.StatusTimeout, "killed at the wall-clock limit"
	}
	lim := o.limits
	lim.CPU = o.cpuLimit
	status, detail := sandbox.Classify(so, lim)
	return status, code, detail
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

// stageMemory is the setup stage the memory shim reports a refusal under.
const stageMemory = "rlimit memory"

// shimShell runs memoryShim: a small process between this child and sandbox-exec.
const shimShell = "/bin/sh"

// memoryShim sets RLIMIT_DATA and RLIMIT_AS (ulimit -d, -v; KiB, soft and hard) and
// execs its arguments. XNU refuses a new RLIMIT_AS or RLIMIT_DATA below the size of the
// caller's current address map (EINVAL), and this Go child's map, runtime arenas and
// all, is larger than many limits: so the limits are set in a shell, whose map is small,
// right before sandbox-exec. The script is constant; the value and the command arrive as
// positional arguments, never as script text. Descriptor 4 is the child's error pipe
// (fdErrors).
const memoryShim = `ulimit -d "$1" 2>/dev/null && ulimit -v "$1" 2>/dev/null || { printf '{"stage":"` + stageMemory + `","err":"the kernel refused %s KiB"}\n' "$1" >&4; exit 125; }
shift
exec "$@" 4>&-`
