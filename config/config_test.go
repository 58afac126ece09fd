package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
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

// The example claims to show the defaults: copying it must change nothing. Every key it
// sets equals the built-in value, and every key of the configuration appears in it, set
// or commented out, so a new setting or a changed default fails here until the example
// says so too.
func TestExampleShowsTheDefaults(t *testing.T) {
	const example = "../examples/airlock.toml"
	c, err := Load(example, env(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("%s does not validate: %v", example, err)
	}
	// An empty list in the file is the default's nil list.
	for _, l := range []*[]string{&c.Imports.DenyImport, &c.Imports.DenyFrom, &c.HTTP.AllowedOrigins} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	if want := Default(); !reflect.DeepEqual(c, want) {
		got, _ := json.MarshalIndent(c, "", "  ")
		def, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("%s differs from the built-in defaults:\n%s", example, lineDiff(string(got), string(def)))
	}
	text, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range configKeys(t) {
		if !exampleMentions(string(text), key) {
			t.Errorf("%s does not show the key %s", example, key)
		}
	}
}

// configKeys lists every dotted key of the configuration as TOML writes it.
func configKeys(t *testing.T) []string {
	t.Helper()
	c := Default()
	c.Languages.Interpreters = map[string]string{"python": "/usr/bin/python3"}
	c.HTTP.AuthToken, c.Log.File, c.Audit.Path, c.Sandbox.StateDir = "x", "x", "x", "x"
	var buf strings.Builder
	if err := toml.NewEncoder(&buf).Encode(c); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if _, err := toml.Decode(buf.String(), &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok && k != "interpreters" {
				walk(prefix+k+".", sub)
				continue
			}
			keys = append(keys, prefix+k)
		}
	}
	walk("", m)
	sort.Strings(keys)
	return keys
}

// exampleMentions reports whether the example sets key, or shows it commented out, in
// the key's table.
func exampleMentions(text, key string) bool {
	table, name := "", key
	if i := strings.LastIndex(key, "."); i >= 0 {
		table, name = key[:i], key[i+1:]
	}
	current := ""
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			current = strings.Trim(line, "[]")
			continue
		}
		line = strings.TrimSpace(strings.TrimPrefix(line, "#"))
		if current == table && (strings.HasPrefix(line, name+" =") || strings.HasPrefix(line, name+"=")) {
			return true
		}
	}
	return false
}

func lineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var b strings.Builder
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			fmt.Fprintf(&b, "  example: %s\n  default: %s\n", gl, wl)
		}
	}
	return b.String()
}

func TestLimitErrorsInUserUnits(t *testing.T) {
	for flags, want := range map[string]string{
		"default-timeout=10m": "limits.default.wall: must not exceed limits.max.wall (10m > 5m)",
		"memory=8GiB":         "limits.default.memory: must not exceed limits.max.memory (8GiB > 4GiB)",
	} {
		k, v, _ := strings.Cut(flags, "=")
		c, err := Load("", env(nil), map[string]string{k: v})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err == nil || err.Error() != want {
			t.Errorf("--%s: got %v, want %q", flags, err, want)
		}
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
		// Two keys to TOML and to a reader; one field to a case-folding decoder, the last
		// one's value winning.
		{"key under case folding", "network = \"none\"\nNETWORK = \"host\"\n", nil, "keys are case-sensitive (lowercase), and these are a setting's only under case folding: NETWORK"},
		{"nested key under case folding", "[sandbox]\ncgroups = \"require\"\nCgroups = \"off\"\n", nil, "sandbox.Cgroups"},
		{"table under case folding", "[Limits.default]\nmemory = \"512MiB\"\n", nil, "Limits"},
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
		{"isolation", func(c *Config) { c.Sandbox.Isolation = "chroot" }, "sandbox.isolation: must be"},
		{"landlock with host network", func(c *Config) { c.Sandbox.Isolation = "landlock"; c.Network = "host" }, `sandbox.isolation: "landlock" runs only with network = "none"`},
		{"addr", func(c *Config) { c.HTTP.Addr = "8080" }, "http.addr"},
		{"origin", func(c *Config) { c.HTTP.AllowedOrigins = []string{"evil.example"} }, "http.allowed_origins[0]"},
		{"no languages", func(c *Config) { c.Languages.Enabled = nil }, "languages.enabled"},
		{"relative interpreter", func(c *Config) { c.Languages.Interpreters = map[string]string{"python": "python3"} }, "languages.interpreters.python"},
		{"code cap", func(c *Config) { c.MaxCodeBytes = 0 }, "max_code_bytes: must be positive"},
		{"artifact size cap zero", func(c *Config) { c.Artifacts.MaxFileBytes = 0 }, "artifacts.max_file_bytes: must be positive"},
		{"artifact total cap zero", func(c *Config) { c.Artifacts.MaxTotal = 0 }, "artifacts.max_total: must be positive"},
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
	// -(2^34)+1 GiB is 2^30 modulo 2^64: a negative size must not wrap into a positive one.
	if err := s.UnmarshalText([]byte("-17179869183GiB")); err == nil {
		t.Errorf("a negative size that wraps around accepted as %d", s)
	}
}

// TestConfigFileOthersCouldWrite: the configuration file chooses the server's
// isolation, so one another user could have written is refused, as the tokens file is.
func TestConfigFileOthersCouldWrite(t *testing.T) {
	for _, mode := range []os.FileMode{0o620, 0o602, 0o666} {
		p := writeFile(t, "network = \"host\"\n")
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p, env(nil), nil); err == nil || !strings.Contains(err.Error(), "chmod go-w") {
			t.Errorf("a config file of mode %04o: %v, want it refused", mode, err)
		}
	}
	for _, mode := range []os.FileMode{0o600, 0o644, 0o400} {
		p := writeFile(t, "network = \"none\"\n")
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p, env(nil), nil); err != nil {
			t.Errorf("a config file of mode %04o: %v", mode, err)
		}
	}
	if os.Geteuid() != 0 {
		t.Log("not root: another user's config file is not tried (the root run tries it)")
		return
	}
	p := writeFile(t, "network = \"host\"\n")
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p, env(nil), nil); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Errorf("another user's config file: %v, want it refused", err)
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

// TestEgressLoopbackIsItsOwnSetting: allow_private does not carry allow_loopback with it.
func TestEgressLoopbackIsItsOwnSetting(t *testing.T) {
	for _, tc := range []struct {
		toml            string
		private, looped bool
	}{
		{"allow_private = true\n", true, false},
		{"allow_loopback = true\n", false, true},
	} {
		c, err := Load(writeFile(t, "network = \"allowlist\"\n[egress]\ndomains = [\"index.internal\"]\nports = [8080]\n"+tc.toml), env(nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		if e := c.SandboxEgress(); e.AllowPrivate != tc.private || e.AllowLoopback != tc.looped {
			t.Errorf("%q: allow_private=%t allow_loopback=%t", tc.toml, e.AllowPrivate, e.AllowLoopback)
		}
	}
}

// TestEgressAddressEntriesRefusedAtLoad: an allowlist entry the proxy would refuse on
// every connection (an address no setting opens, or one whose setting is off) or a
// number that resolvers read as an address is refused when the config loads, naming the
// entry and the fix; with the setting that opens it, an address entry loads.
func TestEgressAddressEntriesRefusedAtLoad(t *testing.T) {
	load := func(toml string) error {
		c, err := Load(writeFile(t, toml), env(nil), nil)
		if err != nil {
			return err
		}
		return c.Validate()
	}
	for _, tc := range []struct {
		entry, want, opens string
	}{
		{"169.254.169.254", "no setting opens", ""},
		{"[fd00:ec2::254]", "no setting opens", ""},
		{"0.0.0.0", "unspecified address, which no setting opens", ""},
		{"[::]", "no setting opens", ""},
		{"224.0.0.1", "multicast address", ""},
		{"255.255.255.255", "reserved address", ""},
		{"127.0.0.1", "egress.allow_loopback = true", "allow_loopback = true\n"},
		{"[::1]", "egress.allow_loopback = true", "allow_loopback = true\n"},
		{"::ffff:127.0.0.1", "egress.allow_loopback = true", "allow_loopback = true\n"},
		{"[64:ff9b::7f00:1]", "egress.allow_loopback = true", "allow_loopback = true\n"},
		{"10.1.2.3", "egress.allow_private = true", "allow_private = true\n"},
		{"[fe80::1]", "egress.allow_private = true", "allow_private = true\n"},
		{"127.1", "inet_aton", ""},
		{"0x7f.1", "inet_aton", ""},
		{"0x7f.0x0.0x0.0x1", "inet_aton", ""},
		{"0177.0.0.1", "inet_aton", ""},
		{"2130706433", "inet_aton", ""},
		{"0x7f000001", "inet_aton", ""},
		{"127.0.0.1.", "egress.allow_loopback = true", "allow_loopback = true\n"},
		{"*.example.0x1", "inet_aton", ""},
	} {
		t.Run(tc.entry, func(t *testing.T) {
			toml := fmt.Sprintf("network = \"allowlist\"\n[egress]\ndomains = [\"pypi.org\", %q]\nports = [443]\n", tc.entry)
			err := load(toml)
			if err == nil || !strings.Contains(err.Error(), "egress.domains[1]") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want egress.domains[1] and %q", err, tc.want)
			}
			// The address metadata rules never open, even with both settings on.
			if err := load(toml + "allow_private = true\nallow_loopback = true\n"); (err == nil) != (tc.opens != "") && tc.want != "inet_aton" {
				t.Errorf("with both settings on: err = %v", err)
			}
			if tc.opens != "" {
				if err := load(toml + tc.opens); err != nil {
					t.Errorf("with %s: %v", strings.TrimSpace(tc.opens), err)
				}
			}
		})
	}
	// A name with a number inside, not at the end, is a name.
	if err := load("network = \"allowlist\"\n[egress]\ndomains = [\"1e100.net\", \"10.example.org\", \"*.0x7f.example\"]\nports = [443]\n"); err != nil {
		t.Errorf("names with numeric labels refused: %v", err)
	}
}

// A configuration file is a regular file of a bounded size: a FIFO blocked the server's
// start for ever in open(2) (nothing is ever written to it), and a multi-GiB file the
// operator named by mistake (a log) was read whole into memory before any key was
// looked at.
func TestConfigFileMustBeARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "airlock.toml")
	if err := mkfifo(fifo); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	huge := writeFile(t, "network = \"none\"\n"+strings.Repeat("# padding\n", maxConfigBytes/10+1))
	for _, tt := range []struct{ name, path, want string }{
		{"fifo", fifo, "not a regular file"},
		{"directory", dir, "not a regular file"},
		{"huge", huge, "larger than"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() { _, err := Load(tt.path, env(nil), nil); done <- err }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Load(%s) = %v, want it refused (%q)", tt.name, err, tt.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("Load(%s) still blocked after 10s", tt.name)
			}
		})
	}
}

// A limit each sandbox sets as an rlimit with soft = hard cannot be above the server's
// own hard limit: the sandbox cannot raise a hard limit (no CAP_SYS_RESOURCE in the
// host's user namespace), so every run failed at setup with a bare "setrlimit:
// operation not permitted" (open_files = 30000 under a server with ulimit -Hn 20000).
// Validate names the setting, the ceiling and both fixes.
func TestLimitsAboveTheServersHardRlimits(t *testing.T) {
	c := Default()
	c.Limits.Default.OpenFiles, c.Limits.Max.OpenFiles = 30000, 30000
	err := c.validateCeilings(Ceilings{OpenFiles: 20000, Procs: Unlimited, FileSize: Unlimited, CPU: Unlimited, AddressSpace: Unlimited})
	if err == nil || !strings.Contains(err.Error(), "limits.default.open_files") || !strings.Contains(err.Error(), "20000") ||
		!strings.Contains(err.Error(), "--ulimit") {
		t.Fatalf("open_files above the hard RLIMIT_NOFILE: %v, want it refused with the ceiling and the fix", err)
	}
	c = Default()
	for _, tt := range []struct {
		name string
		ceil Ceilings
		want string
	}{
		{"pids", Ceilings{OpenFiles: Unlimited, Procs: 10, FileSize: Unlimited, CPU: Unlimited, AddressSpace: Unlimited}, "limits.default.pids"},
		{"file size", Ceilings{OpenFiles: Unlimited, Procs: Unlimited, FileSize: 1 << 20, CPU: Unlimited, AddressSpace: Unlimited}, "limits.default.file_size"},
		{"cpu", Ceilings{OpenFiles: Unlimited, Procs: Unlimited, FileSize: Unlimited, CPU: 60, AddressSpace: Unlimited}, "limits.max.cpu"},
		{"address space", Ceilings{OpenFiles: Unlimited, Procs: Unlimited, FileSize: Unlimited, CPU: Unlimited, AddressSpace: 1 << 30}, "limits.max.memory"},
	} {
		if err := c.validateCeilings(tt.ceil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want it refused naming %s", tt.name, err, tt.want)
		}
	}
	if err := c.validateCeilings(Ceilings{OpenFiles: 4096, Procs: 4096, FileSize: Unlimited, CPU: Unlimited, AddressSpace: Unlimited}); err != nil {
		t.Errorf("the defaults under podman's --ulimit nofile=4096 nproc=4096: %v", err)
	}
	// This host's own ceilings: the defaults must serve here.
	if err := c.Validate(); err != nil {
		t.Errorf("the defaults on this host: %v", err)
	}
}
