// Package runnertest provides fakes for testing code built on the runner without a real
// sandbox or interpreter.
package runnertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/sandbox"
)

// Sandbox is a fake backend: Fn decides each run's result.
type Sandbox struct {
	Fn     func(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error)
	Report sandbox.Report
	Runs   atomic.Int64
}

// Run calls Fn.
func (s *Sandbox) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	s.Runs.Add(1)
	return s.Fn(ctx, spec)
}

// Probe returns Report.
func (s *Sandbox) Probe(context.Context) (sandbox.Report, error) { return s.Report, nil }

// Echo is a Fn that "runs" the code by echoing it and stdin back, like `cat main.py -`.
func Echo(_ context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	out := append(append([]byte{}, spec.Code...), spec.Stdin...)
	return sandbox.Result{ID: spec.ID, Status: sandbox.StatusOK, Stdout: sandbox.Stream{Head: out, Total: int64(len(out))},
		Wall: 12 * time.Millisecond, CPU: 5 * time.Millisecond, PeakMemory: 1 << 20}, nil
}

// Block is a Fn that runs until ctx ends and reports cancellation, like a killed sandbox.
func Block(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	<-ctx.Done()
	return sandbox.Result{ID: spec.ID, Status: sandbox.StatusCancelled, ExitCode: -1, Signal: "SIGKILL",
		Detail: "cancelled by the caller"}, nil
}

// Report is a healthy fake isolation report.
func Report() sandbox.Report {
	return sandbox.Report{Platform: "linux", Backend: "fake", Layers: []sandbox.Layer{
		{Name: "user-namespace", Active: true, Required: true},
		{Name: "seccomp", Active: true, Required: true},
		{Name: "cgroup-memory", Active: true},
	}}
}

// Languages is a fake registry.
type Languages struct{ Langs []policy.Language }

// Python returns a registry with python enabled and installed.
func Python() *Languages {
	return &Languages{Langs: []policy.Language{{Name: "python", Interpreter: "/usr/bin/python3", Version: "3.11.2",
		Enabled: true, Installed: true, File: "main.py", Argv: []string{"/usr/bin/python3", "main.py"}},
		{Name: "node", Enabled: false}}}
}

// Lookup mirrors policy.Registry.Lookup.
func (l *Languages) Lookup(name string) (policy.Language, error) {
	for _, lang := range l.Langs {
		if lang.Name != name {
			continue
		}
		switch {
		case !lang.Enabled:
			return policy.Language{}, fmt.Errorf("%w: %q (enabled: %s)", policy.ErrLanguageNotEnabled, name, strings.Join(l.Enabled(), ", "))
		case !lang.Installed:
			return policy.Language{}, fmt.Errorf("%w: %q", policy.ErrLanguageNotInstalled, name)
		}
		return lang, nil
	}
	if len(name) > 64 { // as the registry's answer quotes it
		name = name[:64]
	}
	return policy.Language{}, fmt.Errorf("%w: %q (enabled: %s)", policy.ErrLanguageNotEnabled, name, strings.Join(l.Enabled(), ", "))
}

// Enabled mirrors policy.Registry.Enabled.
func (l *Languages) Enabled() []string {
	var out []string
	for _, lang := range l.Langs {
		if lang.Enabled && lang.Installed {
			out = append(out, lang.Name)
		}
	}
	slices.Sort(out)
	return out
}

// Languages mirrors policy.Registry.Languages.
func (l *Languages) Languages() []policy.Language { return l.Langs }

// Bounds are small, valid limits for tests.
func Bounds() policy.Bounds {
	d := sandbox.Limits{Wall: 30 * time.Second, CPU: 30 * time.Second, Memory: 256 << 20, Pids: 64,
		FileSize: 16 << 20, OpenFiles: 256, Workspace: 64 << 20, Output: 64 << 10}
	m := d
	m.Wall, m.CPU, m.Memory, m.Output = 5*time.Minute, 5*time.Minute, 1<<30, 1<<20
	return policy.Bounds{Default: d, Max: m}
}
