package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/airlock-mcp/airlock/config"
	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/probe"
	"github.com/airlock-mcp/airlock/runner"
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/sandbox/host"
	"github.com/airlock-mcp/airlock/tools"
)

// newSandbox is host.New; tests replace it.
var newSandbox = host.New

// build assembles the tools' dependencies. With strict set it fails closed: a sandbox
// that cannot start or a required layer that is missing refuses, so code never runs with
// less isolation than the backend requires. Which layers are required is the backend's
// call (sandbox.Options.AllowDegraded relaxes the optional ones there); the runner only
// marks results degraded. Without strict (probe, config) build reports instead.
func build(ctx context.Context, cfg config.Config, strict bool) (tools.Deps, error) {
	sb, sbErr := newSandbox(cfg.SandboxOptions())
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
	reg, err := policy.DetectWith(policy.Config{Enabled: cfg.Languages.Enabled, Interpreters: cfg.Languages.Interpreters})
	if err != nil {
		return tools.Deps{}, fmt.Errorf("languages: %w", err)
	}
	if strict && len(reg.Enabled()) == 0 {
		return tools.Deps{}, fmt.Errorf("languages: none of %s is installed on this host", strings.Join(cfg.Languages.Enabled, ", "))
	}
	r := &runner.Runner{
		Sandbox: sb, Languages: reg, Bounds: cfg.PolicyBounds(), Imports: cfg.PolicyImports(),
		Network: sandbox.Network(cfg.Network), Egress: cfg.SandboxEgress(), MaxCodeBytes: int(cfg.MaxCodeBytes), MaxStdinBytes: int(cfg.MaxStdinBytes),
		FileCaps: cfg.FileCaps(), OutDir: cfg.Artifacts.Dir, Artifacts: cfg.ArtifactLimits(),
		Limiter:  runner.NewLimiter(cfg.Concurrency.MaxParallel, cfg.Concurrency.QueueSize, time.Duration(cfg.Concurrency.QueueTimeout)),
		Degraded: degraded, MemoryBound: memBound,
		Log: slog.Default().With("component", "runner"),
	}
	// The audit log is on unless audit.path is "off": the default lives in the user's
	// state dir, and a log that cannot be opened refuses to start.
	if strict && cfg.Audit.Path != "off" {
		path := cfg.Audit.Path
		if path == "" {
			if path, err = runner.DefaultAuditPath(os.Getenv); err != nil {
				return tools.Deps{}, err
			}
		}
		a, err := runner.OpenAudit(path, int64(cfg.Audit.MaxBytes))
		if err != nil {
			return tools.Deps{}, err
		}
		r.Audit = a
	}
	return tools.Deps{Runner: r, Prober: probe.NewSuite(r), Config: cfg, Version: version()}, sbErr
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
