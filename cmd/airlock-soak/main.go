// Command airlock-soak drives `airlock serve` over stdio with thousands of run_code
// calls (ordinary programs, failures, timeouts, fork, memory, output and disk bombs,
// detached grandchildren), then checks from the host that every call got exactly one
// answer with the expected status and that no process, cgroup, mount, temp file, fd or
// memory was left behind. It prints a summary and PASS or FAIL, and exits 1 on FAIL.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/airlock-mcp/airlock/internal/soak"
)

func main() {
	fs := flag.NewFlagSet("airlock-soak", flag.ContinueOnError)
	bin := fs.String("airlock", "", "path to the airlock binary to soak (required)")
	calls := fs.Int("calls", 2000, "measured run_code calls: the first half sequential, the rest -parallel at a time")
	parallel := fs.Int("parallel", 8, "concurrent calls in the second half (also the server's max_parallel)")
	memory := fs.String("memory", "128MiB", "the server's per-run memory limit (the expected statuses assume 128MiB)")
	rss := fs.Int64("max-rss-growth-mib", 32, "fail if the server's RSS grows more than this from the warmed-up baseline")
	slack := fs.Int("goroutine-slack", 4, "fail if the server ends with more goroutines than a warmed-up twin server plus this; 0 skips the check and ends the server by closing stdin instead of SIGQUIT")
	pool := fs.Int("pool", 2, "the server's warm pool size; that many idle sandboxes may remain while it runs")
	tenants := fs.Int("tenants", 0, "concurrent-tenant mode: start this many servers at once and send calls that exhaust per-user kernel budgets beside calls (and a host process of root) that must still get theirs; -calls in all, -parallel per server")
	isolation := fs.String("isolation", "", `the server's sandbox.isolation ("landlock": soak the Landlock tier)`)
	sessions := fs.Bool("sessions", false, fmt.Sprintf("sessions mode: every call runs in a run_code session, %d calls per session", soak.LaneCalls))
	dir := fs.String("dir", "", "work directory for server logs, audit logs and the server's TMPDIR (default: a new temp dir, kept)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: airlock-soak -airlock BINARY [-calls N] [-parallel P] [flags]\n\n"+
			"Runs as root on Linux (it reads /proc of the server and its sandboxes).\n"+
			"With -goroutine-slack > 0 the server is ended with SIGQUIT (to count its goroutines) and a\n"+
			"second server is started, which must log removing the first one's stale cgroups.\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nMix of calls and the one status each must return (weights per round of %d):\n%s", soak.Weights(), soak.ExpectTable())
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *bin == "" || *calls < 2 || *parallel < 1 {
		fs.Usage()
		os.Exit(2)
	}
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "airlock-soak:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *tenants > 0 {
		os.Exit(runTenants(ctx, soak.Options{Binary: abs, Calls: *calls, Parallel: *parallel, Pool: *pool, Dir: *dir, Progress: os.Stderr}, *tenants))
	}
	rep, err := soak.Run(ctx, soak.Options{Binary: abs, Calls: *calls, Parallel: *parallel, Memory: *memory,
		MaxRSSGrowth: *rss << 20, GoroutineSlack: *slack, Pool: *pool, Dir: *dir, Isolation: *isolation, Progress: os.Stderr, Sessions: *sessions})
	if err != nil {
		fmt.Fprintln(os.Stderr, "airlock-soak:", err)
		fmt.Fprintln(os.Stderr, "FAIL")
		os.Exit(1)
	}
	rep.Print(os.Stderr)
	fmt.Fprintf(os.Stderr, "work dir: %s\n", rep.Options.Dir)
	if !rep.Pass() {
		os.Exit(1)
	}
}

func runTenants(ctx context.Context, o soak.Options, tenants int) int {
	rep, err := soak.RunTenants(ctx, o, tenants)
	if err != nil {
		fmt.Fprintln(os.Stderr, "airlock-soak:", err)
		fmt.Fprintln(os.Stderr, "FAIL")
		return 1
	}
	rep.Print(os.Stderr)
	// Alone on the host, no process of a sandbox host id may outlive the servers.
	if !rep.Pass() || len(rep.UIDsLeft) > 0 {
		return 1
	}
	return 0
}
