package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "airlock.toml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestExampleFileIsCompleteAndValid(t *testing.T) {
	c, err := Load("../examples/airlock.toml", env(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("examples/airlock.toml does not validate: %v", err)
	}
	if got := time.Duration(c.Limits.Default.Wall); got != 30*time.Second {
		t.Errorf("default wall = %v", got)
	}
	if c.Limits.Max.Memory != 1<<30 {
		t.Errorf("max memory = %d", c.Limits.Max.Memory)
	}
}

func TestPrecedence(t *testing.T) {
	file := writeFile(t, `network = "host"
[concurrency]
max_parallel = 3
queue_timeout = "2s"
[log]
level = "warn"
`)
	tests := []struct {
		name  string
		env   map[string]string
		flags map[string]string
		check func(Config) string
	}{
		{"file over default", nil, nil, func(c Config) string {
			if c.Network != "host" || c.Concurrency.MaxParallel != 3 || c.Log.Level != "warn" {
				return "file values not applied"
			}
			if c.Concurrency.QueueSize != Default().Concurrency.QueueSize {
				return "untouched key lost its default"
			}
			return ""
		}},
		{"env over file", map[string]string{"AIRLOCK_MAX_PARALLEL": "5", "AIRLOCK_NETWORK": "none"}, nil, func(c Config) string {
			if c.Concurrency.MaxParallel != 5 || c.Network != "none" {
				return "env not applied over file"
			}
			return ""
		}},
		{"flag over env", map[string]string{"AIRLOCK_MAX_PARALLEL": "5"}, map[string]string{"max-parallel": "7"}, func(c Config) string {
			if c.Concurrency.MaxParallel != 7 {
				return "flag not applied over env"
			}
			return ""
		}},
		{"env list and duration", map[string]string{"AIRLOCK_LANGUAGES": "python, node", "AIRLOCK_QUEUE_TIMEOUT": "250ms"}, nil, func(c Config) string {
			if !reflect.DeepEqual(c.Languages.Enabled, []string{"python", "node"}) || time.Duration(c.Concurrency.QueueTimeout) != 250*time.Millisecond {
				return "list or duration not parsed"
			}
			return ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(file, env(tt.env), tt.flags)
			if err != nil {
				t.Fatal(err)
			}
			if msg := tt.check(c); msg != "" {
				t.Errorf("%s: %+v", msg, c)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name, file string
		env        map[string]string
		want       string
	}{
		{"unknown key", "netwrok = \"none\"\n", nil, "unknown keys: netwrok"},
		{"unknown nested key", "[limits.max]\nmemroy = 1\n", nil, "limits.max.memroy"},
		{"bad size", "max_code_bytes = \"lots\"\n", nil, "bad size"},
		{"bad duration", "[concurrency]\nqueue_timeout = \"soon\"\n", nil, "bad duration"},
		{"bad env int", "", map[string]string{"AIRLOCK_MAX_PARALLEL": "many"}, "concurrency.max_parallel (from AIRLOCK_MAX_PARALLEL)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(writeFile(t, tt.file), env(tt.env), nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestValidateNamesField(t *testing.T) {
	base, err := Load("../examples/airlock.toml", env(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"max memory zero", func(c *Config) { c.Limits.Max.Memory = 0 }, "limits.max.memory: must be positive"},
		{"default above max", func(c *Config) { c.Limits.Default.Wall = c.Limits.Max.Wall + 1 }, "limits.default.wall: must not exceed"},
		{"network", func(c *Config) { c.Network = "bridge" }, "network: must be"},
		{"parallel", func(c *Config) { c.Concurrency.MaxParallel = 0 }, "concurrency.max_parallel"},
		{"cgroups", func(c *Config) { c.Sandbox.Cgroups = "yes" }, "sandbox.cgroups"},
		{"addr", func(c *Config) { c.HTTP.Addr = "8080" }, "http.addr"},
		{"origin", func(c *Config) { c.HTTP.AllowedOrigins = []string{"evil.example"} }, "http.allowed_origins[0]"},
		{"no languages", func(c *Config) { c.Languages.Enabled = nil }, "languages.enabled"},
		{"relative interpreter", func(c *Config) { c.Languages.Interpreters = map[string]string{"python": "python3"} }, "languages.interpreters.python"},
		{"code cap", func(c *Config) { c.MaxCodeBytes = 0 }, "max_code_bytes: must be positive"},
		{"log level", func(c *Config) { c.Log.Level = "loud" }, "log.level"},
		{"allowlist without domains", func(c *Config) { c.Network = "allowlist" }, "egress.domains: network"},
		{"bad domain", func(c *Config) { c.Network = "allowlist"; c.Egress.Domains = []string{"*.*.org"} }, "egress.domains[0]"},
		{"bad port", func(c *Config) {
			c.Network = "allowlist"
			c.Egress.Domains = []string{"pypi.org"}
			c.Egress.Ports = []int{0}
		}, "egress.ports[0]"},
		{"no byte cap", func(c *Config) {
			c.Network = "allowlist"
			c.Egress.Domains = []string{"pypi.org"}
			c.Egress.MaxBytes = 0
		}, "egress.max_bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			c.Languages.Enabled = append([]string(nil), base.Languages.Enabled...)
			tt.mutate(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestEgressFromFile(t *testing.T) {
	p := writeFile(t, `network = "allowlist"
[egress]
domains = ["PyPI.org", "*.pythonhosted.org"]
ports = [443]
max_bytes = "1MiB"
`)
	c, err := Load(p, env(map[string]string{"AIRLOCK_EGRESS_PORTS": "443, 8443"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	e := c.SandboxEgress()
	if e == nil || !reflect.DeepEqual(e.Domains, []string{"pypi.org", "*.pythonhosted.org"}) ||
		!reflect.DeepEqual(e.Ports, []int{443, 8443}) || e.MaxBytes != 1<<20 || e.AllowPrivate || e.MaxConnections != 32 {
		t.Errorf("egress = %+v", e)
	}
	c.Network = "none"
	if c.SandboxEgress() != nil {
		t.Error("an allowlist without network allowlist")
	}
}

func TestDefaultValidates(t *testing.T) {
	c := Default()
	if c.Limits.Max.Wall == 0 {
		t.Skip("SKIP LOUDLY: policy.DefaultBounds is still the contract stub (all zero); built-in limits come from policy")
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestSizeUnits(t *testing.T) {
	for in, want := range map[string]Size{"512": 512, "1KiB": 1024, "2 MiB": 2 << 20, "1GB": 1e9} {
		var s Size
		if err := s.UnmarshalText([]byte(in)); err != nil || s != want {
			t.Errorf("%q -> %d, %v; want %d", in, s, err, want)
		}
	}
	var s Size
	if err := s.UnmarshalText([]byte("9999999999GiB")); err == nil {
		t.Error("overflowing size accepted")
	}
}

func TestClientExamplesAreValidJSON(t *testing.T) {
	for _, name := range []string{"claude_config.json", "vscode_mcp.json", "cursor_mcp.json"} {
		b, err := os.ReadFile(filepath.Join("..", "examples", name))
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Errorf("%s: %v (clients silently ignore a broken file)", name, err)
		}
	}
}
