package probe

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

// unsandboxed is the deliberately weakened backend the probes must catch: it runs the
// spec's argv straight on the host, in a temporary directory, with the test process's
// environment and descriptors, no namespaces, no seccomp, no limits and an uncapped
// output buffer. It kills the process group at the wall timeout unless noWall is set,
// and runs as cred when set (to model a non-root server without no_new_privs).
//
// With startEnv set, the programs get that environment instead of the test process's at
// each run: the server's environment as a zygote started once would have passed it on.
type unsandboxed struct {
	noWall   bool
	cred     *syscall.Credential
	startEnv []string
}

func (u unsandboxed) Probe(context.Context) (sandbox.Report, error) {
	return sandbox.Report{Platform: runtime.GOOS, Backend: "unsandboxed-test-double"}, nil
}

func (u unsandboxed) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	res := sandbox.Result{ID: spec.ID, Status: sandbox.StatusSandboxError, ExitCode: -1}
	dir, err := os.MkdirTemp("", "airlock-unsandboxed-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o777); err != nil {
		return res, err
	}
	files := append([]sandbox.File{{Path: spec.CodeFile, Data: spec.Code, Mode: 0o644}}, spec.Files...)
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.Path), f.Data, 0o644); err != nil {
			return res, err
		}
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = dir
	env := os.Environ()
	if u.startEnv != nil {
		env = u.startEnv
	}
	cmd.Env = append(slices.Clone(env), spec.Env...)
	cmd.Stdin = bytes.NewReader(spec.Stdin)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A detached grandchild keeps the pipes open; do not wait for it.
	cmd.WaitDelay = 200 * time.Millisecond
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: u.cred}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return res, err
	}
	var timedOut atomic.Bool
	if !u.noWall {
		t := time.AfterFunc(spec.Limits.Wall, func() {
			timedOut.Store(true)
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		})
		defer t.Stop()
	}
	err = cmd.Wait()
	res.Wall = time.Since(start)
	res.Stdout = sandbox.Stream{Head: stdout.Bytes(), Total: int64(stdout.Len())}
	res.Stderr = sandbox.Stream{Head: stderr.Bytes(), Total: int64(stderr.Len())}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	var exitErr *exec.ExitError
	switch {
	case timedOut.Load():
		res.Status = sandbox.StatusTimeout
	case ws.Signaled():
		res.Status, res.Signal = sandbox.StatusKilled, ws.Signal().String()
	case err == nil:
		res.Status, res.ExitCode = sandbox.StatusOK, 0
	case errors.As(err, &exitErr):
		res.Status, res.ExitCode = sandbox.StatusError, exitErr.ExitCode()
	default:
		// ErrWaitDelay: the program exited, a grandchild still holds its output.
		res.Status, res.ExitCode = sandbox.StatusOK, ws.ExitStatus()
	}
	return res, nil
}
