package linux

import (
	"context"

	"github.com/airlock-mcp/airlock/sandbox"
)

// WithoutSeccomp returns a backend that builds every sandbox like s but loads no seccomp
// filter (the init still sets no_new_privs). It exists only so the probe catalogue's
// tests can prove that its kernel-surface probes fail when the filter is missing;
// airlock never calls it.
func (s *Sandbox) WithoutSeccomp() sandbox.Sandbox { return noSeccomp{s} }

type noSeccomp struct{ s *Sandbox }

func (n noSeccomp) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	return n.s.runSpec(ctx, spec, func(cfg *initConfig) { cfg.Filter, cfg.FilterRules = nil, 0 })
}

func (n noSeccomp) Probe(ctx context.Context) (sandbox.Report, error) { return n.s.Probe(ctx) }
