package cli

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/airlock-mcp/airlock/config"
	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/probe"
	"github.com/airlock-mcp/airlock/runner"
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/tools"
)

// startupCheck runs the fast subset of the escape probes against the real sandbox before
// serving. An escape that succeeds is never tolerated; a probe that cannot run is
// tolerated only in degraded mode.
func startupCheck(ctx context.Context, deps tools.Deps, cfg config.Config, log *slog.Logger) error {
	suite, ok := deps.Prober.(*probe.Suite)
	if !ok {
		return nil
	}
	start := time.Now()
	rep, err := suite.Quick(ctx)
	if err != nil {
		return fmt.Errorf("startup probes: %w", err)
	}
	var failed, errored []string
	for _, r := range rep.Probes {
		switch r.Status {
		case probe.Failed:
			failed = append(failed, r.Name+" ("+r.Detail+")")
		case probe.Errored:
			errored = append(errored, r.Name+" ("+r.Detail+")")
		}
	}
	log.Info("startup probes", "verdict", rep.Verdict, "passed", rep.Totals.Passed,
		"failed", rep.Totals.Failed, "errors", rep.Totals.Errored, "duration", time.Since(start).Round(time.Millisecond))
	if len(failed) > 0 {
		return fmt.Errorf("%w: escape probes succeeded at startup: %s; run `airlock probe` for the fixes",
			sandbox.ErrUnavailable, strings.Join(failed, "; "))
	}
	if len(errored) > 0 {
		if !cfg.Sandbox.AllowDegraded {
			return fmt.Errorf("%w: startup probes could not run: %s (set sandbox.allow_degraded = true to serve anyway)",
				sandbox.ErrUnavailable, strings.Join(errored, "; "))
		}
		deps.Runner.Degraded = true
		log.Warn("serving in degraded mode: startup probes could not run", "probes", strings.Join(errored, "; "))
	}
	checkEnvironments(ctx, deps.Runner, log)
	return nil
}

// checkEnvironments runs each inspected environment once in a sandbox, importing its
// preload list; only the ones that pass are offered. A broken one is logged and shown by
// probe and get_config, and the others still serve.
func checkEnvironments(ctx context.Context, r *runner.Runner, log *slog.Logger) {
	for _, e := range r.Environments.All() {
		problem := e.Problem
		if problem == "" {
			problem = environmentCheck(ctx, r, e)
		}
		r.Environments.SetUsable(e.Name, problem)
		if problem != "" {
			log.Warn("environment not offered", "environment", e.Name, "problem", problem)
		} else {
			log.Info("environment ready", "environment", e.Name, "language", e.Language, "version", e.Version, "packages", len(e.Packages))
		}
	}
}

// environmentCheck is the startup check of one environment: "" when its preload list
// imports in a sandbox, else why not.
func environmentCheck(ctx context.Context, r *runner.Runner, e policy.Environment) string {
	r.Environments.SetUsable(e.Name, "") // Lookup offers only usable ones; reset on failure
	code := policy.CheckProgram(e)
	out, err := r.Run(ctx, runner.Call{Environment: e.Name, Code: code, Timeout: environmentCheckTimeout})
	switch {
	case err != nil:
		return "startup check: " + err.Error()
	case out.Result.Status != sandbox.StatusOK:
		tail := strings.TrimSpace(string(out.Result.Stderr.Bytes()))
		if i := strings.LastIndexByte(tail, '\n'); i >= 0 {
			tail = tail[i+1:]
		}
		return fmt.Sprintf("startup check (%s) ended %s: %s %s", strings.TrimSpace(string(code)), out.Result.Status, out.Result.Detail, tail)
	}
	return ""
}

// environmentCheckTimeout bounds one environment's startup check: importing pandas and
// matplotlib.pyplot with a cold font cache takes about 2 s on this class of host.
const environmentCheckTimeout = 30 * time.Second

// warm starts the backend's warm pool when configured and supported, and returns what
// drains it, and waits for every finished sandbox's cleanup, at shutdown.
func warm(deps tools.Deps, cfg config.Config, log *slog.Logger) func() {
	w, ok := deps.Runner.Sandbox.(sandbox.Warmer)
	if !ok {
		if cfg.Pool.Size > 0 {
			log.Info("warm pool not supported by this sandbox backend; every call builds its sandbox")
		}
		return nil
	}
	if cfg.Pool.Size <= 0 {
		return func() { w.Close() }
	}
	templates := deps.Runner.Templates()
	w.Warm(templates, cfg.Pool.Size)
	log.Info("warm pool started", "size", cfg.Pool.Size, "templates", len(templates))
	return func() {
		st := w.PoolStats()
		w.Close()
		log.Info("warm pool drained", "hits", st.Hits, "misses", st.Misses)
	}
}

// closeSandbox waits for the backend's background cleanup (a finished sandbox's cgroup is
// removed after its result is returned), so a one-shot command leaves nothing behind.
func closeSandbox(deps tools.Deps) {
	if w, ok := deps.Runner.Sandbox.(sandbox.Warmer); ok {
		w.Close()
	}
}
