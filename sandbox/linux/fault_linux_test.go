package linux

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock-mcp/airlock/sandbox"
)

// A workspace tmpfs that cannot be mounted is a setup failure with its stage and errno,
// reported as a sandbox_error in which nothing ran; the next sandbox is unaffected.
func TestFaultWorkspaceMount(t *testing.T) {
	t.Parallel()
	s := testSandbox(t)
	spec := pySpec("print('ran')", newMarker())
	res, err := s.runSpec(context.Background(), withDefaults(spec), func(cfg *initConfig) { cfg.faultWorkspaceMount = true })

	var se *SetupError
	if !errors.As(err, &se) || se.Stage != "mount /workspace" || !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("err = %v, want a setup error at mount /workspace with EINVAL", err)
	}
	if res.Status != sandbox.StatusSandboxError || strings.Contains(string(res.Stdout.Bytes()), "ran") {
		t.Fatalf("result %s %q, want sandbox_error with nothing run", res.Status, res.Stdout.Bytes())
	}
	if !strings.Contains(res.Detail, "mount /workspace") {
		t.Errorf("detail %q does not name the stage", res.Detail)
	}
	res, err = s.Run(context.Background(), withDefaults(pySpec("print('ran')", newMarker())))
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("the next run: %v %s %s", err, res.Status, res.Detail)
	}
}

// A program that cannot be executed is a setup failure naming the program and its errno,
// and nothing of it ran.
func TestExecFailureIsReported(t *testing.T) {
	t.Parallel()
	s := testSandbox(t)
	for argv0, want := range map[string]syscall.Errno{"/nonexistent": syscall.ENOENT, "/etc/passwd": syscall.EACCES} {
		res, err := s.Run(context.Background(), withDefaults(sandbox.Spec{Argv: []string{argv0}}))
		var se *SetupError
		if !errors.As(err, &se) || se.Stage != "exec "+argv0 || !errors.Is(err, want) {
			t.Errorf("%s: err = %v, want a setup error at exec %s with %v", argv0, err, argv0, want)
		}
		if res.Status != sandbox.StatusSandboxError {
			t.Errorf("%s: status %s, want sandbox_error", argv0, res.Status)
		}
	}
}

// A /proc mask whose source cannot be bound fails the setup: the init mounts a mask
// without an lstat of its path first, and the kernel's ENOENT for a missing source must
// not pass for the path's own absence, which would leave /proc/cmdline and the other
// masked files readable.
func TestFaultMaskSourceMissing(t *testing.T) {
	t.Parallel()
	s := testSandbox(t)
	if s.adapt.noProc {
		t.Skip("SKIPPING: THIS HOST GIVES SANDBOXES AN EMPTY /proc (container adaptation), NOTHING TO MASK: TestNoProcSubstitute checks it")
	}
	marker := newMarker()
	spec := pySpec("print(open('/proc/cmdline').read() or '"+marker+"')", marker)
	res, err := s.runSpec(context.Background(), withDefaults(spec), func(cfg *initConfig) { cfg.faultMaskSource = true })
	var se *SetupError
	if !errors.As(err, &se) || se.Stage != "mount /proc/"+procMasks[0] || !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("err = %v (result %s %q), want a setup error at mount /proc/%s with ENOENT", err, res.Status, res.Stdout.Bytes(), procMasks[0])
	}
	if res.Status != sandbox.StatusSandboxError || len(res.Stdout.Bytes()) != 0 {
		t.Fatalf("result %s %q, want sandbox_error with nothing run", res.Status, res.Stdout.Bytes())
	}
}
