package cli

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/airlock-mcp/airlock/config"
	"github.com/airlock-mcp/airlock/probe"
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/tools"
)

// startupCheck runs the fast subset of the escape probes against the real sandbox before
// serving. An escape that succeeds is never tolerated; a probe that cannot run is
// tolerated only in degraded mode.
func startupCheck(ctx context.Context, deps tools.Deps, cfg config.Config, log *slog.Logger) error {
	if deps.Prober == nil {
		return fmt.Errorf("%w: no prober to run the startup probes", sandbox.ErrUnavailable)
	}
	start := time.Now()
	rep, err := deps.Prober.Quick(ctx)
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
		fix := "run `airlock probe` for the fixes"
		if sandbox.Network(cfg.Network) == sandbox.NetworkHost {
			// The probes reach the host's loopback because the operator shared it: the
			// cause is the setting, not a broken sandbox.
			fix = `network = "host" shares this host's network, which the startup probes refuse to serve: set network = "allowlist" (with egress.domains) or "none"`
		}
		return fmt.Errorf("%w: escape probes succeeded at startup: %s; %s",
			sandbox.ErrUnavailable, strings.Join(failed, "; "), fix)
	}
	if cfg.Sandbox.Isolation == sandbox.IsolationLandlock {
		// Chosen by the operator, and said on every result: never entered silently.
		deps.Runner.Degraded = true
		log.Warn("serving in the Landlock tier, weaker than the namespace tier (no pid, mount, network or IPC namespace); airlock probe lists what is weaker", "verdict", rep.Verdict)
	}
	if len(errored) > 0 {
		if !cfg.Sandbox.AllowDegraded {
			return fmt.Errorf("%w: startup probes could not run: %s (set sandbox.allow_degraded = true to serve anyway)",
				sandbox.ErrUnavailable, strings.Join(errored, "; "))
		}
		deps.Runner.Degraded = true
		log.Warn("serving in degraded mode: startup probes could not run", "probes", strings.Join(errored, "; "))
	}
	deps.Runner.CheckEnvironments(ctx)
	return nil
}

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
		return func() { endSessions(deps); w.Close() }
	}
	templates := deps.Runner.Templates()
	w.Warm(templates, cfg.Pool.Size)
	log.Info("warm pool started", "size", cfg.Pool.Size, "templates", len(templates))
	return func() {
		endSessions(deps)
		st := w.PoolStats()
		w.Close()
		log.Info("warm pool drained", "hits", st.Hits, "misses", st.Misses)
	}
}

// closeSandbox waits for the backend's background cleanup (a finished sandbox's cgroup is
// removed after its result is returned), so a one-shot command leaves nothing behind.
func closeSandbox(deps tools.Deps) {
	endSessions(deps)
	if w, ok := deps.Runner.Sandbox.(sandbox.Warmer); ok {
		w.Close()
	}
}

// endSessions destroys the open sessions at shutdown, before the backend waits for its
// sandboxes' cleanup: sessions do not outlive the server.
func endSessions(deps tools.Deps) {
	if deps.Runner != nil && deps.Runner.Sessions != nil {
		deps.Runner.Sessions.Close()
	}
}
