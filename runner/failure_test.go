package runner

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/sandbox"
)

// One classification of a call's error decides the audit status, the metric and the
// tool result.
func TestFailureOf(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want Failure
	}{
		{"invalid request", live, fmt.Errorf("%w: code is empty", policy.ErrInvalidRequest), Refused},
		{"code too large", live, fmt.Errorf("%w: 2 MiB", policy.ErrCodeTooLarge), Refused},
		{"language not enabled", live, fmt.Errorf("%w: %q", policy.ErrLanguageNotEnabled, "cobol"), Refused},
		{"language not installed", live, policy.ErrLanguageNotInstalled, Refused},
		{"busy", live, fmt.Errorf("%w: all slots in use", ErrBusy), Busy},
		{"busy while the caller left", gone, ErrBusy, Busy},
		{"the caller cancelled", gone, errors.New("spawn: interrupted"), Cancelled},
		{"a wrapped deadline", live, fmt.Errorf("wait: %w", context.DeadlineExceeded), Cancelled},
		{"the sandbox failed", live, fmt.Errorf("%w: no user namespaces", sandbox.ErrUnavailable), HostFailure},
		{"the host failed", live, errors.New("cgroup: EBUSY"), HostFailure},
	} {
		if got := FailureOf(tc.ctx, tc.err); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
