// Package config holds airlock's one configuration: built-in defaults, overridden by a
// TOML file, then by AIRLOCK_* environment variables, then by command-line flags.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"os"
	"path"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/airlock-mcp/airlock/egress"
	"github.com/airlock-mcp/airlock/internal/trust"
	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/session"
)

// Config is the whole effective configuration.
type Config struct {
	Languages   Languages   `toml:"languages" json:"languages"`
	Limits      Bounds      `toml:"limits" json:"limits"`
	Network     string      `toml:"network" json:"network"`
	Egress      Egress      `toml:"egress" json:"egress"`
	Imports     Imports     `toml:"imports" json:"imports"`
	Concurrency Concurrency `toml:"concurrency" json:"concurrency"`
	// MaxCodeBytes caps the code argument of one call; MaxStdinBytes its stdin.
	MaxCodeBytes  Size      `toml:"max_code_bytes" json:"max_code_bytes"`
	MaxStdinBytes Size      `toml:"max_stdin_bytes" json:"max_stdin_bytes"`
	Files         Caps      `toml:"files" json:"files"`
	Artifacts     Artifacts `toml:"artifacts" json:"artifacts"`
	Sandbox       Sandbox   `toml:"sandbox" json:"sandbox"`
	HTTP          HTTP      `toml:"http" json:"http"`
	Log           Log       `toml:"log" json:"log"`
	Audit         Audit     `toml:"audit" json:"audit"`
	Pool          Pool      `toml:"pool" json:"pool"`
	Sessions      Sessions  `toml:"sessions" json:"sessions"`
	// Environments are the operator's library sets, by name ([environments.NAME]).
	Environments map[string]Environment `toml:"environments" json:"environments,omitempty"`
}

// Languages says which interpreters may run and, optionally, where they are.
type Languages struct {
	Enabled []string `toml:"enabled" json:"enabled"`
	// Interpreters pins a language to an absolute interpreter path instead of discovery.
	Interpreters map[string]string `toml:"interpreters" json:"interpreters,omitempty"`
}

// Bounds are the per-run limit defaults and the maximums a call may ask for.
type Bounds struct {
	Default Limits `toml:"default" json:"default"`
	Max     Limits `toml:"max" json:"max"`
}

// Limits mirrors sandbox.Limits with human units in the file ("30s", "256MiB").
type Limits struct {
	Wall         Duration `toml:"wall" json:"wall"`
	CPU          Duration `toml:"cpu" json:"cpu"`
	Memory       Size     `toml:"memory" json:"memory"`
	Pids         int      `toml:"pids" json:"pids"`
	FileSize     Size     `toml:"file_size" json:"file_size"`
	OpenFiles    int      `toml:"open_files" json:"open_files"`
	Workspace    Size     `toml:"workspace" json:"workspace"`
	Output       Size     `toml:"output" json:"output"`
	AddressSpace Size     `toml:"address_space" json:"address_space"`
}

// Imports is the advisory Python import policy.
type Imports struct {
	DenyImport []string `toml:"deny_import" json:"deny_import"`
	DenyFrom   []string `toml:"deny_from" json:"deny_from"`
}

// Concurrency bounds how many sandboxes run at once and how long a call may wait.
type Concurrency struct {
	MaxParallel  int      `toml:"max_parallel" json:"max_parallel"`
	QueueSize    int      `toml:"queue_size" json:"queue_size"`
	QueueTimeout Duration `toml:"queue_timeout" json:"queue_timeout"`
}

// Caps bound input files or returned artifacts.
type Caps struct {
	MaxFiles     int  `toml:"max_files" json:"max_files"`
	MaxFileBytes Size `toml:"max_file_bytes" json:"max_file_bytes"`
	MaxTotal     Size `toml:"max_total" json:"max_total"`
}

// Artifacts bound the files a program leaves in its output directory and come back.
type Artifacts struct {
	Caps
	// Dir is the workspace-relative output directory; empty turns artifacts off.
	Dir string `toml:"dir" json:"dir"`
}

// Sandbox configures the backend once at startup.
type Sandbox struct {
	HostUser string `toml:"host_user" json:"host_user"`
	// UIDRange is the block of host ids a root server gives its sandboxes, one uid and
	// gid per live sandbox ("FIRST-LAST"; empty: the backend's default; "off": every
	// sandbox runs as HostUser).
	UIDRange      string `toml:"uid_range" json:"uid_range,omitempty"`
	Cgroups       string `toml:"cgroups" json:"cgroups"`
	AllowDegraded bool   `toml:"allow_degraded" json:"allow_degraded"`
	StateDir      string `toml:"state_dir" json:"state_dir,omitempty"`
	// Isolation is the Linux tier: "auto" (namespaces, refusing without them),
	// "namespaces" or "landlock" (the weaker tier, only when chosen).
	Isolation string `toml:"isolation" json:"isolation"`
}

// HTTP configures the Streamable HTTP and SSE transports.
type HTTP struct {
	Addr           string   `toml:"addr" json:"addr"`
	AuthToken      string   `toml:"auth_token" json:"-"`
	AllowedOrigins []string `toml:"allowed_origins" json:"allowed_origins"`
	MaxBodyBytes   Size     `toml:"max_body_bytes" json:"max_body_bytes"`
	// TokensFile holds one "NAME TOKEN" line per client; reloaded on SIGHUP.
	TokensFile string `toml:"tokens_file" json:"tokens_file,omitempty"`
	// Stateless serves Streamable HTTP without sessions (any replica answers anything).
	Stateless bool `toml:"stateless" json:"stateless"`
	// SessionIdle ends a stateful session unused this long.
	SessionIdle Duration `toml:"session_idle" json:"session_idle"`
	// DrainGrace is how long calls in flight may finish after SIGTERM.
	DrainGrace Duration `toml:"drain_grace" json:"drain_grace"`
	// ClientMaxParallel bounds one token's calls in flight (0: no limit).
	ClientMaxParallel int `toml:"client_max_parallel" json:"client_max_parallel"`
}

// Log configures slog.
type Log struct {
	Level  string `toml:"level" json:"level"`
	Format string `toml:"format" json:"format"`
	File   string `toml:"file" json:"file,omitempty"`
}

// Audit configures the per-run JSONL audit log. It is on by default: an empty path means
// $XDG_STATE_HOME/airlock/audit.jsonl (~/.local/state/...), falling back to a private
// directory under $TMPDIR or the log stream where that cannot be written; "off" turns it
// off.
type Audit struct {
	Path     string `toml:"path" json:"path,omitempty"`
	MaxBytes Size   `toml:"max_bytes" json:"max_bytes"`
}

// Pool is the warm pool: sandboxes prepared ahead of calls, each used for one call. Size
// is per enabled language; 0 turns the pool off.
type Pool struct {
	Size int `toml:"size" json:"size"`
}

// Sessions are run_code's opt-in sessions: one sandbox kept across a client's calls.
type Sessions struct {
	Enabled      bool     `toml:"enabled" json:"enabled"`
	IdleTTL      Duration `toml:"idle_ttl" json:"idle_ttl"`
	MaxLifetime  Duration `toml:"max_lifetime" json:"max_lifetime"`
	MaxPerClient int      `toml:"max_per_client" json:"max_per_client"`
	MaxTotal     int      `toml:"max_total" json:"max_total"`
}

// SessionLimits converts [sessions] to the session manager's limits.
func (c Config) SessionLimits() session.Limits {
	s := c.Sessions
	return session.Limits{IdleTTL: time.Duration(s.IdleTTL), MaxLifetime: time.Duration(s.MaxLifetime),
		MaxPerClient: s.MaxPerClient, MaxTotal: s.MaxTotal}
}

// Environment is one [environments.NAME] table: a venv, a prefix or a node_modules
// directory, bound read-only into the sandboxes that run in it.
type Environment struct {
	Language string   `toml:"language" json:"language"`
	Path     string   `toml:"path" json:"path"`
	Preload  []string `toml:"preload" json:"preload,omitempty"`
	Default  bool     `toml:"default" json:"default"`
}

// Egress is the allowlist of network "allowlist": what the egress proxy lets a
// sandbox reach.
type Egress struct {
	// Domains are exact names, "*.suffix" (subdomains only) or IP addresses.
	Domains []string `toml:"domains" json:"domains"`
	Ports   []int    `toml:"ports" json:"ports"`
	// AllowPrivate opens other hosts' private ranges; AllowLoopback opens this host
	// (loopback and its own addresses), which allow_private does not.
	AllowPrivate  bool `toml:"allow_private" json:"allow_private"`
	AllowLoopback bool `toml:"allow_loopback" json:"allow_loopback"`
	// MaxBytes caps one call's traffic, both directions together.
	MaxBytes       Size `toml:"max_bytes" json:"max_bytes"`
	MaxConnections int  `toml:"max_connections" json:"max_connections"`
}

// SandboxEgress converts to the sandbox's form, with the domains in canonical form; nil
// unless the network is "allowlist". Validate has checked every entry.
func (c Config) SandboxEgress() *sandbox.Egress {
	if sandbox.Network(c.Network) != sandbox.NetworkAllowlist {
		return nil
	}
	e := &sandbox.Egress{Ports: c.Egress.Ports, AllowPrivate: c.Egress.AllowPrivate, AllowLoopback: c.Egress.AllowLoopback,
		MaxBytes: int64(c.Egress.MaxBytes), MaxConnections: c.Egress.MaxConnections}
	for _, d := range c.Egress.Domains {
		if n, err := egress.NormalizePattern(d); err == nil {
			e.Domains = append(e.Domains, n)
		}
	}
	return e
}

// Default returns the built-in configuration.
func Default() Config {
	b := policy.DefaultBounds()
	return Config{
		Languages: Languages{Enabled: []string{"python"}},
		Limits:    Bounds{Default: fromSandbox(b.Default), Max: fromSandbox(b.Max)},
		Network:   string(sandbox.NetworkNone),
		Egress:    Egress{Domains: []string{}, Ports: []int{443, 80}, MaxBytes: egress.DefaultMaxBytes, MaxConnections: egress.DefaultMaxConnections},
		// Two prepared sandboxes per language hide the sandbox and interpreter start
		// for an agent's next call at the cost of ~10 MB each while idle.
		Pool: Pool{Size: 2},
		// An agent's data work takes minutes between steps; an hour bounds a forgotten
		// session. Each open session holds its sandbox's memory while idle.
		Sessions: Sessions{Enabled: true, IdleTTL: Duration(10 * time.Minute), MaxLifetime: Duration(time.Hour),
			MaxPerClient: 4, MaxTotal: 16},
		Concurrency: Concurrency{
			MaxParallel:  runtime.NumCPU(),
			QueueSize:    64,
			QueueTimeout: Duration(30 * time.Second),
		},
		MaxCodeBytes:  1 << 20,
		MaxStdinBytes: 1 << 20,
		Files:         Caps{MaxFiles: 32, MaxFileBytes: 1 << 20, MaxTotal: 8 << 20},
		Artifacts:     Artifacts{Caps: Caps{MaxFiles: 16, MaxFileBytes: 4 << 20, MaxTotal: 16 << 20}, Dir: "out"},
		Sandbox:       Sandbox{HostUser: "nobody", Cgroups: "auto", Isolation: "auto"},
		// Room for the largest legal call: 1 MiB of code plus 8 MiB of files as base64.
		// A session idle for 30 minutes is an agent that went away without DELETE; 30 s
		// of drain is Kubernetes' default terminationGracePeriodSeconds.
		HTTP: HTTP{Addr: "127.0.0.1:8765", MaxBodyBytes: 16 << 20,
			SessionIdle: Duration(30 * time.Minute), DrainGrace: Duration(30 * time.Second)},
		Log:   Log{Level: "info", Format: "text"},
		Audit: Audit{MaxBytes: 64 << 20},
	}
}

// SandboxLimits converts to the sandbox's form.
func (l Limits) SandboxLimits() sandbox.Limits {
	return sandbox.Limits{
		Wall: time.Duration(l.Wall), CPU: time.Duration(l.CPU), Memory: int64(l.Memory),
		Pids: l.Pids, FileSize: int64(l.FileSize), OpenFiles: l.OpenFiles,
		Workspace: int64(l.Workspace), Output: int64(l.Output), AddressSpace: int64(l.AddressSpace),
	}
}

func fromSandbox(l sandbox.Limits) Limits {
	return Limits{
		Wall: Duration(l.Wall), CPU: Duration(l.CPU), Memory: Size(l.Memory),
		Pids: l.Pids, FileSize: Size(l.FileSize), OpenFiles: l.OpenFiles,
		Workspace: Size(l.Workspace), Output: Size(l.Output), AddressSpace: Size(l.AddressSpace),
	}
}

// PolicyBounds converts to policy's form.
func (c Config) PolicyBounds() policy.Bounds {
	return policy.Bounds{Default: c.Limits.Default.SandboxLimits(), Max: c.Limits.Max.SandboxLimits()}
}

// PolicyImports converts to policy's form.
func (c Config) PolicyImports() policy.Imports {
	return policy.Imports{DenyImport: c.Imports.DenyImport, DenyFrom: c.Imports.DenyFrom}
}

// FileCaps converts the input file caps to policy's form.
func (c Config) FileCaps() policy.FileCaps {
	return policy.FileCaps{MaxFiles: c.Files.MaxFiles, MaxFileBytes: int64(c.Files.MaxFileBytes),
		MaxTotalBytes: int64(c.Files.MaxTotal)}
}

// ArtifactLimits converts the artifact caps to the sandbox's form.
func (c Config) ArtifactLimits() sandbox.ArtifactLimits {
	return sandbox.ArtifactLimits{MaxFiles: c.Artifacts.MaxFiles, MaxFileBytes: int64(c.Artifacts.MaxFileBytes),
		MaxTotal: int64(c.Artifacts.MaxTotal)}
}

// validOutDir accepts a clean, relative, slash-separated directory inside the workspace.
func validOutDir(d string) error {
	switch {
	case d == "":
		return nil
	case path.IsAbs(d), strings.ContainsAny(d, "\\\x00"):
		return fmt.Errorf("must be a relative, slash-separated path inside the workspace, got %q", d)
	case path.Clean(d) != d || d == "." || d == ".." || strings.HasPrefix(d, "../"):
		return fmt.Errorf("must be a clean path inside the workspace (no ., .. or trailing /), got %q", d)
	case strings.HasPrefix(strings.ToLower(d), ".airlock"):
		return fmt.Errorf("names starting with .airlock are reserved, got %q", d)
	}
	return nil
}

// PolicyEnvironments converts the environments to policy's form, sorted by name.
func (c Config) PolicyEnvironments() []policy.EnvironmentConfig {
	out := make([]policy.EnvironmentConfig, 0, len(c.Environments))
	for _, name := range slices.Sorted(maps.Keys(c.Environments)) {
		e := c.Environments[name]
		out = append(out, policy.EnvironmentConfig{Name: name, Language: e.Language, Path: e.Path, Preload: e.Preload, Default: e.Default})
	}
	return out
}

// SandboxOptions converts to the backend's options.
func (c Config) SandboxOptions() sandbox.Options {
	return sandbox.Options{HostUser: c.Sandbox.HostUser, UIDRange: c.Sandbox.UIDRange, Cgroups: c.Sandbox.Cgroups,
		AllowDegraded: c.Sandbox.AllowDegraded, StateDir: c.Sandbox.StateDir, Isolation: c.Sandbox.Isolation}
}

// Load builds the effective configuration: defaults < file (when path is not empty) <
// environment (looked up with getenv) < flags (setting name → value, see Settings).
func Load(path string, getenv func(string) string, flags map[string]string) (Config, error) {
	c := Default()
	if path != "" {
		if err := c.loadFile(path); err != nil {
			return Config{}, err
		}
	}
	for _, s := range Settings {
		if v := getenv(s.Env); v != "" {
			if err := s.set(&c, v); err != nil {
				return Config{}, fmt.Errorf("%s (from %s): %w", s.Name, s.Env, err)
			}
		}
	}
	for name, v := range flags {
		s, ok := settingByName(name)
		if !ok {
			return Config{}, fmt.Errorf("unknown setting %q", name)
		}
		if err := s.set(&c, v); err != nil {
			return Config{}, fmt.Errorf("%s (from flag --%s): %w", s.Name, s.Flag, err)
		}
	}
	return c, nil
}

func (c *Config) loadFile(path string) error {
	data, err := readPrivate(path)
	if err != nil {
		return err
	}
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(c)
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	// A misspelt key would otherwise silently keep a default, e.g. a looser limit.
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return fmt.Errorf("config %s: unknown keys: %s", path, strings.Join(keys, ", "))
	}
	// The decoder matches keys case-insensitively, while TOML's are case-sensitive: a
	// file saying network = "none" and, further down, NETWORK = "host" is two keys to
	// TOML (no duplicate refused) and to a reader, and got the host's network.
	var folded []string
	for _, k := range md.Keys() {
		if !exactKey(reflect.TypeFor[Config](), k) {
			folded = append(folded, k.String())
		}
	}
	if len(folded) > 0 {
		return fmt.Errorf("config %s: keys are case-sensitive (lowercase), and these are a setting's only under case folding: %s",
			path, strings.Join(folded, ", "))
	}
	return nil
}

// exactKey reports whether every part of k names a field of t by its toml tag exactly
// (a map's keys are the operator's names, taken as written).
func exactKey(t reflect.Type, k toml.Key) bool {
	for _, part := range k {
		switch t.Kind() {
		case reflect.Struct:
			f, ok := fieldByTag(t, part)
			if !ok {
				return false
			}
			t = f.Type
		case reflect.Map, reflect.Slice:
			t = t.Elem()
		default:
			return false
		}
	}
	return true
}

// fieldByTag is t's field whose toml name is exactly name, looking into embedded
// structs as the decoder does.
func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		switch {
		case tag == "" && f.Anonymous && f.Type.Kind() == reflect.Struct:
			if g, ok := fieldByTag(f.Type, name); ok {
				return g, true
			}
		case tag == name, tag == "" && f.Name == name:
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// readPrivate reads the configuration file, refusing one that a user other than root or
// the server's could have written: its content chooses the network, the limits, the
// tokens, the files the server appends its logs to, so such a user would choose this
// server's isolation (a file in /tmp of theirs, or one left group-writable).
//
// It must be a regular file of at most maxConfigBytes: opened without O_NONBLOCK, a FIFO
// named by mistake blocked the server's start for ever, and a large file (a log) was
// read whole into memory before its first key was looked at.
func readPrivate(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	if err := trust.Regular("config "+path, fi); err != nil {
		return nil, fmt.Errorf("%w: give the path of the TOML file itself", err)
	}
	if err := trust.Private("config "+path, fi); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("config %s is larger than %s, far more than any configuration: is it the right file?", path, policy.FormatSize(maxConfigBytes))
	}
	return data, nil
}

// maxConfigBytes bounds the configuration file: examples/airlock.toml, every key with
// its comment, is 8 KiB.
const maxConfigBytes = 1 << 20

// Validate checks every field and names the first bad one.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if len(c.Languages.Enabled) == 0 {
		bad("languages.enabled", "at least one language must be enabled")
	}
	for name, p := range c.Languages.Interpreters {
		if !strings.HasPrefix(p, "/") {
			bad("languages.interpreters."+name, "must be an absolute path, got %q", p)
		}
	}
	if err := c.PolicyBounds().Validate(); err != nil {
		errs = append(errs, err)
	} else if err := c.validateCeilings(hostCeilings()); err != nil {
		errs = append(errs, err)
	}
	switch sandbox.Network(c.Network) {
	case sandbox.NetworkNone, sandbox.NetworkHost:
	case sandbox.NetworkAllowlist:
		c.Egress.validate(bad)
	default:
		bad("network", "must be %q, %q or %q, got %q", sandbox.NetworkNone, sandbox.NetworkAllowlist, sandbox.NetworkHost, c.Network)
	}
	if c.Concurrency.MaxParallel < 1 || c.Concurrency.MaxParallel > 1024 {
		bad("concurrency.max_parallel", "must be between 1 and 1024, got %d", c.Concurrency.MaxParallel)
	}
	if c.Concurrency.QueueSize < 0 {
		bad("concurrency.queue_size", "must not be negative, got %d", c.Concurrency.QueueSize)
	}
	if c.Concurrency.QueueTimeout < 0 {
		bad("concurrency.queue_timeout", "must not be negative, got %s", c.Concurrency.QueueTimeout)
	}
	positive := map[string]Size{
		"max_code_bytes": c.MaxCodeBytes, "max_stdin_bytes": c.MaxStdinBytes,
		"files.max_file_bytes": c.Files.MaxFileBytes, "files.max_total": c.Files.MaxTotal,
		"artifacts.max_file_bytes": c.Artifacts.MaxFileBytes, "artifacts.max_total": c.Artifacts.MaxTotal,
		"http.max_body_bytes": c.HTTP.MaxBodyBytes, "audit.max_bytes": c.Audit.MaxBytes,
	}
	for _, name := range sortedKeys(positive) {
		if positive[name] <= 0 {
			bad(name, "must be positive, got %d", positive[name])
		}
	}
	if c.MaxCodeBytes > 64<<20 {
		bad("max_code_bytes", "must be at most 64MiB, got %s", policy.FormatSize(int64(c.MaxCodeBytes)))
	}
	if c.HTTP.MaxBodyBytes > 0 && c.HTTP.MaxBodyBytes < c.MaxCodeBytes+c.MaxStdinBytes {
		bad("http.max_body_bytes", "must be at least max_code_bytes + max_stdin_bytes (%s), got %s",
			policy.FormatSize(int64(c.MaxCodeBytes+c.MaxStdinBytes)), policy.FormatSize(int64(c.HTTP.MaxBodyBytes)))
	}
	if c.Files.MaxFiles < 0 {
		bad("files.max_files", "must not be negative, got %d", c.Files.MaxFiles)
	}
	if c.Artifacts.MaxFiles < 0 {
		bad("artifacts.max_files", "must not be negative, got %d", c.Artifacts.MaxFiles)
	}
	if c.Artifacts.MaxFiles > 0 {
		// A zero cap is not "no cap": artifacts.max_files = 0 turns artifacts off.
		if c.Artifacts.MaxFileBytes <= 0 {
			bad("artifacts.max_file_bytes", "must be positive while artifacts.max_files > 0 (set max_files = 0 to turn artifacts off), got %d", c.Artifacts.MaxFileBytes)
		}
		if c.Artifacts.MaxTotal <= 0 {
			bad("artifacts.max_total", "must be positive while artifacts.max_files > 0 (set max_files = 0 to turn artifacts off), got %d", c.Artifacts.MaxTotal)
		}
	}
	if err := validOutDir(c.Artifacts.Dir); err != nil {
		bad("artifacts.dir", "%v", err)
	}
	switch c.Sandbox.Isolation {
	case "auto", "namespaces":
	case "landlock":
		if c.Network != "none" {
			// Both need a network namespace: the bridge to the egress proxy, or one to
			// share; the Landlock tier has neither.
			bad("sandbox.isolation", `"landlock" runs only with network = "none", got network %q`, c.Network)
		}
	default:
		bad("sandbox.isolation", `must be "auto", "namespaces" or "landlock", got %q`, c.Sandbox.Isolation)
	}
	switch c.Sandbox.Cgroups {
	case "auto", "require", "off":
	default:
		bad("sandbox.cgroups", `must be "auto", "require" or "off", got %q`, c.Sandbox.Cgroups)
	}
	if c.Sandbox.HostUser == "" {
		bad("sandbox.host_user", "must not be empty")
	}
	if r := c.Sandbox.UIDRange; r != "" && r != "off" && !validIDRange(r) {
		bad("sandbox.uid_range", `must be FIRST-LAST (e.g. 1879048192-1879113727) or "off", got %q`, r)
	}
	if _, _, err := net.SplitHostPort(c.HTTP.Addr); err != nil {
		bad("http.addr", "must be host:port, got %q", c.HTTP.Addr)
	}
	if c.HTTP.SessionIdle <= 0 {
		bad("http.session_idle", "must be positive, got %s", c.HTTP.SessionIdle)
	}
	if c.HTTP.DrainGrace < 0 {
		bad("http.drain_grace", "must not be negative, got %s", c.HTTP.DrainGrace)
	}
	if c.HTTP.ClientMaxParallel < 0 {
		bad("http.client_max_parallel", "must not be negative, got %d", c.HTTP.ClientMaxParallel)
	}
	for i, o := range c.HTTP.AllowedOrigins {
		if !strings.HasPrefix(o, "http://") && !strings.HasPrefix(o, "https://") {
			bad(fmt.Sprintf("http.allowed_origins[%d]", i), "must start with http:// or https://, got %q", o)
		}
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", `must be "debug", "info", "warn" or "error", got %q`, c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format", `must be "text" or "json", got %q`, c.Log.Format)
	}
	defaults := map[string]string{}
	for _, e := range c.PolicyEnvironments() {
		if err := e.Validate(); err != nil {
			bad("environments."+e.Name, "%v", err)
			continue
		}
		lang, _ := policy.Canonical(e.Language)
		if prev, dup := defaults[lang]; dup && e.Default {
			bad("environments."+e.Name+".default", "environment %s is already the default for %s", prev, lang)
		} else if e.Default {
			defaults[lang] = e.Name
		}
	}
	if s := c.Sessions; s.Enabled {
		if s.IdleTTL <= 0 || s.MaxLifetime <= 0 {
			bad("sessions", "idle_ttl and max_lifetime must be positive, got %s and %s", time.Duration(s.IdleTTL), time.Duration(s.MaxLifetime))
		}
		if s.MaxPerClient < 1 || s.MaxTotal < 1 || s.MaxPerClient > s.MaxTotal {
			bad("sessions", "need 1 <= max_per_client <= max_total, got %d and %d", s.MaxPerClient, s.MaxTotal)
		}
	}
	if c.Pool.Size < 0 || c.Pool.Size > 64 {
		bad("pool.size", "must be between 0 and 64, got %d", c.Pool.Size)
	}
	return errors.Join(errs...)
}

func (e Egress) validate(bad func(field, format string, args ...any)) {
	if len(e.Domains) == 0 {
		bad("egress.domains", `network "allowlist" needs at least one domain`)
	}
	opens := sandbox.Egress{AllowPrivate: e.AllowPrivate, AllowLoopback: e.AllowLoopback}
	for i, d := range e.Domains {
		n, err := egress.NormalizePattern(d)
		if err == nil {
			err = egress.CheckPattern(n, opens)
		}
		if err != nil {
			bad(fmt.Sprintf("egress.domains[%d]", i), "%v", err)
		}
	}
	if len(e.Ports) == 0 {
		bad("egress.ports", `network "allowlist" needs at least one port`)
	}
	for i, p := range e.Ports {
		if p < 1 || p > 65535 {
			bad(fmt.Sprintf("egress.ports[%d]", i), "must be between 1 and 65535, got %d", p)
		}
	}
	if e.MaxBytes <= 0 {
		bad("egress.max_bytes", "must be positive, got %d", e.MaxBytes)
	}
	if e.MaxConnections < 1 || e.MaxConnections > 1024 {
		bad("egress.max_connections", "must be between 1 and 1024, got %d", e.MaxConnections)
	}
}

// Duration is a time.Duration written as "30s" (or an integer number of seconds).
type Duration time.Duration

// UnmarshalTOML accepts "1m30s" or an integer number of seconds.
func (d *Duration) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case string:
		return d.UnmarshalText([]byte(x))
	case int64:
		if x < 0 || x > math.MaxInt64/int64(time.Second) {
			return fmt.Errorf("duration %d seconds out of range", x)
		}
		*d = Duration(time.Duration(x) * time.Second)
		return nil
	}
	return fmt.Errorf("duration must be a string like \"30s\" or whole seconds, got %T", v)
}

// UnmarshalText parses "1m30s" or a bare number of seconds.
func (d *Duration) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return d.UnmarshalTOML(n)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("bad duration %q", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the Go duration form.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

func (d Duration) String() string { return time.Duration(d).String() }

// Size is a byte count written as an integer or with a unit ("512KiB", "256MiB", "1GiB").
type Size int64

var units = []struct {
	suffix string
	mult   int64
}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {"B", 1}}

// UnmarshalTOML accepts an integer or a string with a unit.
func (s *Size) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case int64:
		*s = Size(x)
		return nil
	case string:
		return s.UnmarshalText([]byte(x))
	}
	return fmt.Errorf("size must be an integer or a string like \"256MiB\", got %T", v)
}

// UnmarshalText parses "256MiB", "1GB" or a bare byte count.
func (s *Size) UnmarshalText(b []byte) error {
	str := strings.TrimSpace(string(b))
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(str, u.suffix) {
			str, mult = strings.TrimSpace(strings.TrimSuffix(str, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(str, 10, 64)
	// Both ends: "-17179869183GiB" wrapped around to 1GiB, a limit the operator never wrote.
	if err != nil || n > math.MaxInt64/mult || n < math.MinInt64/mult {
		return fmt.Errorf("bad size %q", string(b))
	}
	*s = Size(n * mult)
	return nil
}

// validIDRange checks the shape of an id block; the backend checks it against the host.
func validIDRange(r string) bool {
	a, b, ok := strings.Cut(r, "-")
	lo, err1 := strconv.ParseUint(a, 10, 32)
	hi, err2 := strconv.ParseUint(b, 10, 32)
	return ok && err1 == nil && err2 == nil && lo > 0 && hi >= lo
}
