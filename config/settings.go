package config

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Setting is one key that the environment and the command line may override. The same
// table drives both, so an environment variable and its flag can never disagree.
type Setting struct {
	Name  string // dotted path in the file, used in errors
	Env   string
	Flag  string
	Usage string
	set   func(c *Config, v string) error
}

// Settings lists every overridable key.
var Settings = []Setting{
	{"languages.enabled", "AIRLOCK_LANGUAGES", "languages", "comma-separated languages to enable",
		func(c *Config, v string) error { c.Languages.Enabled = splitList(v); return nil }},
	{"network", "AIRLOCK_NETWORK", "network", `sandbox network: "none", "allowlist" or "host"`,
		func(c *Config, v string) error { c.Network = v; return nil }},
	{"egress.domains", "AIRLOCK_EGRESS_DOMAINS", "egress-domains", `comma-separated names network "allowlist" may reach (*.suffix: subdomains)`,
		func(c *Config, v string) error { c.Egress.Domains = splitList(v); return nil }},
	{"egress.ports", "AIRLOCK_EGRESS_PORTS", "egress-ports", "comma-separated ports the allowlist may reach",
		func(c *Config, v string) error { return setInts(&c.Egress.Ports, v) }},
	{"egress.max_bytes", "AIRLOCK_EGRESS_MAX_BYTES", "egress-max-bytes", "network bytes per call, both directions (e.g. 64MiB)",
		func(c *Config, v string) error { return c.Egress.MaxBytes.UnmarshalText([]byte(v)) }},
	{"limits.default.wall", "AIRLOCK_TIMEOUT", "default-timeout", "default wall-clock timeout per run",
		func(c *Config, v string) error { return c.Limits.Default.Wall.UnmarshalText([]byte(v)) }},
	{"limits.max.wall", "AIRLOCK_MAX_TIMEOUT", "max-timeout", "largest timeout a call may ask for",
		func(c *Config, v string) error { return c.Limits.Max.Wall.UnmarshalText([]byte(v)) }},
	{"limits.default.memory", "AIRLOCK_MEMORY", "memory", "memory limit per run (e.g. 256MiB)",
		func(c *Config, v string) error { return c.Limits.Default.Memory.UnmarshalText([]byte(v)) }},
	{"concurrency.max_parallel", "AIRLOCK_MAX_PARALLEL", "max-parallel", "sandboxes running at once",
		func(c *Config, v string) error { return setInt(&c.Concurrency.MaxParallel, v) }},
	{"pool.size", "AIRLOCK_POOL_SIZE", "pool-size", "sandboxes prepared ahead per enabled language (0: off)",
		func(c *Config, v string) error { return setInt(&c.Pool.Size, v) }},
	{"concurrency.queue_size", "AIRLOCK_QUEUE_SIZE", "queue-size", "calls that may wait for a slot",
		func(c *Config, v string) error { return setInt(&c.Concurrency.QueueSize, v) }},
	{"concurrency.queue_timeout", "AIRLOCK_QUEUE_TIMEOUT", "queue-timeout", "how long a call waits for a slot",
		func(c *Config, v string) error { return c.Concurrency.QueueTimeout.UnmarshalText([]byte(v)) }},
	{"max_code_bytes", "AIRLOCK_MAX_CODE_BYTES", "max-code-bytes", "largest code argument",
		func(c *Config, v string) error { return c.MaxCodeBytes.UnmarshalText([]byte(v)) }},
	{"sandbox.host_user", "AIRLOCK_HOST_USER", "host-user", "unprivileged account sandboxes share under root with sandbox.uid_range = off",
		func(c *Config, v string) error { c.Sandbox.HostUser = v; return nil }},
	{"sandbox.uid_range", "AIRLOCK_UID_RANGE", "uid-range", `host ids FIRST-LAST a root server gives its sandboxes, one each ("off": all run as sandbox.host_user)`,
		func(c *Config, v string) error { c.Sandbox.UIDRange = v; return nil }},
	{"sandbox.cgroups", "AIRLOCK_CGROUPS", "cgroups", `"auto", "require" or "off"`,
		func(c *Config, v string) error { c.Sandbox.Cgroups = v; return nil }},
	{"sandbox.isolation", "AIRLOCK_ISOLATION", "isolation", `Linux tier: "auto" (namespaces), "namespaces" or "landlock" (weaker: for hosts without user namespaces)`,
		func(c *Config, v string) error { c.Sandbox.Isolation = v; return nil }},
	{"sandbox.allow_degraded", "AIRLOCK_ALLOW_DEGRADED", "allow-degraded", "serve even when optional layers are missing",
		func(c *Config, v string) error { return setBool(&c.Sandbox.AllowDegraded, v) }},
	{"http.auth_token", "AIRLOCK_AUTH_TOKEN", "auth-token", "bearer token required on HTTP (prefer the env var)",
		func(c *Config, v string) error { c.HTTP.AuthToken = v; return nil }},
	{"http.allowed_origins", "AIRLOCK_ALLOWED_ORIGINS", "allowed-origins", "comma-separated extra allowed Origins",
		func(c *Config, v string) error { c.HTTP.AllowedOrigins = splitList(v); return nil }},
	{"http.tokens_file", "AIRLOCK_TOKENS_FILE", "tokens-file", `file of "NAME TOKEN" lines, one per client (reloaded on SIGHUP)`,
		func(c *Config, v string) error { c.HTTP.TokensFile = v; return nil }},
	{"http.stateless", "AIRLOCK_HTTP_STATELESS", "stateless", "serve Streamable HTTP without sessions (for replicas behind a load balancer)",
		func(c *Config, v string) error { return setBool(&c.HTTP.Stateless, v) }},
	{"http.session_idle", "AIRLOCK_SESSION_IDLE", "session-idle", "end an HTTP session unused this long",
		func(c *Config, v string) error { return c.HTTP.SessionIdle.UnmarshalText([]byte(v)) }},
	{"http.drain_grace", "AIRLOCK_DRAIN_GRACE", "drain-grace", "after SIGTERM, how long calls in flight may finish",
		func(c *Config, v string) error { return c.HTTP.DrainGrace.UnmarshalText([]byte(v)) }},
	{"http.client_max_parallel", "AIRLOCK_CLIENT_MAX_PARALLEL", "client-max-parallel", "calls one token may have in flight (0: no limit)",
		func(c *Config, v string) error { return setInt(&c.HTTP.ClientMaxParallel, v) }},
	{"log.level", "AIRLOCK_LOG_LEVEL", "log-level", "debug, info, warn or error",
		func(c *Config, v string) error { c.Log.Level = v; return nil }},
	{"log.format", "AIRLOCK_LOG_FORMAT", "log-format", "text or json",
		func(c *Config, v string) error { c.Log.Format = v; return nil }},
	{"log.file", "AIRLOCK_LOG_FILE", "log-file", "log to this file instead of stderr",
		func(c *Config, v string) error { c.Log.File = v; return nil }},
	{"audit.path", "AIRLOCK_AUDIT", "audit", "JSONL audit log path",
		func(c *Config, v string) error { c.Audit.Path = v; return nil }},
}

// IsBool reports whether the setting's flag is a switch, given bare (--stateless) or
// as --stateless=false. (--allow-degraded keeps taking a value, as it always has.)
func (s Setting) IsBool() bool { return s.Name == "http.stateless" }

func settingByName(name string) (Setting, bool) {
	i := slices.IndexFunc(Settings, func(s Setting) bool { return s.Name == name || s.Flag == name })
	if i < 0 {
		return Setting{}, false
	}
	return Settings[i], true
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func setInt(dst *int, v string) error {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return fmt.Errorf("not an integer: %q", v)
	}
	*dst = n
	return nil
}

func setInts(dst *[]int, v string) error {
	var out []int
	for _, p := range splitList(v) {
		n, err := strconv.Atoi(p)
		if err != nil {
			return fmt.Errorf("not an integer: %q", p)
		}
		out = append(out, n)
	}
	*dst = out
	return nil
}

func setBool(dst *bool, v string) error {
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return fmt.Errorf("not a boolean: %q", v)
	}
	*dst = b
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
