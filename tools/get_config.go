package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/runner"
	"github.com/airlock-mcp/airlock/sandbox"
)

// GetConfigArgs is empty: get_config takes no arguments.
type GetConfigArgs struct{}

// LimitsView is one set of limits in plain units.
type LimitsView struct {
	WallMs         int64 `json:"wall_ms"`
	CPUMs          int64 `json:"cpu_ms"`
	MemoryBytes    int64 `json:"memory_bytes"`
	Pids           int   `json:"pids"`
	FileSizeBytes  int64 `json:"file_size_bytes"`
	OpenFiles      int   `json:"open_files"`
	WorkspaceBytes int64 `json:"workspace_bytes"`
	OutputBytes    int64 `json:"output_bytes"`
}

// LanguageView is one language as detected on this host.
type LanguageView struct {
	Name        string `json:"name"`
	Interpreter string `json:"interpreter"`
	Version     string `json:"version"`
	Enabled     bool   `json:"enabled"`
	Installed   bool   `json:"installed"`
}

// ConfigView is the effective, redacted configuration.
type ConfigView struct {
	Version   string         `json:"version"`
	Languages []LanguageView `json:"languages"`
	// Environments are the configured library sets; only usable ones are offered.
	Environments []policy.Environment `json:"environments"`
	Limits       struct {
		Default LimitsView `json:"default"`
		Max     LimitsView `json:"max"`
	} `json:"limits"`
	Network string `json:"network"`
	// Egress is the allowlist of network "allowlist": what the proxy lets through.
	Egress  *sandbox.Egress `json:"egress,omitempty"`
	Imports struct {
		DenyImport []string `json:"deny_import"`
		DenyFrom   []string `json:"deny_from"`
	} `json:"imports"`
	Concurrency struct {
		MaxParallel    int   `json:"max_parallel"`
		QueueSize      int   `json:"queue_size"`
		QueueTimeoutMs int64 `json:"queue_timeout_ms"`
		Running        int   `json:"running"`
	} `json:"concurrency"`
	MaxCodeBytes  int `json:"max_code_bytes"`
	MaxStdinBytes int `json:"max_stdin_bytes"`
	Isolation     struct {
		Platform string `json:"platform"`
		Backend  string `json:"backend"`
		// Tier is the Linux isolation tier in effect: "namespaces" or "landlock".
		Tier     string          `json:"tier,omitempty"`
		Layers   []sandbox.Layer `json:"layers"`
		Degraded bool            `json:"degraded"`
		Error    string          `json:"error,omitempty"`
	} `json:"isolation"`
	// Pool is the warm pool: sandboxes prepared ahead of calls, one call each.
	Pool sandbox.PoolStats `json:"pool"`
	// Sessions are run_code's sessions: their limits and how many are open.
	Sessions SessionsView `json:"sessions"`
	Sandbox  struct {
		HostUser      string `json:"host_user"`
		Cgroups       string `json:"cgroups"`
		AllowDegraded bool   `json:"allow_degraded"`
		// Isolation is the configured tier: "auto", "namespaces" or "landlock".
		Isolation string `json:"isolation"`
		// UIDRange is the configured block of host ids ("off": every sandbox runs as
		// host_user; empty: the backend's default); the host-uids layer says what is in
		// effect.
		UIDRange string `json:"uid_range,omitempty"`
	} `json:"sandbox"`
	// Transport is what this server serves MCP on: stdio, http (Streamable HTTP) or sse;
	// empty outside a server (airlock config).
	Transport string `json:"transport,omitempty"`
	HTTP      struct {
		// Addr is the address an HTTP server really listens on (the --http or --sse
		// flag's); empty on stdio; the configured http.addr outside a server.
		Addr           string   `json:"addr"`
		AuthRequired   bool     `json:"auth_required"`
		AllowedOrigins []string `json:"allowed_origins"`
		MaxBodyBytes   int64    `json:"max_body_bytes"`
		Stateless      bool     `json:"stateless"`
		// ClientMaxParallel bounds one token's calls in flight (0: no bound beyond the
		// fair share of the slots).
		ClientMaxParallel int `json:"client_max_parallel"`
	} `json:"http"`
}

// SessionsView is get_config's account of sessions.
type SessionsView struct {
	Enabled       bool  `json:"enabled"`
	IdleTTLMs     int64 `json:"idle_ttl_ms"`
	MaxLifetimeMs int64 `json:"max_lifetime_ms"`
	MaxPerClient  int   `json:"max_per_client"`
	MaxTotal      int   `json:"max_total"`
	Open          int   `json:"open"`
	Clients       int   `json:"clients"`
}

func sessionsView(r *runner.Runner) SessionsView {
	if r.Sessions == nil {
		return SessionsView{}
	}
	lim, st := r.Sessions.Limits(), r.Sessions.Stats()
	return SessionsView{Enabled: true, IdleTTLMs: lim.IdleTTL.Milliseconds(), MaxLifetimeMs: lim.MaxLifetime.Milliseconds(),
		MaxPerClient: lim.MaxPerClient, MaxTotal: lim.MaxTotal, Open: st.Open, Clients: st.Clients}
}

func limitsView(l sandbox.Limits) LimitsView {
	return LimitsView{WallMs: l.Wall.Milliseconds(), CPUMs: l.CPU.Milliseconds(), MemoryBytes: l.Memory,
		Pids: l.Pids, FileSizeBytes: l.FileSize, OpenFiles: l.OpenFiles, WorkspaceBytes: l.Workspace, OutputBytes: l.Output}
}

// EffectiveConfig builds the view; it never contains the auth token.
func EffectiveConfig(ctx context.Context, d Deps) ConfigView {
	var v ConfigView
	r, c := d.Runner, d.Config
	v.Version = d.Version
	v.Languages = []LanguageView{}
	for _, l := range r.Languages.Languages() {
		v.Languages = append(v.Languages, LanguageView{Name: l.Name, Interpreter: l.Interpreter,
			Version: l.Version, Enabled: l.Enabled, Installed: l.Installed})
	}
	v.Environments = append([]policy.Environment{}, r.Environments.All()...)
	v.Limits.Default, v.Limits.Max = limitsView(r.Bounds.Default), limitsView(r.Bounds.Max)
	v.Network = string(r.Network)
	if r.Network == sandbox.NetworkAllowlist {
		v.Egress = r.Egress
	}
	v.Imports.DenyImport, v.Imports.DenyFrom = nonNil(r.Imports.DenyImport), nonNil(r.Imports.DenyFrom)
	v.Concurrency.MaxParallel = r.Limiter.Parallel()
	v.Concurrency.QueueSize = c.Concurrency.QueueSize
	v.Concurrency.QueueTimeoutMs = int64(c.Concurrency.QueueTimeout) / 1e6
	v.Concurrency.Running = r.Limiter.Running()
	v.MaxCodeBytes, v.MaxStdinBytes = r.MaxCodeBytes, r.MaxStdinBytes
	v.Isolation.Layers = []sandbox.Layer{}
	v.Isolation.Degraded = r.Degraded
	if rep, err := r.Sandbox.Probe(ctx); err != nil {
		v.Isolation.Error = err.Error()
	} else {
		v.Isolation.Platform, v.Isolation.Backend, v.Isolation.Tier = rep.Platform, rep.Backend, rep.Isolation
		if rep.Layers != nil {
			v.Isolation.Layers = rep.Layers
		}
	}
	if w, ok := r.Sandbox.(sandbox.Warmer); ok {
		v.Pool = w.PoolStats()
	}
	v.Sessions = sessionsView(r)
	v.Sandbox.HostUser, v.Sandbox.Cgroups, v.Sandbox.AllowDegraded = c.Sandbox.HostUser, c.Sandbox.Cgroups, c.Sandbox.AllowDegraded
	v.Sandbox.Isolation, v.Sandbox.UIDRange = c.Sandbox.Isolation, c.Sandbox.UIDRange
	v.Transport = d.Transport
	v.HTTP.Addr = c.HTTP.Addr
	v.HTTP.Stateless, v.HTTP.ClientMaxParallel = c.HTTP.Stateless, c.HTTP.ClientMaxParallel
	v.HTTP.AuthRequired = c.HTTP.AuthToken != "" || c.HTTP.TokensFile != ""
	if d.Transport == "stdio" {
		// Nothing listens, and no token is asked of the stdio client.
		v.HTTP.Addr, v.HTTP.AuthRequired = "", false
	}
	v.HTTP.AllowedOrigins = nonNil(c.HTTP.AllowedOrigins)
	v.HTTP.MaxBodyBytes = int64(c.HTTP.MaxBodyBytes)
	return v
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// GetConfig returns the get_config tool.
func GetConfig(d Deps) server.ServerTool {
	tool := mcp.NewToolWithRawSchema("get_config",
		"Show the server's effective configuration: languages and interpreter versions, environments and their packages, default and maximum limits, network mode, import policy, concurrency and the isolation layers in effect.",
		reflectSchema(&GetConfigArgs{}, nil))
	tool.Title = "Show sandbox configuration"
	tool.RawOutputSchema = reflectSchema(&ConfigView{}, nil)
	tool.Annotations = mcp.ToolAnnotation{Title: tool.Title, ReadOnlyHint: boolPtr(true),
		DestructiveHint: boolPtr(false), IdempotentHint: boolPtr(true), OpenWorldHint: boolPtr(false)}
	return server.ServerTool{Tool: tool, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args GetConfigArgs
		if err := bindStrict(req, &args, nil); err != nil {
			return mcp.NewToolResultError("invalid arguments: get_config takes none: " + err.Error()), nil
		}
		v := EffectiveConfig(ctx, d)
		return mcp.NewToolResultStructured(v, RenderConfig(v)), nil
	}}
}

// RenderConfig is the plain-text form of the configuration (also used by `airlock config`).
func RenderConfig(v ConfigView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "airlock %s: %s/%s, network %s, %d parallel runs\n", v.Version, v.Isolation.Platform, v.Isolation.Backend, v.Network, v.Concurrency.MaxParallel)
	if v.Isolation.Tier != "" {
		fmt.Fprintf(&b, "isolation: %s\n", v.Isolation.Tier)
	}
	if e := v.Egress; e != nil {
		fmt.Fprintf(&b, "egress allowlist %s, ports %s, allow_private=%t, allow_loopback=%t, max %d bytes and %d connections per call\n",
			strings.Join(e.Domains, ", "), joinPorts(e.Ports), e.AllowPrivate, e.AllowLoopback, e.MaxBytes, e.MaxConnections)
	}
	for _, l := range v.Languages {
		fmt.Fprintf(&b, "language %-8s enabled=%-5t installed=%-5t %s %s\n", l.Name, l.Enabled, l.Installed, l.Interpreter, l.Version)
	}
	for _, e := range v.Environments {
		state := "usable"
		switch {
		case !e.Usable && e.Problem != "":
			state = "NOT OFFERED: " + e.Problem
		case !e.Usable:
			state = "not checked yet (serve checks it at startup)"
		}
		fmt.Fprintf(&b, "environment %-8s %s %s %s at %s, %d packages, %s\n", e.Name, e.Language, e.Version, e.Interpreter, e.Path, len(e.Packages), state)
	}
	d, m := v.Limits.Default, v.Limits.Max
	fmt.Fprintf(&b, "timeout %dms (max %dms), memory %d MiB (max %d MiB), pids %d (max %d), output %d KiB (max %d KiB)\n",
		d.WallMs, m.WallMs, d.MemoryBytes>>20, m.MemoryBytes>>20, d.Pids, m.Pids, d.OutputBytes>>10, m.OutputBytes>>10)
	for _, l := range v.Isolation.Layers {
		fmt.Fprintf(&b, "layer %-20s active=%t required=%t %s\n", l.Name, l.Active, l.Required, l.Detail)
	}
	if v.Isolation.Error != "" {
		fmt.Fprintf(&b, "isolation: %s\n", v.Isolation.Error)
	}
	return b.String()
}
