// Command airlock-fleet runs the fleet test (package internal/fleet): three stateless
// replicas of `airlock serve --http` behind HAProxy on 127.0.0.1, a rolling restart and
// a SIGKILL under a load of mixed run_code calls. It prints throughput, latency, the
// retries and the audit accounting, then PASS or FAIL, and exits 1 on FAIL.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/airlock-mcp/airlock/internal/fleet"
)

func main() {
	fs := flag.NewFlagSet("airlock-fleet", flag.ContinueOnError)
	bin := fs.String("airlock", "", "path to the airlock binary (required)")
	calls := fs.Int("calls", 2000, "run_code calls in all")
	clients := fs.Int("clients", 16, "concurrent MCP clients, each with its own token")
	node := fs.Bool("node", true, "mix node calls in (needs /usr/bin/node)")
	dir := fs.String("dir", "", "work directory for logs, audit logs and haproxy.cfg (default: a new temp dir, kept)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *bin == "" || *calls < 8 || *clients < 1 {
		fs.Usage()
		os.Exit(2)
	}
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "airlock-fleet:", err)
		os.Exit(2)
	}
	if *dir == "" {
		if *dir, err = os.MkdirTemp("", "airlock-fleet-"); err != nil {
			fmt.Fprintln(os.Stderr, "airlock-fleet:", err)
			os.Exit(2)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := fleet.Run(ctx, fleet.Options{Binary: abs, Calls: *calls, Clients: *clients, Dir: *dir, Node: *node, Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "airlock-fleet:", err)
		fmt.Fprintf(os.Stderr, "work dir: %s\nFAIL\n", *dir)
		os.Exit(1)
	}
	rep.Print(os.Stderr)
	fmt.Fprintf(os.Stderr, "work dir: %s\n", *dir)
	if !rep.OK() {
		os.Exit(1)
	}
}
