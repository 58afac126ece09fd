package probe

import (
	"context"
	"strings"
	"testing"

	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/runner"
	"github.com/airlock-mcp/airlock/runner/runnertest"
	"github.com/airlock-mcp/airlock/sandbox"
)

// TestNoInterpreterIsNotAPass: without a python interpreter the program probes cannot
// run, and they say so as errors instead of passing, so the verdict is not "isolated".
func TestNoInterpreterIsNotAPass(t *testing.T) {
	fake := &runnertest.Sandbox{Fn: runnertest.Echo, Report: runnertest.Report()}
	langs := &runnertest.Languages{Langs: []policy.Language{{Name: "python", Enabled: true, Installed: false}}}
	r := &runner.Runner{Sandbox: fake, Languages: langs, Bounds: runnertest.Bounds(), MaxCodeBytes: 1 << 20,
		Limiter: runner.NewLimiter(2, 8, 0)}
	rep, err := NewSuite(r).Run(context.Background(), Filter{Probes: []string{"read-shadow", "env-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Probes {
		if p.Status != Errored || p.Fix == "" {
			t.Errorf("%s: %s (fix %q), want error with a fix", p.Name, p.Status, p.Fix)
		}
	}
	if rep.Verdict == Isolated || fake.Runs.Load() != 0 {
		t.Errorf("verdict %s after %d runs, want not isolated and no runs", rep.Verdict, fake.Runs.Load())
	}
}

// TestUnreportedRunIsAnError: a program that ends without its report line (here the
// fake echoes the code back) is an error, never a pass.
func TestUnreportedRunIsAnError(t *testing.T) {
	fake := &runnertest.Sandbox{Fn: func(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
		return sandbox.Result{Status: sandbox.StatusOK}, nil
	}, Report: runnertest.Report()}
	r := &runner.Runner{Sandbox: fake, Languages: runnertest.Python(), Bounds: runnertest.Bounds(), MaxCodeBytes: 16,
		Limiter: runner.NewLimiter(2, 8, 0)}
	rep, err := NewSuite(r).Run(context.Background(), Filter{Categories: []string{"identity"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Probes {
		if p.Status == Passed {
			t.Errorf("%s passed without a report: %s", p.Name, p.Detail)
		}
	}
}

// The syscall-number probes run on the architectures kernel.py has a table for, and are
// not applicable elsewhere rather than calling the wrong syscalls.
func TestSyscallProbesPerArch(t *testing.T) {
	p := probeDef{only: []string{"linux"}, sysnr: true}
	for arch, runs := range map[string]bool{"amd64": true, "arm64": true, "riscv64": false, "386": false} {
		if got := p.skip(hostEnv{goos: "linux", goarch: arch}) == ""; got != runs {
			t.Errorf("%s: runs = %v, want %v", arch, got, runs)
		}
	}
	body, err := programs.ReadFile("programs/kernel.py")
	if err != nil {
		t.Fatal(err)
	}
	for _, machine := range []string{`"x86_64": {`, `"aarch64": {`} {
		if !strings.Contains(string(body), machine) {
			t.Errorf("kernel.py has no %s table", machine)
		}
	}
}
