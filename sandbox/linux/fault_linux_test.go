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
// Not parallel: the fault switch is the package's while it is on.
func TestFaultWorkspaceMount(t *testing.T) {
	s := testSandbox(t)
	faultWorkspaceMount.Store(true)
	spec := pySpec("print('ran')", newMarker())
	res, err := s.Run(context.Background(), spec)
	faultWorkspaceMount.Store(false)

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
	res, err = s.Run(context.Background(), pySpec("print('ran')", newMarker()))
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("the next run: %v %s %s", err, res.Status, res.Detail)
	}
}
