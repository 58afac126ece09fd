// Package linux is airlock's Linux sandbox: user, pid, mount, net, ipc, uts and cgroup
// namespaces, a minimal read-only root, cgroups and rlimits, no_new_privs and seccomp.
package linux

import (
	"context"
	"errors"

	"github.com/airlock-mcp/airlock/sandbox"
)

// Sandbox is the Linux backend.
type Sandbox struct{ opts sandbox.Options }

// New checks the host once and returns the backend.
func New(opts sandbox.Options) (*Sandbox, error) { return &Sandbox{opts: opts}, nil }

// Run is under construction.
func (s *Sandbox) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	return sandbox.Result{}, errors.New("not implemented")
}

// Probe is under construction.
func (s *Sandbox) Probe(ctx context.Context) (sandbox.Report, error) {
	return sandbox.Report{}, errors.New("not implemented")
}
