package runner

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/sandbox"
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
		if problem == "" {
			problem = r.checkEnvironment(ctx, e)
		}
		r.Environments.SetUsable(e.Name, problem)
		if problem != "" {
			log.Warn("environment not offered", "environment", e.Name, "problem", problem)
		} else {
			log.Info("environment ready", "environment", e.Name, "language", e.Language, "version", e.Version, "packages", len(e.Packages))
		}
	}
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
		// The error's own last line says what failed (the result's detail is addressed to
		// a model: which environments to try instead).
		why := strings.TrimSpace(string(out.Result.Stderr.Bytes()))
		if i := strings.LastIndexByte(why, '\n'); i >= 0 {
			why = why[i+1:]
		}
		if why == "" {
			why = out.Result.Detail
		}
		return fmt.Sprintf("startup check %q ended %s: %s", strings.TrimSpace(string(code)), out.Result.Status, why)
	}
	return ""
}
