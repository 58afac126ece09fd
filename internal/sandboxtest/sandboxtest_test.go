package sandboxtest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/airlock-mcp/airlock/sandbox"
)

// recorder is a testing.TB that records how the helper ended the test.
type recorder struct {
	testing.TB
	skipped, failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Skipf(string, ...any)  { r.skipped = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true }

// A missing sandbox skips only when CI does not require it; any other error fails.
func TestRequire(t *testing.T) {
	unavailable := fmt.Errorf("%w: no user namespaces", sandbox.ErrUnavailable)
	for _, tc := range []struct {
		name            string
		required        string
		err             error
		skipped, failed bool
	}{
		{"nil", "1", nil, false, false},
		{"unavailable", "", unavailable, true, false},
		{"unavailable, required", "1", unavailable, false, true},
		{"another error", "", errors.New("boom"), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(RequireEnv, tc.required)
			r := &recorder{TB: t}
			Require(r, tc.err)
			if r.skipped != tc.skipped || r.failed != tc.failed {
				t.Errorf("skipped %v failed %v, want %v %v", r.skipped, r.failed, tc.skipped, tc.failed)
			}
		})
	}
}
