// Package sandboxtest is the tests' one rule for a sandbox this host cannot give: skip
// loudly, unless AIRLOCK_REQUIRE_SANDBOX=1 (CI sets it) makes that a failure. A skip is
// never reported as a pass, and CI never skips.
package sandboxtest

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/airlock-mcp/airlock/sandbox"
)

// RequireEnv is the variable that turns every such skip into a failure.
const RequireEnv = "AIRLOCK_REQUIRE_SANDBOX"

// Required reports whether every real-sandbox test must run.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// SkipOrFail skips t loudly, saying why, or fails it when a sandbox is required.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("%s=1: %s", RequireEnv, why)
		return
	}
	t.Skipf("SKIPPING: %s (set %s=1 to make this a failure)", why, RequireEnv)
}

// Require returns on a nil err. A sandbox.ErrUnavailable (the kernel truly lacks
// isolation) skips or fails as SkipOrFail does; any other error fails.
func Require(t testing.TB, err error) {
	t.Helper()
	switch {
	case err == nil:
	case errors.Is(err, sandbox.ErrUnavailable):
		SkipOrFail(t, "THIS KERNEL CANNOT BUILD THE SANDBOX, SO NOTHING HERE IS TESTED: %v", err)
	default:
		t.Fatalf("sandbox unavailable: %v", err)
	}
}
