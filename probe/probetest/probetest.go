// Package probetest provides a prober for tests of code that serves the probe report
// without running escape probes in a real sandbox.
package probetest

import (
	"context"

	"github.com/airlock-mcp/airlock/probe"
	"github.com/airlock-mcp/airlock/sandbox"
)

// Layers reports the layers the backend says are active and runs no escape attempts.
// Probes, when set, are the results every run reports.
type Layers struct {
	Sandbox sandbox.Sandbox
	Probes  []probe.Result
}

// Run ignores the filter.
func (p Layers) Run(ctx context.Context, _ probe.Filter) (probe.Report, error) {
	sr, err := p.Sandbox.Probe(ctx)
	if err != nil {
		return probe.Report{}, err
	}
	return probe.NewReport(sr, p.Probes), nil
}

// Quick is Run: there is no subset to pick.
func (p Layers) Quick(ctx context.Context) (probe.Report, error) { return p.Run(ctx, probe.Filter{}) }
