package cli

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/airlock-mcp/airlock/config"
	"github.com/airlock-mcp/airlock/probe"
	"github.com/airlock-mcp/airlock/runner"
	"github.com/airlock-mcp/airlock/runner/runnertest"
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/tools"
)

// scriptedProber is a prober of another type than *probe.Suite whose startup subset
// reports results; it counts how often that subset ran.
type scriptedProber struct {
	results []probe.Result
	quick   int
}

func (p *scriptedProber) Run(context.Context, probe.Filter) (probe.Report, error) {
	return probe.NewReport(runnertest.Report(), p.results), nil
}

func (p *scriptedProber) Quick(ctx context.Context) (probe.Report, error) {
	p.quick++
	return p.Run(ctx, probe.QuickFilter)
}

func startupDeps(p tools.Prober) tools.Deps {
	return tools.Deps{Runner: &runner.Runner{Sandbox: &runnertest.Sandbox{Fn: runnertest.Echo}}, Prober: p, Config: config.Default()}
}

// The startup check runs the startup probes of whatever prober it is given, and a failed
// probe refuses to serve: no prober type can skip them (it used to run them only for a
// *probe.Suite and serve without them for any other type).
func TestStartupCheckRunsAnyProber(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	ok := &scriptedProber{results: []probe.Result{{Name: "read-shadow", Status: probe.Passed}}}
	if err := startupCheck(context.Background(), startupDeps(ok), config.Default(), log); err != nil || ok.quick != 1 {
		t.Fatalf("passing prober: err %v, startup probes run %d times, want nil and 1", err, ok.quick)
	}
	bad := &scriptedProber{results: []probe.Result{{Name: "read-shadow", Status: probe.Failed, Detail: "read /etc/shadow"}}}
	err := startupCheck(context.Background(), startupDeps(bad), config.Default(), log)
	if bad.quick != 1 || !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "read-shadow") {
		t.Fatalf("failing prober: err %v, startup probes run %d times, want ErrUnavailable naming read-shadow", err, bad.quick)
	}
	if err := startupCheck(context.Background(), startupDeps(nil), config.Default(), log); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("no prober: err %v, want ErrUnavailable", err)
	}
}
