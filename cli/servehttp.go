package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/airlock-mcp/airlock/config"
	"github.com/airlock-mcp/airlock/metrics"
	"github.com/airlock-mcp/airlock/runner"
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/serve"
	"github.com/airlock-mcp/airlock/tools"
)

// warmWait bounds how long readiness waits for the pool to fill; the pool only saves
// start-up time, so a slow fill delays readiness but never stops the server.
const warmWait = time.Minute

type httpListen struct {
	addr    string
	sse     bool
	clients *serve.Clients
}

// serveHTTP listens first, so that /healthz answers and /readyz says 503 while the
// startup probes run and the pool fills; MCP requests are refused (retryably) until
// then. SIGTERM drains: /readyz turns 503, new calls are refused, the calls in flight
// get http.drain_grace to finish, and the process exits 0.
func serveHTTP(ctx context.Context, cfg config.Config, deps tools.Deps, l httpListen, stdio IO, log *slog.Logger) int {
	deps.Runner.PerClient = runner.NewClientLimit(cfg.HTTP.ClientMaxParallel)
	src := metrics.Sources{Version: deps.Version, Queued: deps.Runner.Limiter.Waiting, Running: deps.Runner.Limiter.Running}
	if w, ok := deps.Runner.Sandbox.(sandbox.Warmer); ok {
		src.Pool = w.PoolStats
	}
	m := metrics.New(src)
	deps.Runner.Observer = m
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "airlock: listen: %v\n", err)
		return exitFailed
	}
	base := "http://" + ln.Addr().String()
	// get_config says where this server really listens: the flag's address, not
	// http.addr (which no transport reads), and the port chosen for ":0".
	deps.Config.HTTP.Addr, deps.Transport = ln.Addr().String(), "http"
	if l.sse {
		deps.Transport = "sse"
	}
	st := serve.NewState()
	h := serve.Handler(serve.New(deps), base, serve.HTTPOptions{Clients: l.clients, AllowedOrigins: cfg.HTTP.AllowedOrigins,
		MaxBodyBytes: int64(cfg.HTTP.MaxBodyBytes), SSE: l.sse, Stateless: cfg.HTTP.Stateless,
		SessionIdle: time.Duration(cfg.HTTP.SessionIdle), State: st, Metrics: m.Handler(), Log: slog.Default(),
		SessionEnded: endRunSessions(deps)})
	endpoint := base + "/mcp"
	if l.sse {
		endpoint = base + "/sse"
	}
	if cfg.HTTP.TokensFile != "" {
		stop := reloadOnHUP(l.clients, cfg.HTTP.TokensFile, log)
		defer stop()
	}
	if !l.clients.Enabled() {
		// CheckBind allowed it (loopback), and on a single-user machine it is right; on a
		// shared one every local user, and every process of theirs, can run code here.
		log.Warn("no client token: every user and process of this host can run code through this server; set http.tokens_file or http.auth_token on a shared host",
			"addr", ln.Addr().String())
	}

	serveCtx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	refused := make(chan error, 1)
	var stopPool func()
	startup := make(chan struct{})
	go func() {
		defer close(startup)
		// The listener is up before the probes so that a prober sees "starting", not
		// "connection refused"; nothing runs a call until SetReady.
		if err := startupCheck(serveCtx, deps, cfg, log); err != nil {
			if serveCtx.Err() == nil { // not a SIGTERM during startup
				refused <- err
			}
			stopServing()
			return
		}
		stopPool = warm(deps, cfg, log)
		waitWarm(serveCtx, deps, cfg, log)
		st.SetReady()
		log.Info("serving MCP over HTTP", "endpoint", endpoint, "clients", l.clients.Count(),
			"stateless", cfg.HTTP.Stateless || l.sse, "version", deps.Version)
	}()
	log.Info("listening; ready after the startup probes", "addr", ln.Addr().String())
	err = serve.ServeHTTP(serveCtx, ln, h, st, time.Duration(cfg.HTTP.DrainGrace), slog.Default())
	stopServing()
	<-startup
	if stopPool != nil {
		stopPool()
	} else {
		closeSandbox(deps)
	}
	select {
	case rerr := <-refused:
		fmt.Fprintf(stdio.Stderr, "airlock: refusing to serve: %v\n", rerr)
		return exitRefused
	default:
	}
	if err != nil {
		log.Error("http", "err", err)
		return exitFailed
	}
	log.Info("http server stopped")
	return exitOK
}

// waitWarm returns once every template's pool is full, or after warmWait.
func waitWarm(ctx context.Context, deps tools.Deps, cfg config.Config, log *slog.Logger) {
	w, ok := deps.Runner.Sandbox.(sandbox.Warmer)
	if !ok || cfg.Pool.Size <= 0 {
		return
	}
	deadline := time.Now().Add(warmWait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if s := w.PoolStats(); s.Ready >= s.Size*s.Templates {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	log.Warn("warm pool not full yet; ready anyway (calls build their sandbox cold until it fills)", "waited", warmWait)
}

// reloadOnHUP reads the tokens file again at each SIGHUP; a file that no longer parses
// leaves the previous tokens in force.
func reloadOnHUP(c *serve.Clients, path string, log *slog.Logger) func() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-hup:
				if err := c.Reload(); err != nil {
					log.Error("tokens file not reloaded; the previous tokens stay in force", "path", path, "err", err)
					continue
				}
				log.Info("tokens file reloaded", "path", path, "clients", c.Count())
			}
		}
	}()
	return func() { signal.Stop(hup); close(done) }
}

// endRunSessions destroys the run_code sessions of an MCP session that has ended: no
// client can reach them any more.
func endRunSessions(deps tools.Deps) func(id, owner string) {
	m := deps.Runner.Sessions
	if m == nil {
		return nil
	}
	return func(id, owner string) { m.EndOwner(tools.HTTPOwner(id, owner)) }
}
