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

func TestEnvironments(t *testing.T) {
	p := writeFile(t, `
[environments.data]
language = "python"
path = "/opt/venvs/data"
preload = ["numpy", "matplotlib.pyplot"]
default = true

[environments.web]
language = "node"
path = "/opt/web"
`)
	c, err := Load(p, env(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	got := c.PolicyEnvironments()
	if len(got) != 2 || got[0].Name != "data" || !got[0].Default || got[0].Preload[1] != "matplotlib.pyplot" ||
		got[1].Name != "web" || got[1].Language != "node" || got[1].Path != "/opt/web" {
		t.Fatalf("environments %+v", got)
	}
	for body, field := range map[string]string{
		"[environments.data]\nlanguage = \"python\"\npath = \"/opt/a\"\ndefault = true\n[environments.more]\nlanguage = \"py\"\npath = \"/opt/b\"\ndefault = true\n": "environments.more.default",
		"[environments.data]\nlanguage = \"perl\"\npath = \"/opt/a\"\n":                                                                                              "environments.data",
		"[environments.data]\nlanguage = \"python\"\npath = \"venv\"\n":                                                                                              "environments.data",
		"[environments.Data]\nlanguage = \"python\"\npath = \"/opt/a\"\n":                                                                                            "environments.Data",
		"[environments.data]\nlanguage = \"python\"\npath = \"/opt/a\"\npreload = [\"a b\"]\n":                                                                       "environments.data",
	} {
		c, err := Load(writeFile(t, body), env(nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), field+":") {
			t.Errorf("%q: %v, want an error naming %s", body, err, field)
		}
	}
	if _, err := Load(writeFile(t, "[environments.data]\nlanguage = \"python\"\npaht = \"/opt/a\"\n"), env(nil), nil); err == nil {
		t.Error("a misspelt key was accepted")
	}
}
