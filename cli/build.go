package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/airlock-mcp/airlock/config"
	"github.com/airlock-mcp/airlock/internal/stamp"
	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/probe"
	"github.com/airlock-mcp/airlock/runner"
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/session"
	"github.com/airlock-mcp/airlock/tools"
)

// build assembles the tools' dependencies. With strict set it fails closed: a sandbox
// that cannot start or a required layer that is missing refuses, so code never runs with
// less isolation than the backend requires. Which layers are required is the backend's
// call (sandbox.Options.AllowDegraded relaxes the optional ones there); the runner only
// marks results degraded. Without strict (probe, config) build reports instead. With
// one (a one-shot run: `airlock run`), checks that passed recently for the same inputs
// are reused from its stamps (cli/stamps.go).
func build(ctx context.Context, cfg config.Config, strict bool, newSandbox func(sandbox.Options) (sandbox.Sandbox, error), one *oneShot) (tools.Deps, error) {
	var stamps *stamp.Store
	enabledOnly := false
	if one != nil {
		stamps, enabledOnly = one.stamps, one.enabledOnly
	}
	reg, err := policy.DetectWith(policy.Config{Enabled: cfg.Languages.Enabled, Interpreters: cfg.Languages.Interpreters,
		Probe: stampedProbe(stamps), EnabledOnly: enabledOnly})
	if err != nil {
		return tools.Deps{}, fmt.Errorf("languages: %w", err)
	}
	// The backend's self-test runs each enabled language once, as a call would (macOS).
	opts := cfg.SandboxOptions()
	opts.Stamps = stamps
	opts.OneShot = one != nil
	// Every call runs with the configured network mode: only its filter is compiled.
	opts.Networks = []sandbox.Network{sandbox.Network(cfg.Network)}
	for _, l := range reg.Languages() {
		if l.Enabled && l.Installed {
			opts.SelfTest = append(opts.SelfTest, l.Spec(nil, nil, sandbox.Limits{}, policy.BoundByRlimit))
		}
	}
	sb, sbErr := newSandbox(opts)
	if sbErr != nil {
		sb = broken{sbErr}
	}
	degraded := false
	memBound := policy.BoundByRlimit
	if sbErr == nil {
		rep, err := sb.Probe(ctx)
		switch {
		case err != nil:
			sbErr = fmt.Errorf("%w: probe: %w", sandbox.ErrUnavailable, err)
			sb = broken{sbErr}
		case len(rep.Missing()) > 0:
			sbErr = fmt.Errorf("%w: required isolation layers are missing: %s", sandbox.ErrUnavailable, layerList(rep.Missing()))
		default:
			// An optional layer that is off (cgroups for an unprivileged server: memory
			// then bounded by RLIMIT_AS) does not stop the server, but every result says so.
			var off []sandbox.Layer
			for _, l := range rep.Layers {
				switch {
				case !l.Active:
					off = append(off, l)
				case l.Name == "cgroups":
					memBound = policy.BoundByCgroup
				}
			}
			if len(off) > 0 {
				degraded = true
				slog.Warn("serving in degraded isolation mode", "component", "cli", "inactive", layerList(off))
			}
		}
	}
	if sbErr != nil && strict {
		return tools.Deps{}, sbErr
	}
	if w := weakenings(cfg, one == nil); strict && len(w) > 0 {
		// Each is the operator's choice, so none refuses; each must still be said where
		// the operator looks, not only in get_config.
		slog.Warn("isolation weakened by configuration", "component", "cli", "settings", strings.Join(w, "; "))
	}
	if strict && len(reg.Enabled()) == 0 {
		return tools.Deps{}, fmt.Errorf("languages: none of %s is installed on this host", strings.Join(cfg.Languages.Enabled, ", "))
	}
	r := &runner.Runner{
		Sandbox: sb, Languages: reg, Environments: inspectEnvironments(cfg, reg), Bounds: cfg.PolicyBounds(), Imports: cfg.PolicyImports(),
		Network: sandbox.Network(cfg.Network), Egress: cfg.SandboxEgress(), MaxCodeBytes: int(cfg.MaxCodeBytes), MaxStdinBytes: int(cfg.MaxStdinBytes),
		FileCaps: cfg.FileCaps(), OutDir: cfg.Artifacts.Dir, Artifacts: cfg.ArtifactLimits(),
		Limiter:  runner.NewLimiter(cfg.Concurrency.MaxParallel, cfg.Concurrency.QueueSize, time.Duration(cfg.Concurrency.QueueTimeout)),
		Degraded: degraded, MemoryBound: memBound,
		Log: slog.Default().With("component", "runner"),
	}
	// Only where the backend has sessions: elsewhere run_code's schema says they are off.
	// Not for a one-shot run, whose one call opens none: its manager's reaper would be a
	// goroutine and a ticker for nothing, and its Close one more step at the exit.
	if _, ok := sb.(sandbox.Sessions); ok && strict && cfg.Sessions.Enabled && one == nil {
		r.Sessions = session.New(cfg.SessionLimits(), slog.Default())
	}
	// The audit log is on unless audit.path is "off". A configured path that cannot be
	// opened refuses to start; the default falls back (runner.OpenDefaultAudit).
	if strict && cfg.Audit.Path != "off" {
		var a *runner.Audit
		if cfg.Audit.Path == "" {
			a, err = runner.OpenDefaultAudit(os.Getenv, int64(cfg.Audit.MaxBytes), slog.Default().With("component", "audit"))
		} else if a, err = runner.OpenAudit(cfg.Audit.Path, int64(cfg.Audit.MaxBytes)); err != nil {
			err = fmt.Errorf("%w (audit.path = %q: make it writable, choose another, or set it to \"off\")", err, cfg.Audit.Path)
		}
		if err != nil {
			return tools.Deps{}, err
		}
		r.Audit = a
	}
	return tools.Deps{Runner: r, Prober: probe.NewSuite(r), Config: cfg, Version: version()}, sbErr
}

// weakenings lists the settings in effect that open the sandbox beyond the defaults'
// isolation, or take away its record, in the operator's words. What the backend itself
// reports as an inactive layer (cgroups, host-uids) is logged with the layers. A one-shot
// run (server false) has its result for a record, and is not told of the audit log.
func weakenings(cfg config.Config, server bool) []string {
	var w []string
	switch sandbox.Network(cfg.Network) {
	case sandbox.NetworkHost:
		w = append(w, `network = "host": programs share this host's network (its loopback services, the LAN, cloud metadata)`)
	case sandbox.NetworkAllowlist:
		for _, d := range cfg.SandboxEgress().Domains {
			// "*.com" lists every name of a top-level domain: most of the internet.
			if suffix, ok := strings.CutPrefix(d, "*."); ok && !strings.Contains(suffix, ".") {
				w = append(w, fmt.Sprintf("egress.domains %q admits every name under a top-level domain", d))
			}
		}
		if cfg.Egress.AllowLoopback {
			w = append(w, "egress.allow_loopback: listed names and addresses may reach this host's own services")
		}
		if cfg.Egress.AllowPrivate {
			w = append(w, "egress.allow_private: listed names may resolve to other hosts' private addresses")
		}
	}
	if cfg.Sandbox.AllowDegraded {
		w = append(w, "sandbox.allow_degraded: serves when optional layers are missing or startup probes cannot run")
	}
	if server && cfg.Audit.Path == "off" {
		w = append(w, `audit.path = "off": no record of the runs`)
	}
	return w
}

// oneShot is what build is told of a one-shot run: the backend serves one call and is
// closed after it.
type oneShot struct {
	stamps *stamp.Store // nil: every check runs in full
	// enabledOnly: the call's language is enabled, so no other is resolved
	// (policy.Config.EnabledOnly: 0.5 → 0.2 ms of a run's start).
	enabledOnly bool
}

// inspectEnvironments reads what each configured environment holds; none is usable
// before checkEnvironments has run it in a sandbox.
func inspectEnvironments(cfg config.Config, reg *policy.Registry) *policy.Environments {
	var envs []policy.Environment
	for _, c := range cfg.PolicyEnvironments() {
		canon, _ := policy.Canonical(c.Language)
		lang, _ := reg.Lookup(canon)
		envs = append(envs, policy.InspectEnvironment(c, lang))
	}
	return policy.NewEnvironments(envs...)
}

func layerList(ls []sandbox.Layer) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.Name
		if l.Fix != "" {
			parts[i] += " (fix: " + l.Fix + ")"
		}
	}
	return strings.Join(parts, "; ")
}

// broken stands in for a sandbox that could not start, so that probe and config can
// still report; it never runs anything.
type broken struct{ err error }

func (b broken) Run(context.Context, sandbox.Spec) (sandbox.Result, error) {
	return sandbox.Result{}, b.err
}
func (b broken) Probe(context.Context) (sandbox.Report, error) { return sandbox.Report{}, b.err }
