// Package cli implements airlock's subcommands. Main returns the process exit code; it
// writes to stdout only through the writer it is given, and only for `run`, `probe`,
// `config` and `version` output or the stdio MCP transport.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/airlock-mcp/airlock/config"
	"github.com/airlock-mcp/airlock/internal/trust"
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/sandbox/host"
)

// Version and Commit are set at build time (the Makefile does) with -ldflags
// "-X github.com/airlock-mcp/airlock/cli.Version=v1.2.3 -X ...cli.Commit=<sha>". Without
// Commit, `airlock version` takes the commit Go's VCS stamping recorded, if any.
var (
	Version = ""
	Commit  = ""
)

// Exit codes.
const (
	exitOK      = 0
	exitFailed  = 1 // the run or the probe did not come out ok
	exitUsage   = 2 // bad flags or invalid configuration
	exitRefused = 3 // the sandbox is unavailable: nothing was run
)

// IO is the process's standard streams.
type IO struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// NewSandbox builds the isolation backend; nil means this host's (host.New). Tests
	// pass a fake.
	NewSandbox func(sandbox.Options) (sandbox.Sandbox, error)
}

// newSandbox is the backend constructor io was given, or this host's.
func (stdio IO) newSandbox() func(sandbox.Options) (sandbox.Sandbox, error) {
	if stdio.NewSandbox != nil {
		return stdio.NewSandbox
	}
	return host.New
}

// commands are the subcommands in the order usage lists them; completion scripts are
// generated from the same list and from each command's own flag set.
var commands = []struct {
	name, args, summary string
}{
	{"serve", "[--http ADDR | --sse ADDR]", "serve MCP over stdio (the default), Streamable HTTP (/mcp) or legacy SSE"},
	{"run", "[--language L] [--timeout T] [--out DIR] [FILE|-]", "run a program once; prints the result as JSON"},
	{"probe", "[--json]", "check the sandbox's isolation on this host"},
	{"config", "[--json]", "print the effective configuration (token redacted)"},
	{"completion", "bash|zsh|fish", "print a shell completion script"},
	{"version", "", "print the version, the build's commit and Go version"},
	{"help", "", "show this help"},
}

func usage() string {
	var b strings.Builder
	b.WriteString(`airlock runs untrusted code in a fresh OS sandbox per call, as an MCP tool server.

Usage:
  airlock [global flags] [command] [flags]

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-11s %s\n", c.name, c.summary)
		if c.args != "" {
			fmt.Fprintf(&b, "  %-11s   airlock %s %s\n", "", c.name, c.args)
		}
	}
	b.WriteString(`
Global flags (before or after the command):
  --config PATH         TOML configuration file (env AIRLOCK_CONFIG); see examples/airlock.toml
`)
	for _, s := range config.Settings {
		fmt.Fprintf(&b, "  --%-19s %s (env %s)\n", s.Flag+" V", s.Usage, s.Env)
	}
	b.WriteString(`
Precedence: built-in defaults < config file < AIRLOCK_* environment < flags.
Without a command airlock serves MCP on stdio. "airlock <command> --help" lists a
command's flags.
`)
	return b.String()
}

// Main runs one command.
func Main(ctx context.Context, args []string, stdio IO) int {
	cmd, args := split(args)
	switch cmd {
	case "serve":
		return serveCmd(ctx, args, stdio)
	case "run":
		return runCmd(ctx, args, stdio)
	case "probe":
		return probeCmd(ctx, args, stdio)
	case "config":
		return configCmd(ctx, args, stdio)
	case "completion":
		return completionCmd(args, stdio)
	case "version", "--version":
		fmt.Fprint(stdio.Stdout, versionText(buildInfo()))
		return exitOK
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdio.Stdout, usage())
		return exitOK
	}
	fmt.Fprintf(stdio.Stderr, "airlock: unknown command %q%s\nRun \"airlock --help\" for the commands.\n", cmd, suggest(cmd, "", commandNames()))
	return exitUsage
}

// split finds the command. Global flags may come before it (`airlock --languages
// python,bash config`): they are handed to the command as if written after it. Without
// a command the arguments are serve's.
func split(args []string) (cmd string, rest []string) {
	if len(args) == 0 {
		return "serve", nil
	}
	switch a := args[0]; {
	case !strings.HasPrefix(a, "-"):
		return a, args[1:]
	case a == "-h" || a == "-help" || a == "--help" || a == "--version":
		return a, args[1:]
	}
	fs := newFlags("", IO{Stderr: io.Discard}).fs
	if err := fs.Parse(args); err != nil {
		// A typo or a command's own flag before the command: the command's parse says
		// which (`airlock --timout 5 run x.py` is run's typo). No command: serve's flag.
		for i, a := range args {
			if slices.Contains(commandNames(), a) {
				return a, append(slices.Clone(args[:i]), args[i+1:]...)
			}
		}
		return "serve", args
	}
	if fs.NArg() == 0 || !slices.Contains(commandNames(), fs.Arg(0)) {
		return "serve", args
	}
	global := args[:len(args)-fs.NArg()]
	return fs.Arg(0), append(slices.Clone(global), fs.Args()[1:]...)
}

func commandNames() []string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return names
}

// buildInfo is the binary's embedded build information (nil when there is none).
func buildInfo() *debug.BuildInfo {
	bi, _ := debug.ReadBuildInfo()
	return bi
}

func version() string {
	if Version != "" {
		return Version
	}
	if bi := buildInfo(); bi != nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// versionText is `airlock version`: the version, then the commit the binary was built
// from (git stamps it into the build) and the Go toolchain and platform.
func versionText(bi *debug.BuildInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "airlock %s\n", version())
	commit, modified, when, goVersion := Commit, false, "", runtime.Version()
	if bi != nil {
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if commit == "" {
					commit = s.Value
				}
			case "vcs.modified":
				modified = s.Value == "true"
			case "vcs.time":
				when = s.Value
			}
		}
	}
	if commit == "" {
		commit = "unknown"
	}
	if modified {
		commit += " (with uncommitted changes)"
	}
	if when != "" {
		commit += ", " + when
	}
	fmt.Fprintf(&b, "commit: %s\n", commit)
	fmt.Fprintf(&b, "go: %s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	return b.String()
}

// common holds the flags every command shares.
type common struct {
	name  string
	stdio IO
	// quiet: a one-shot command (run, probe) whose output is the point logs warnings
	// and errors only, unless a log level was asked for; a server logs at info.
	quiet      bool
	fs         *flag.FlagSet
	configPath string
	settings   map[string]*string
}

func newFlags(name string, stdio IO) *common {
	c := &common{name: name, fs: flag.NewFlagSet("airlock "+name, flag.ContinueOnError), settings: map[string]*string{}, stdio: stdio}
	// Errors and help are written by parse: a short message with the nearest flag, not the
	// flag package's full usage after every typo.
	c.fs.SetOutput(io.Discard)
	c.fs.Usage = func() {}
	c.fs.StringVar(&c.configPath, "config", os.Getenv("AIRLOCK_CONFIG"), "TOML configuration file (env AIRLOCK_CONFIG)")
	for _, s := range config.Settings {
		usage := fmt.Sprintf("%s (env %s; file key %s)", s.Usage, s.Env, s.Name)
		if s.IsBool() {
			v := new(string)
			c.fs.Var((*switchFlag)(v), s.Flag, usage)
			c.settings[s.Name] = v
			continue
		}
		c.settings[s.Name] = c.fs.String(s.Flag, "", usage)
	}
	return c
}

// switchFlag is a boolean setting's flag: bare it means "true".
type switchFlag string

func (f *switchFlag) String() string     { return string(*f) }
func (f *switchFlag) Set(v string) error { *f = switchFlag(v); return nil }
func (f *switchFlag) IsBoolFlag() bool   { return true }

// parse parses args; ok is false when the command should exit with code.
func (c *common) parse(args []string) (code int, ok bool) {
	err := c.fs.Parse(args)
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		c.fs.SetOutput(c.stdio.Stdout)
		fmt.Fprintf(c.stdio.Stdout, "Usage of airlock %s:\n", c.name)
		c.fs.PrintDefaults()
		return exitOK, false
	}
	msg := err.Error()
	if name, found := strings.CutPrefix(msg, "flag provided but not defined: "); found {
		name = strings.TrimLeft(name, "-")
		var flags []string
		c.fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f.Name) })
		msg = "unknown flag --" + name + suggest(name, "--", flags)
	}
	fmt.Fprintf(c.stdio.Stderr, "airlock %s: %s\nRun \"airlock %s --help\" for its flags.\n", c.name, msg, c.name)
	return exitUsage, false
}

// logLevelAsked reports whether the user chose a log level: by flag, environment or
// configuration file (a level other than the default).
func (c *common) logLevelAsked(cfg config.Config) bool {
	asked := os.Getenv("AIRLOCK_LOG_LEVEL") != "" || cfg.Log.Level != config.Default().Log.Level
	c.fs.Visit(func(f *flag.Flag) { asked = asked || f.Name == "log-level" })
	return asked
}

// load builds and validates the configuration; invalid configuration is exit code 2.
func (c *common) load(stdio IO) (config.Config, bool) {
	flags := map[string]string{}
	c.fs.Visit(func(f *flag.Flag) {
		for _, s := range config.Settings {
			if s.Flag == f.Name {
				flags[s.Name] = f.Value.String()
			}
		}
	})
	err := envTypo(os.Environ())
	var cfg config.Config
	if err == nil {
		cfg, err = config.Load(c.configPath, os.Getenv, flags)
	}
	if err == nil {
		err = cfg.Validate()
	}
	if _, onArgv := flags["http.auth_token"]; err == nil && onArgv {
		err = tokenOnArgv(cfg, stdio.Stderr)
	}
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "airlock: invalid configuration:\n  %s\n", strings.ReplaceAll(err.Error(), "\n", "\n  "))
		return config.Config{}, false
	}
	return cfg, true
}

// tokenOnArgv is what a token given as --auth-token costs: the command line is every
// local user's to read (ps), and in the Landlock tier, which has no pid namespace, every
// program's: one printed the server's token to its client, who could then call as the
// "default" client. There it is refused; elsewhere said (on w: logging is not set up yet).
func tokenOnArgv(cfg config.Config, w io.Writer) error {
	if cfg.Sandbox.Isolation == sandbox.IsolationLandlock {
		return errors.New(`http.auth_token (from flag --auth-token): in the Landlock tier every program can read the server's command line: pass the token in AIRLOCK_AUTH_TOKEN or use http.tokens_file`)
	}
	fmt.Fprintln(w, "airlock: warning: the auth token is on the command line, which every local user can read (ps): pass it in AIRLOCK_AUTH_TOKEN or use http.tokens_file")
	return nil
}

// envTypo refuses a set AIRLOCK_* variable that is no setting's but is near one's name: a
// misspelt variable is otherwise ignored, and AIRLOCK_AUTH_TOKN=... on a loopback server
// served every local user without a token while its operator believed auth was on (the
// configuration file's unknown keys are refused for the same reason). Other AIRLOCK_*
// names (test and CI knobs) are left alone: only a near miss is a typo.
func envTypo(environ []string) error {
	known := []string{"CONFIG"}
	for _, s := range config.Settings {
		known = append(known, strings.TrimPrefix(s.Env, "AIRLOCK_"))
	}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		const prefix = "AIRLOCK_"
		if len(k) <= len(prefix) || !strings.EqualFold(k[:len(prefix)], prefix) || v == "" {
			continue
		}
		name := k[len(prefix):]
		if k[:len(prefix)] == prefix && slices.Contains(known, name) {
			continue
		}
		// Environment variables are case-sensitive: AIRLOCK_auth_token (or
		// airlock_network) is no setting's, and was ignored as silently as a misspelt one.
		if i := slices.IndexFunc(known, func(n string) bool { return strings.EqualFold(n, name) }); i >= 0 {
			return fmt.Errorf("unknown environment variable %s, which would be ignored (names are uppercase); did you mean AIRLOCK_%s?", k, known[i])
		}
		if k[:len(prefix)] != prefix {
			continue // another program's airlock_* name, nowhere near a setting
		}
		if hint := suggest(name, "AIRLOCK_", known); hint != "" {
			return fmt.Errorf("unknown environment variable %s, which would be ignored%s", k, hint)
		}
	}
	return nil
}

// setupLog points slog at stderr (or the configured file), never at stdout.
func setupLog(cfg config.Config, stdio IO) (func(), error) {
	var w = stdio.Stderr
	closeFn := func() {}
	if cfg.Log.File != "" {
		f, err := trust.OpenAppend(cfg.Log.File)
		if errors.Is(err, trust.ErrNotRegular) {
			// log.file = /dev/null, most likely: that is no log file.
			return nil, fmt.Errorf("open log file: %w (to log nowhere, leave log.file unset and send stderr where you like)", err)
		}
		if err != nil {
			return nil, fmt.Errorf("open log file: %w", err)
		}
		w, closeFn = f, func() { _ = f.Close() }
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.Log.Level)); err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if cfg.Log.Format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	slog.SetDefault(slog.New(h))
	return closeFn, nil
}

// loadAndLog loads the configuration and starts logging as it says; on failure it has
// already said why on stderr.
func (c *common) loadAndLog(stdio IO) (config.Config, func(), bool) {
	cfg, ok := c.load(stdio)
	if !ok {
		return cfg, nil, false
	}
	logCfg := cfg
	if c.quiet && !c.logLevelAsked(cfg) {
		logCfg.Log.Level = "warn"
	}
	closeLog, err := setupLog(logCfg, stdio)
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "airlock: %v\n", err)
		return cfg, nil, false
	}
	return cfg, closeLog, true
}
