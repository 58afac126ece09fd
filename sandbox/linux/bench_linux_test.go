package linux

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/sandbox"
)

// The hot pieces of a run, stage by stage. Compare them with BenchmarkBareExec, run in
// the same invocation: absolute times on a shared 2-core machine mean little.

func BenchmarkBareExecTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/usr/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompileFilter is the libseccomp compile the server does once per network mode.
func BenchmarkCompileFilter(b *testing.B) {
	for b.Loop() {
		if _, err := compileFilter(filterPlan{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRootPlan(b *testing.B) {
	cfg := &initConfig{Limits: withDefaults(sandbox.Spec{}).Limits}
	for b.Loop() {
		rootPlan(cfg, realFS{})
	}
}

// BenchmarkSetupOnly builds a whole sandbox (namespaces, cgroup, root, seccomp) and
// tears it down without running a program.
func BenchmarkSetupOnly(b *testing.B) {
	s := benchSandbox(b)
	for b.Loop() {
		if _, err := s.selfTest(context.Background(), nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkColdRunTrue is a whole cold run of /usr/bin/true.
func BenchmarkColdRunTrue(b *testing.B) {
	s := benchSandbox(b)
	for b.Loop() {
		res, err := s.Run(context.Background(), withDefaults(sandbox.Spec{Argv: []string{"/usr/bin/true"}}))
		if err != nil || res.Status != sandbox.StatusOK {
			b.Fatal(err, res.Status, res.Detail)
		}
	}
}

// BenchmarkPooledRunTrue is the handover path: a prepared sandbox per iteration, whose
// preparation is excluded from the timing.
func BenchmarkPooledRunTrue(b *testing.B) {
	benchPooled(b, withDefaults(sandbox.Spec{Language: "bench", Argv: []string{"/usr/bin/true"}}))
}

// BenchmarkLanguages is print(1) in python and echo 1 in bash, as run_code runs them
// (the language's argv, flags and environment): bare (exec from here, an empty
// environment, as make bench runs them), cold, and pooled (the interpreter preloaded).
func BenchmarkLanguages(b *testing.B) {
	reg, err := policy.Detect([]string{"python", "bash"})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ lang, code, bare string }{{"python", "print(1)", "/usr/bin/python3"}, {"bash", "echo 1", "/usr/bin/bash"}} {
		l, err := reg.Lookup(c.lang)
		if err != nil {
			b.Skipf("SKIPPING: %v", err)
		}
		spec := withDefaults(l.Spec([]byte(c.code), nil, policy.DefaultBounds().Default, policy.BoundByCgroup))
		b.Run(c.lang+"/bare", func(b *testing.B) {
			for b.Loop() {
				cmd := exec.Command(c.bare, "-c", c.code)
				cmd.Env = []string{}
				if err := cmd.Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.lang+"/cold", func(b *testing.B) {
			s := benchSandbox(b)
			b.Cleanup(func() { s.Close() })
			for b.Loop() {
				if res, err := s.Run(context.Background(), spec); err != nil || res.Status != sandbox.StatusOK {
					b.Fatal(err, res.Status, res.Detail)
				}
			}
		})
		b.Run(c.lang+"/pooled", func(b *testing.B) { benchPooled(b, spec) })
	}
}

// benchPooled runs spec from a pool of one, its preparation (and a moment for the
// refill to settle) excluded from the timing.
func benchPooled(b *testing.B, spec sandbox.Spec) {
	s := benchSandbox(b)
	s.Warm([]sandbox.Spec{spec}, 1)
	b.Cleanup(func() { s.Close() })
	for b.Loop() {
		b.StopTimer()
		deadline := time.Now().Add(10 * time.Second)
		for s.PoolStats().Ready < 1 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(5 * time.Millisecond)
		b.StartTimer()
		if res, err := s.Run(context.Background(), spec); err != nil || res.Status != sandbox.StatusOK {
			b.Fatal(err, res.Status, res.Detail)
		}
	}
	b.ReportMetric(float64(s.PoolStats().Hits)/float64(b.N), "pool-hits/op")
}

func benchSandbox(b *testing.B) *Sandbox {
	b.Helper()
	s, err := New(sandbox.Options{})
	if err != nil {
		b.Skipf("SKIPPING: no sandbox on this host: %v", err)
	}
	return s
}
