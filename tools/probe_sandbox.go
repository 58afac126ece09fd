package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/airlock-mcp/airlock/probe"
	"github.com/airlock-mcp/airlock/runner"
	"github.com/airlock-mcp/airlock/sandbox"
)

// Prober runs the sandbox self-check. Quick is the startup subset, and every prober has
// it: `airlock serve` refuses to serve on what it reports, so no prober can leave the
// startup probes out by being of another type.
type Prober interface {
	Run(ctx context.Context, f probe.Filter) (probe.Report, error)
	Quick(ctx context.Context) (probe.Report, error)
}

// ProbeArgs are probe_sandbox's arguments.
type ProbeArgs struct {
	Probes     []string `json:"probes,omitempty" jsonschema:"description=Run only the probes with these names (default: all)."`
	Categories []string `json:"categories,omitempty" jsonschema:"description=Run only the probes in these categories (default: all)."`
}

// ProbeSandbox returns the probe_sandbox tool.
func ProbeSandbox(d Deps) server.ServerTool {
	tool := mcp.NewToolWithRawSchema("probe_sandbox",
		`Check the sandbox's isolation on this host: which layers (namespaces, seccomp, cgroups, ...) are really active, and run escape probes against a live sandbox.
Returns each layer and probe result, totals, a verdict (isolated, degraded or unsafe) and fixes for what is missing.`,
		reflectSchema(&ProbeArgs{}, nil))
	tool.Title = "Probe sandbox isolation"
	tool.RawOutputSchema = reflectSchema(&probe.Report{}, nil)
	tool.Annotations = mcp.ToolAnnotation{Title: tool.Title, ReadOnlyHint: boolPtr(true),
		DestructiveHint: boolPtr(false), IdempotentHint: boolPtr(true), OpenWorldHint: boolPtr(false)}
	return server.ServerTool{Tool: tool, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args ProbeArgs
		if err := bindStrict(req, &args, []string{"probes", "categories"}); err != nil {
			return mcp.NewToolResultError("invalid arguments: " + err.Error()), nil
		}
		// A probe run starts sandboxes as run_code does, a few at a time, and counts as
		// one of the client's calls in flight: else a loop of probe_sandbox calls took
		// every sandbox slot past http.client_max_parallel.
		f := probe.Filter{Probes: args.Probes, Categories: args.Categories, Principal: runner.PrincipalFrom(ctx)}
		f.Transport, f.Client = origin(ctx, req)
		done, err := d.Runner.PerClient.Acquire(f.Principal)
		if err != nil {
			return mcp.NewToolResultError("server busy: " + err.Error() + "; retry when a call of yours has finished"), nil
		}
		defer done()
		rep, err := d.Prober.Run(ctx, f)
		if err != nil {
			return mcp.NewToolResultError("probe failed: " + err.Error()), nil
		}
		return mcp.NewToolResultStructured(rep, RenderReport(rep)), nil
	}}
}

// RenderReport is the plain-text form of a report (also used by `airlock probe`).
func RenderReport(r probe.Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "verdict: %s", r.Verdict)
	// A sandbox that could not start has no backend to name.
	var where []string
	for _, s := range []string{r.Platform, r.Backend} {
		if s != "" {
			where = append(where, s)
		}
	}
	if len(where) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(where, ", "))
	}
	b.WriteString("\n")
	if r.Isolation != "" {
		fmt.Fprintf(&b, "isolation: %s\n", r.Isolation)
	}
	weaker := r.Isolation == sandbox.IsolationLandlock
	for _, l := range r.Layers {
		state := "active"
		if !l.Active {
			state = "MISSING"
			if weaker && !l.Required {
				state = "WEAKER"
			}
		}
		req := ""
		if l.Required {
			req = " (required)"
		}
		fmt.Fprintf(&b, "layer %-20s %s%s %s\n", l.Name, state, req, l.Detail)
	}
	for _, p := range r.Probes {
		fmt.Fprintf(&b, "probe %-20s %-8s %s %s\n", p.Name, p.Status, p.Category, p.Detail)
	}
	fmt.Fprintf(&b, "totals: %d passed, %d failed, %d not applicable, %d errors\n",
		r.Totals.Passed, r.Totals.Failed, r.Totals.NotApplicable, r.Totals.Errored)
	for _, f := range r.Fixes {
		fmt.Fprintf(&b, "fix: %s\n", f)
	}
	return b.String()
}
