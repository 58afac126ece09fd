package darwin

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/sandbox"
)

// initRole is argv[0] of the re-exec'd child that sets rlimits and execs sandbox-exec.
const initRole = "airlock-darwin-init"

// exitSetup is the child's exit code when setup failed before exec; the reason travels on
// the error pipe, so the code itself is never taken as the program's.
const exitSetup = 125

// Child file descriptors (ExtraFiles order in the parent).
const (
	fdConfig = 3
	fdErrors = 4
)

func init() { sandbox.RegisterInit(initRole, childMain) }

// childConfig travels from the parent to the child as JSON over fdConfig.
type childConfig struct {
	Argv    []string      `json:"argv"` // argv[0] is SandboxExec
	Env     []string      `json:"env"`
	Dir     string        `json:"dir"`
	Rlimits []childRlimit `json:"rlimits"`
	// Memory is RLIMIT_AS and RLIMIT_DATA in bytes, set by memoryShim; 0 leaves them.
	Memory uint64 `json:"memory"`
}

type childRlimit struct {
	Name     string `json:"name"`
	Resource int    `json:"resource"`
	Cur      uint64 `json:"cur"`
	Max      uint64 `json:"max"`
}

// setupError is what the child writes to fdErrors when it cannot exec.
type setupError struct {
	Stage string `json:"stage"`
	Err   string `json:"err"`
}

// childMain runs in the re-exec'd child. Fixed order: read config → rlimits → chdir →
// exec sandbox-exec. Rlimits come before exec so that they bind sandbox-exec and the
// interpreter, and they are set here rather than in the server so the server keeps its own.
func childMain() {
	errs := os.NewFile(fdErrors, "errors")
	// The error pipe must close on a successful exec: EOF without data tells the parent
	// that sandbox-exec is running.
	syscall.CloseOnExec(fdErrors)
	fail := func(stage string, err error) {
		_ = json.NewEncoder(errs).Encode(setupError{Stage: stage, Err: err.Error()})
		os.Exit(exitSetup)
	}
	cfgFile := os.NewFile(fdConfig, "config")
	var cfg childConfig
	if err := json.NewDecoder(io.LimitReader(cfgFile, 4<<20)).Decode(&cfg); err != nil {
		fail("config", err)
	}
	_ = cfgFile.Close()
	if len(cfg.Argv) == 0 || cfg.Argv[0] != SandboxExec {
		fail("config", fmt.Errorf("argv[0] is not %s", SandboxExec))
	}
	for _, r := range cfg.Rlimits {
		// An unprivileged process cannot raise a hard limit: clamp to the one inherited,
		// which only ever makes the sandbox tighter.
		var cur syscall.Rlimit
		if syscall.Getrlimit(r.Resource, &cur) == nil {
			r.Max = min(r.Max, cur.Max)
			r.Cur = min(r.Cur, r.Max)
		}
		if err := syscall.Setrlimit(r.Resource, &syscall.Rlimit{Cur: r.Cur, Max: r.Max}); err != nil {
			fail("rlimit "+r.Name, err)
		}
	}
	if err := os.Chdir(cfg.Dir); err != nil {
		fail("chdir", err)
	}
	argv := cfg.Argv
	if cfg.Memory > 0 {
		// The shim reports on fdErrors itself and closes it as it execs sandbox-exec.
		if _, err := unix.FcntlInt(fdErrors, unix.F_SETFD, 0); err != nil {
			fail("rlimit memory", err)
		}
		argv = append([]string{shimShell, "-c", memoryShim, "airlock-memory", strconv.FormatUint(cfg.Memory>>10, 10)}, argv...)
	}
	err := syscall.Exec(argv[0], argv, cfg.Env)
	fail("exec", err)
}
