package runner

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/sanitize"
)

// environmentCheckTimeout bounds one environment's startup check: importing pandas and
// matplotlib.pyplot with a cold font cache takes about 2 s on this class of host.
const environmentCheckTimeout = 30 * time.Second

// CheckEnvironments runs each inspected environment once in a sandbox, importing its
// preload list; only the ones that pass are offered. A broken one is logged and shown by
// probe and get_config, and the others still serve. Call it before serving.
func (r *Runner) CheckEnvironments(ctx context.Context) {
	log := r.logger()
	for _, e := range r.Environments.All() {
		problem := e.Problem
		if problem == "" && e.NeedsSiteQuery() {
			problem = r.querySite(ctx, e)
		}
		if problem == "" {
			problem = r.checkEnvironment(ctx, e)
		}
		r.Environments.SetUsable(e.Name, problem)
		if e.Warning != "" {
			log.Warn("environment listed in part", "environment", e.Name, "warning", e.Warning)
		}
		if problem != "" {
			log.Warn("environment not offered", "environment", e.Name, "problem", problem)
		} else {
			log.Info("environment ready", "environment", e.Name, "language", e.Language, "version", e.Version, "packages", len(e.Packages))
		}
	}
}

// querySite asks an environment's own interpreter, in a sandbox, what the host would
// not run it to ask (policy.SiteQuery): "" when it answered, else why not.
func (r *Runner) querySite(ctx context.Context, e policy.Environment) string {
	r.Environments.SetUsable(e.Name, "") // Lookup finds only usable ones; the caller sets the verdict
	out, err := r.Run(ctx, Call{Environment: e.Name, Code: []byte(policy.SiteQuery), Timeout: environmentCheckTimeout})
	switch {
	case err != nil:
		return "site query: " + err.Error()
	case out.Result.Status != sandbox.StatusOK:
		return fmt.Sprintf("site query in a sandbox ended %s: %s", out.Result.Status, lastLine(out.Result.Stderr.Bytes(), out.Result.Detail))
	}
	if err := r.Environments.CompleteSite(e.Name, string(out.Result.Stdout.Bytes())); err != nil {
		return err.Error()
	}
	return ""
}

// maxProblemLine bounds the line of a failed check's stderr an environment's problem
// quotes: Python's and node's last line (the exception) is well under it.
const maxProblemLine = 300

// lastLine is the last line of a failed run's stderr, which says what failed, or detail
// when it wrote none (the result's detail is addressed to a model: which environments
// to try instead). The environment's code writes that stderr and the problem reaches
// get_config's every client and the operator's log, so it is cut to maxProblemLine and
// what is not visible is escaped (sanitize.Escape), as clip does for a call's names.
func lastLine(stderr []byte, detail string) string {
	why := strings.TrimSpace(string(stderr))
	if i := strings.LastIndexByte(why, '\n'); i >= 0 {
		why = why[i+1:]
	}
	if why == "" {
		why = detail
	}
	if len(why) > maxProblemLine {
		why = strings.ToValidUTF8(why[:maxProblemLine], "") + "…"
	}
	return sanitize.Escape(why)
}

// checkEnvironment is the startup check of one environment: "" when its preload list
// imports in a sandbox, else why not.
func (r *Runner) checkEnvironment(ctx context.Context, e policy.Environment) string {
	r.Environments.SetUsable(e.Name, "") // Lookup finds only usable ones; the caller sets the verdict
	code := policy.CheckProgram(e)
	out, err := r.Run(ctx, Call{Environment: e.Name, Code: code, Timeout: environmentCheckTimeout})
	switch {
	case err != nil:
		return "startup check: " + err.Error()
	case out.Result.Status != sandbox.StatusOK:
		return fmt.Sprintf("startup check %q ended %s: %s", strings.TrimSpace(string(code)), out.Result.Status, lastLine(out.Result.Stderr.Bytes(), out.Result.Detail))
	}
	return ""
}
