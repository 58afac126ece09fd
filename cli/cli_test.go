package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/config"
	"github.com/airlock-mcp/airlock/runner/runnertest"
	"github.com/airlock-mcp/airlock/sandbox"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test ./cli -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test ./cli -update rewrites it):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

type result struct {
	code           int
	stdout, stderr string
}

// run runs the CLI in-process with the fake sandbox fn (nil: a healthy echo) and a clean
// AIRLOCK_* environment.
func run(t *testing.T, fn func(context.Context, sandbox.Spec) (sandbox.Result, error), stdin string, args ...string) result {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AIRLOCK_") {
			t.Setenv(k, "")
		}
	}
	if fn == nil {
		fn = runnertest.Echo
	}
	fake := &runnertest.Sandbox{Fn: fn, Report: runnertest.Report()}
	newFake := func(sandbox.Options) (sandbox.Sandbox, error) { return fake, nil }
	var out, errOut bytes.Buffer
	code := Main(context.Background(), args, IO{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut, NewSandbox: newFake})
	return result{code, out.String(), errOut.String()}
}

func TestHelpShowsTheCommands(t *testing.T) {
	r := run(t, nil, "", "--help")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	golden(t, "help.golden", r.stdout)
	for _, args := range [][]string{{"help"}, {"-h"}} {
		if again := run(t, nil, "", args...); again.stdout != r.stdout || again.code != 0 {
			t.Errorf("%v: exit %d, a different help", args, again.code)
		}
	}
}

func TestFlagTypoSuggestsTheNearestFlag(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--timout", "5"}, "airlock run: unknown flag --timout; did you mean --timeout?\nRun \"airlock run --help\" for its flags.\n"},
		{[]string{"serve", "--langauges", "python"}, "airlock serve: unknown flag --langauges; did you mean --languages?\nRun \"airlock serve --help\" for its flags.\n"},
		{[]string{"--max-paralel", "2"}, "airlock serve: unknown flag --max-paralel; did you mean --max-parallel?\nRun \"airlock serve --help\" for its flags.\n"},
		{[]string{"--timout", "5", "run", "x.py"}, "airlock run: unknown flag --timout; did you mean --timeout?\nRun \"airlock run --help\" for its flags.\n"},
		{[]string{"probe", "--zzz"}, "airlock probe: unknown flag --zzz\nRun \"airlock probe --help\" for its flags.\n"},
		{[]string{"confg"}, "airlock: unknown command \"confg\"; did you mean config?\nRun \"airlock --help\" for the commands.\n"},
	}
	for _, tt := range tests {
		r := run(t, nil, "", tt.args...)
		if r.code != exitUsage || r.stderr != tt.want || r.stdout != "" {
			t.Errorf("%v: exit %d\nstderr %q\n  want %q\nstdout %q", tt.args, r.code, r.stderr, tt.want, r.stdout)
		}
	}
}

func TestCommandHelpGoesToStdout(t *testing.T) {
	r := run(t, nil, "", "run", "--help")
	if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, "-out string") || !strings.Contains(r.stdout, "-timeout value") {
		t.Fatalf("exit %d, stderr %q, stdout %q", r.code, r.stderr, r.stdout)
	}
}

func TestGlobalFlagsBeforeTheCommand(t *testing.T) {
	r := run(t, nil, "", "--network", "host", "--max-parallel", "3", "config", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var v struct {
		Network     string `json:"network"`
		Concurrency struct {
			MaxParallel int `json:"max_parallel"`
		} `json:"concurrency"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if v.Network != "host" || v.Concurrency.MaxParallel != 3 {
		t.Errorf("flags before the command not applied: %s", r.stdout)
	}
	// The same flags after the command mean the same.
	if after := run(t, nil, "", "config", "--json", "--network", "host", "--max-parallel", "3"); after.stdout != r.stdout {
		t.Errorf("before and after differ:\n%s\n%s", r.stdout, after.stdout)
	}
}

func TestLimitErrorsInUserUnits(t *testing.T) {
	r := run(t, nil, "", "config", "--default-timeout", "10m")
	want := "airlock: invalid configuration:\n  limits.default.wall: must not exceed limits.max.wall (10m > 5m)\n"
	if r.code != exitUsage || r.stderr != want {
		t.Errorf("exit %d, stderr %q, want %q", r.code, r.stderr, want)
	}
}

func TestVersion(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "2dcfc20e0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d"},
		{Key: "vcs.time", Value: "2026-12-01T08:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	old := Version
	Version = "v1.2.3"
	t.Cleanup(func() { Version = old })
	want := "airlock v1.2.3\ncommit: 2dcfc20e0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d (with uncommitted changes), 2026-12-01T08:00:00Z\n" +
		"go: go1.26.0 " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if got := versionText(bi); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := versionText(nil); !strings.Contains(got, "commit: unknown\n") || !strings.Contains(got, runtime.Version()) {
		t.Errorf("without build info: %q", got)
	}
	// The Makefile stamps the commit itself (Go's VCS stamping may be off).
	oldCommit := Commit
	Commit = "a76ce45"
	t.Cleanup(func() { Commit = oldCommit })
	if got := versionText(&debug.BuildInfo{GoVersion: "go1.26.0"}); !strings.Contains(got, "\ncommit: a76ce45\n") {
		t.Errorf("stamped commit: %q", got)
	}
	if r := run(t, nil, "", "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "airlock v1.2.3\ncommit: a76ce45") {
		t.Errorf("airlock version: %d %q", r.code, r.stdout)
	}
}

func TestCompletion(t *testing.T) {
	for _, shell := range shells {
		r := run(t, nil, "", "completion", shell)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("%s: exit %d: %s", shell, r.code, r.stderr)
		}
		golden(t, "completion."+shell+".golden", r.stdout)
		// Every flag of every command is offered.
		for _, c := range commands {
			for _, f := range flagNames(c.name) {
				if !strings.Contains(r.stdout, strings.TrimPrefix(f, "--")) {
					t.Errorf("%s: %s %s not offered", shell, c.name, f)
				}
			}
		}
		// The script parses in its shell (where the shell is installed).
		check := map[string][]string{"bash": {"bash", "-n"}, "zsh": {"zsh", "-n"}, "fish": {"fish", "--no-execute"}}[shell]
		if _, err := exec.LookPath(check[0]); err != nil {
			if os.Getenv("AIRLOCK_REQUIRE_SHELLS") == "1" {
				t.Fatalf("%s not installed (AIRLOCK_REQUIRE_SHELLS=1)", shell)
			}
			t.Logf("NOT CHECKED: %s is not installed, so its script's syntax is not checked (the golden file still is; CI installs it)", shell)
			continue
		}
		cmd := exec.Command(check[0], check[1:]...)
		cmd.Stdin = strings.NewReader(r.stdout)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s rejects its completion script: %v\n%s", shell, err, out)
		}
	}
	if r := run(t, nil, "", "completion", "tcsh"); r.code != exitUsage || !strings.Contains(r.stderr, "bash, zsh, fish") {
		t.Errorf("unknown shell: %d %q", r.code, r.stderr)
	}
}

// TestCompletionBashCompletes drives the bash script the way bash's completion does.
func TestCompletionBashCompletes(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	script := completion("bash")
	for line, want := range map[string]string{
		"airlock con":           "config",
		"airlock run --tim":     "--timeout",
		"airlock probe --js":    "--json",
		"airlock completion fi": "fish",
	} {
		words := strings.Fields(line)
		prog := script + "\nCOMP_WORDS=(" + strings.Join(words, " ") + ")\nCOMP_CWORD=" +
			strconv.Itoa(len(words)-1) + "\n_airlock\necho \"${COMPREPLY[*]}\"\n"
		out, err := exec.Command("bash", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", line, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("%q completes to %q, want %q", line, got, want)
		}
	}
}

func TestRunReportsLoweredTimeout(t *testing.T) {
	r := run(t, nil, "print(1)", "run", "--audit", "off", "--timeout", "3600", "-")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var res struct {
		TimeoutSeconds float64 `json:"timeout_seconds"`
		Lowered        []struct {
			Limit              string
			Requested, Granted float64
		} `json:"lowered"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatal(err)
	}
	if res.TimeoutSeconds != 300 || len(res.Lowered) != 1 || res.Lowered[0].Limit != "timeout_seconds" ||
		res.Lowered[0].Requested != 3600 || res.Lowered[0].Granted != 300 {
		t.Errorf("result does not say the timeout was lowered: %s", r.stdout)
	}
	if want := "airlock run: note: --timeout 1h was lowered to 5m, the maximum (limits.max.wall)\n"; r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
}

// A run resolves only the enabled languages, but one in a language that is not enabled
// still detects them all, so that its refusal names what is installed and how to enable it.
func TestRunNotEnabledNamesInstalled(t *testing.T) {
	r := run(t, nil, "echo 1", "run", "--audit", "off", "--language", "sh", "-")
	if r.code == 0 || !strings.Contains(r.stdout, "sh is installed but not enabled") {
		t.Fatalf("exit %d, stdout %s", r.code, r.stdout)
	}
	for _, c := range []struct {
		enabled []string
		name    string
		want    bool
	}{{nil, "python3", true}, {nil, "sh", false}, {[]string{"node", "sh"}, "javascript", true}, {[]string{"sh"}, "ruby", false}} {
		if got := enabledLanguage(c.enabled, c.name); got != c.want {
			t.Errorf("enabledLanguage(%v, %q) = %v", c.enabled, c.name, got)
		}
	}
}

// artifactsFn is a sandbox whose program leaves files in its output directory, some of
// them named to escape wherever they are saved.
func artifactsFn(files map[string]string) func(context.Context, sandbox.Spec) (sandbox.Result, error) {
	return func(_ context.Context, spec sandbox.Spec) (sandbox.Result, error) {
		res := sandbox.Result{ID: spec.ID, Status: sandbox.StatusOK, Wall: time.Millisecond}
		for name, data := range files {
			res.Artifacts = append(res.Artifacts, sandbox.Artifact{Path: name, Size: int64(len(data)), SHA256: "00", Data: []byte(data)})
		}
		return res, nil
	}
}

func TestRunOutSavesArtifactsSafely(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "saved")
	outside := filepath.Join(base, "outside.txt")
	if err := os.WriteFile(outside, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A symlink planted in the target directory must not be written through.
	if err := os.Symlink(outside, filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	fn := artifactsFn(map[string]string{
		"plot.png": "png", "sub/data.csv": "a,b", "../escape.txt": "x", "/abs.txt": "x",
		"link.txt": "through the link", "evil\x1b[31m.txt": "x",
	})
	r := run(t, fn, "1", "run", "--audit", "off", "--out", dir, "-")
	if r.code != exitFailed {
		t.Errorf("exit %d, want %d: some files were refused", r.code, exitFailed)
	}
	for name, want := range map[string]string{"plot.png": "png", "sub/data.csv": "a,b"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v", name, b, err)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "precious" {
		t.Errorf("a file outside --out was overwritten through a symlink: %q", b)
	}
	for _, p := range []string{filepath.Join(base, "escape.txt"), "/abs.txt"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s written outside --out", p)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.ContainsRune(e.Name(), 0x1b) {
			t.Errorf("a name with an escape sequence was written: %q", e.Name())
		}
	}
	for _, want := range []string{"saved " + filepath.Join(dir, "plot.png") + " (3 bytes)", "not saved: out/../escape.txt: refused", "not saved: out/link.txt: exists; pass --force"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}

	// A second run does not overwrite what the first saved, unless asked; --force still
	// refuses to write through the symlink.
	fn = artifactsFn(map[string]string{"plot.png": "new", "link.txt": "through the link"})
	if r := run(t, fn, "1", "run", "--audit", "off", "--out", dir, "-"); r.code != exitFailed || !strings.Contains(r.stderr, "plot.png: exists; pass --force to overwrite it") {
		t.Errorf("overwrite without --force: exit %d\n%s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "plot.png")); string(b) != "png" {
		t.Errorf("overwritten without --force: %q", b)
	}
	r = run(t, fn, "1", "run", "--audit", "off", "--out", dir, "--force", "-")
	if b, _ := os.ReadFile(filepath.Join(dir, "plot.png")); string(b) != "new" {
		t.Errorf("--force did not overwrite: %q (%s)", b, r.stderr)
	}
	if b, _ := os.ReadFile(outside); string(b) != "precious" || !strings.Contains(r.stderr, "link.txt: exists and is not a regular file") {
		t.Errorf("--force wrote through a symlink: %q\n%s", b, r.stderr)
	}
}

func TestRunWithoutOutSaysHowToSave(t *testing.T) {
	r := run(t, artifactsFn(map[string]string{"plot.png": "png"}), "1", "run", "--audit", "off", "-")
	if r.code != 0 || r.stderr != "airlock run: 1 file(s) in out/ not saved; pass --out DIR to save them\n" {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestProbeKeepsStderrQuiet(t *testing.T) {
	r := run(t, nil, "", "probe")
	if strings.Contains(r.stderr, "level=INFO") {
		t.Errorf("probe logged at info without being asked:\n%s", r.stderr)
	}
	if !strings.Contains(r.stdout, "totals:") {
		t.Fatalf("no probe table: %s", r.stdout)
	}
	if r := run(t, nil, "", "probe", "--log-level", "info"); !strings.Contains(r.stderr, "level=INFO") {
		t.Errorf("--log-level info did not log at info:\n%s", r.stderr)
	}
}

func TestProbeUnavailableSandboxNamesThePlatform(t *testing.T) {
	fail := errors.New("no user namespaces")
	run(t, nil, "", "version") // clears the AIRLOCK_* environment
	failing := func(sandbox.Options) (sandbox.Sandbox, error) { return nil, fail }
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"probe"}, IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, NewSandbox: failing})
	first, _, _ := strings.Cut(out.String(), "\n")
	if code != exitFailed || first != "verdict: unsafe ("+runtime.GOOS+")" || !strings.Contains(out.String(), "no user namespaces") {
		t.Errorf("exit %d:\n%s", code, out.String())
	}
}

// The client examples must work as they are: every stdio entry's arguments, with serve
// swapped for config, load a valid configuration (no flag typo, no file nobody created).
func TestClientExamplesWorkAsIs(t *testing.T) {
	paths, err := filepath.Glob("../examples/*.json")
	if err != nil || len(paths) < 3 {
		t.Fatalf("examples: %v %v", paths, err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var file struct {
			MCPServers map[string]json.RawMessage `json:"mcpServers"`
			Servers    map[string]json.RawMessage `json:"servers"`
		}
		if err := json.Unmarshal(data, &file); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		entries := file.MCPServers
		if entries == nil {
			entries = file.Servers
		}
		stdio := 0
		for name, raw := range entries {
			var e struct {
				Command string            `json:"command"`
				Args    []string          `json:"args"`
				Env     map[string]string `json:"env"`
			}
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatalf("%s %s: %v", p, name, err)
			}
			if e.Command == "" {
				continue // an HTTP entry
			}
			stdio++
			// Windows: wsl.exe starts airlock inside WSL2; what follows its -e is the
			// Linux command line, held to the same rule.
			if strings.HasSuffix(strings.ToLower(e.Command), `\wsl.exe`) {
				i := slices.Index(e.Args, "-e")
				if i < 0 || i+1 >= len(e.Args) {
					t.Errorf("%s %s: wsl.exe without -e COMMAND: %q", p, name, e.Args)
					continue
				}
				e.Command, e.Args = e.Args[i+1], e.Args[i+2:]
			}
			if !filepath.IsAbs(e.Command) || len(e.Args) == 0 || e.Args[0] != "serve" {
				t.Errorf("%s %s: want an absolute command and serve, got %q %q", p, name, e.Command, e.Args)
				continue
			}
			args := append([]string{"config"}, e.Args[1:]...)
			r := run(t, nil, "", args...)
			if r.code != 0 {
				t.Errorf("%s %s: airlock %s fails as written: %s", p, name, strings.Join(e.Args, " "), r.stderr)
			}
		}
		if stdio == 0 {
			t.Errorf("%s: no stdio entry", p)
		}
	}
}

// TestRunOutNamesCannotForgeLines: a line break or tab in an artifact's name neither
// reaches the disk nor the report; each artifact is one line of stderr.
func TestRunOutNamesCannotForgeLines(t *testing.T) {
	dir := t.TempDir()
	fn := artifactsFn(map[string]string{
		"x\nairlock run: saved /etc/passwd (1 bytes)": "x",
		"tab\there.txt":   "x",
		"back\\slash.txt": "x",
	})
	r := run(t, fn, "1", "run", "--audit", "off", "--out", dir, "-")
	if r.code != exitFailed {
		t.Errorf("exit %d, want %d: every file must be refused", r.code, exitFailed)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("written: %v", entries)
	}
	if lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n"); len(lines) != 3 || strings.Contains(r.stderr, "\t") {
		t.Errorf("%d lines for 3 artifacts (a name forged a line):\n%s", len(lines), r.stderr)
	}
}

// TestRunOutForceReplacesTheFile: --force puts a new file in place of an existing one
// rather than truncating it, so the program's bytes neither take over an executable's
// mode nor reach another name of the old file (a hard link to a file outside --out).
func TestRunOutForceReplacesTheFile(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "saved")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script, other := filepath.Join(dir, "run.sh"), filepath.Join(base, "elsewhere.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho mine\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(script, other); err != nil {
		t.Fatal(err)
	}
	fn := artifactsFn(map[string]string{"run.sh": "#!/bin/sh\necho pwned\n"})
	r := run(t, fn, "1", "run", "--audit", "off", "--out", dir, "--force", "-")
	if r.code != exitOK {
		t.Fatalf("exit %d:\n%s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(script); string(b) != "#!/bin/sh\necho pwned\n" {
		t.Errorf("--force did not overwrite: %q", b)
	}
	if fi, err := os.Stat(script); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the overwritten file's mode: %v %v, want 0644 (not the old file's execute bits)", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(other); string(b) != "#!/bin/sh\necho mine\n" {
		t.Errorf("the write went through a hard link outside --out: %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left in --out: %v", entries)
	}
}

// A misspelt AIRLOCK_* variable is refused, not ignored: AIRLOCK_AUTH_TOKN on a loopback
// server served every local user without a token (TestE2EStartupErrors runs the binary
// so). The test and CI knobs, which are no setting's, still pass.
func TestEnvironmentTypoRefused(t *testing.T) {
	for _, typo := range []string{"AIRLOCK_AUTH_TOKN", "AIRLOCK_TOKEN_FILE", "AIRLOCK_NETWROK", "AIRLOCK_ISOLATON", "AIRLOCK_ALLOW_DEGRADE",
		// Names are case-sensitive: these were ignored as silently.
		"AIRLOCK_auth_token", "airlock_network", "Airlock_Tokens_File"} {
		t.Run(typo, func(t *testing.T) {
			t.Setenv(typo, "x")
			err := envTypo(os.Environ())
			if err == nil || !strings.Contains(err.Error(), typo) || !strings.Contains(err.Error(), "did you mean AIRLOCK_") {
				t.Errorf("%s: %v, want it refused with a suggestion", typo, err)
			}
		})
	}
	knobs := []string{"AIRLOCK_TEST_ROLE", "AIRLOCK_TEST_ISOLATION", "AIRLOCK_TEST_ARG", "AIRLOCK_TEST_TOKEN", "AIRLOCK_TEST_SECRET",
		"AIRLOCK_TEST_NODE_ENV", "AIRLOCK_TEST_NODE_PACKAGE", "AIRLOCK_REQUIRE_SANDBOX", "AIRLOCK_REQUIRE_SHELLS", "AIRLOCK_BIN",
		"AIRLOCK_NPM_CACHE", "AIRLOCK_MARK", "AIRLOCK_UNPRIV_CHILD", "AIRLOCK_SINGLE_UID_CHILD", "AIRLOCK_PROBE_SECRET_0A1B2C3D4E5F",
		"AIRLOCK_CONFIG", "AIRLOCK_AUTH_TOKEN", "AIRLOCK_AUTH_TOKN="}
	var env []string
	for _, k := range knobs {
		env = append(env, k+"=1")
	}
	env[len(env)-1] = "AIRLOCK_AUTH_TOKN=" // set but empty, as unset: Load ignores it too
	if err := envTypo(env); err != nil {
		t.Errorf("test and CI knobs: %v", err)
	}
}

// TestWeakeningsAreSaid: a setting that opens the sandbox is the operator's choice, and
// said on stderr where they look, not only in get_config: `airlock run --network host`
// ran with the host's network without a word.
func TestWeakeningsAreSaid(t *testing.T) {
	r := run(t, nil, "print(1)", "run", "--audit", "off", "--network", "host", "-")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "isolation weakened by configuration") || !strings.Contains(r.stderr, `network = \"host\"`) {
		t.Errorf("stderr does not say the network is the host's: %q", r.stderr)
	}
	if quiet := run(t, nil, "print(1)", "run", "--audit", "off", "-"); strings.Contains(quiet.stderr, "weakened") {
		t.Errorf("the defaults said to be weakened: %q", quiet.stderr)
	}
	for _, tc := range []struct {
		cfg  config.Config
		want []string
	}{
		{func() config.Config {
			c := config.Default()
			c.Network, c.Egress.AllowLoopback, c.Egress.AllowPrivate = "allowlist", true, true
			return c
		}(), []string{"egress.allow_loopback", "egress.allow_private"}},
		{func() config.Config {
			c := config.Default()
			c.Network, c.Egress.Domains = "allowlist", []string{"pypi.org", "*.COM"}
			return c
		}(), []string{`egress.domains "*.com" admits every name under a top-level domain`}},
		{func() config.Config {
			c := config.Default()
			c.Audit.Path = "off"
			c.Sandbox.AllowDegraded = true
			return c
		}(),
			[]string{"sandbox.allow_degraded", `audit.path = "off"`}},
	} {
		got := strings.Join(weakenings(tc.cfg, true), "; ")
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("weakenings %q lack %q", got, w)
			}
		}
	}
	if w := weakenings(config.Default(), true); len(w) != 0 {
		t.Errorf("the defaults weaken: %q", w)
	}
}

// TestRunFlagAfterTheFile: a flag after the file is not read (Go's flags stop at the
// first argument), so the run is refused, and the refusal says why and what to do.
func TestRunFlagAfterTheFile(t *testing.T) {
	r := run(t, nil, "", "run", "prog.py", "--timeout", "5")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--timeout comes after the file") || !strings.Contains(r.stderr, "before prog.py") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestLogFileDoesNotFollowASymlink: log.file is appended to by the server (root, often);
// a symlink planted there would choose the file.
func TestLogFileDoesNotFollowASymlink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "airlock.log")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	r := run(t, nil, "", "config", "--log-file", link, "--log-level", "debug")
	if r.code == 0 || !strings.Contains(r.stderr, "symlink") {
		t.Errorf("exit %d, stderr %q: want a refusal naming the symlink", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("the symlink's target was written: %q", b)
	}
}

// TestTokenOnTheCommandLine: the Landlock tier has no pid namespace, so every program can
// read the server's command line, --auth-token included (seen: a run printed it).
func TestTokenOnTheCommandLine(t *testing.T) {
	r := run(t, nil, "", "config", "--isolation", "landlock", "--auth-token", "s3cret-s3cret-s3cret")
	if r.code != exitUsage || !strings.Contains(r.stderr, "AIRLOCK_AUTH_TOKEN") || !strings.Contains(r.stderr, "Landlock tier") {
		t.Errorf("landlock with --auth-token: exit %d, stderr %q: want it refused with the fix", r.code, r.stderr)
	}
	r = run(t, nil, "", "config", "--auth-token", "s3cret-s3cret-s3cret")
	if r.code != 0 || !strings.Contains(r.stderr, "every local user can read") {
		t.Errorf("--auth-token: exit %d, stderr %q: want a warning", r.code, r.stderr)
	}
	t.Setenv("AIRLOCK_AUTH_TOKEN", "s3cret-s3cret-s3cret")
	if r := run(t, nil, "", "config", "--isolation", "landlock"); r.code != 0 || strings.Contains(r.stderr, "command line") {
		t.Errorf("the token in the environment: exit %d, stderr %q", r.code, r.stderr)
	}
}
