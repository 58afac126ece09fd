package linux

import (
	"errors"
	"github.com/airlock-mcp/airlock/internal/sandboxtest"
	"strings"
	"testing"

	"github.com/airlock-mcp/airlock/sandbox"
)

// A backend prepared for some network modes compiles only their filters (and "none",
// for its self-check) and refuses a spec with another mode: no sandbox ever starts
// without its filter.
func TestOnlyPreparedNetworksRun(t *testing.T) {
	testSandbox(t) // skips loudly where no sandbox can be built at all
	s, err := New(sandbox.Options{Networks: []sandbox.Network{sandbox.NetworkHost}})
	sandboxtest.Require(t, err)
	defer s.Close()
	if len(s.filters) != 2 || s.filters[sandbox.NetworkHost] == nil || s.filters[sandbox.NetworkNone] == nil {
		t.Fatalf("filters %v, want host and none", s.filters)
	}
	spec := withDefaults(pySpec("print('ran')", newMarker()))
	spec.Network = sandbox.NetworkHost
	if res, err := s.Run(t.Context(), spec); err != nil || strings.TrimSpace(string(res.Stdout.Bytes())) != "ran" {
		t.Fatalf("a prepared mode: %v %s", err, brief(res))
	}
	spec.Network = sandbox.NetworkAllowlist
	spec.Egress = &sandbox.Egress{}
	res, err := s.Run(t.Context(), spec)
	if !errors.Is(err, sandbox.ErrInvalidSpec) || res.Status != sandbox.StatusSandboxError {
		t.Fatalf("an unprepared mode: err %v, status %s; want an invalid spec refused", err, res.Status)
	}
}
