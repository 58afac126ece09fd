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
	"runtime/debug"
	"strings"

	"github.com/airlock-mcp/airlock/config"
)

// Version is set at build time with -ldflags "-X github.com/airlock-mcp/airlock/cli.Version=v1.2.3".
var Version = ""

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
}

const usage = `airlock runs untrusted code in a fresh OS sandbox per call, as an MCP tool server.

Usage:
  airlock [serve] [flags]             serve MCP over stdio (the default)
  airlock serve --http 127.0.0.1:PORT serve MCP over Streamable HTTP at /mcp
  airlock serve --sse 127.0.0.1:PORT  serve MCP over the legacy SSE transport (/sse, /message)
  airlock run [--language L] [--timeout S] [FILE|-]
                                      run a program once; prints the result as JSON
  airlock probe [--json]              check the sandbox's isolation on this host
  airlock config [--json]             print the effective configuration (token redacted)
  airlock version                     print the version

Every command accepts --config PATH (TOML) and the settings below; precedence is
defaults < config file < AIRLOCK_* environment < flags. Run "airlock <command> --help".
`

// Main runs one command.
func Main(ctx context.Context, args []string, stdio IO) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serveCmd(ctx, args, stdio)
	case "run":
		return runCmd(ctx, args, stdio)
	case "probe":
		return probeCmd(ctx, args, stdio)
	case "config":
		return configCmd(ctx, args, stdio)
	case "version":
		fmt.Fprintln(stdio.Stdout, "airlock", version())
		return exitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdio.Stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stdio.Stderr, "airlock: unknown command %q\n\n%s", cmd, usage)
	return exitUsage
}

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// common holds the flags every command shares.
type common struct {
	fs         *flag.FlagSet
	configPath string
	settings   map[string]*string
}

func newFlags(name string, stdio IO) *common {
	c := &common{fs: flag.NewFlagSet("airlock "+name, flag.ContinueOnError), settings: map[string]*string{}}
	c.fs.SetOutput(stdio.Stderr)
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
	if err := c.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return 0, true
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
	cfg, err := config.Load(c.configPath, os.Getenv, flags)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "airlock: invalid configuration:\n  %s\n", strings.ReplaceAll(err.Error(), "\n", "\n  "))
		return config.Config{}, false
	}
	return cfg, true
}

// setupLog points slog at stderr (or the configured file), never at stdout.
func setupLog(cfg config.Config, stdio IO) (func(), error) {
	var w = stdio.Stderr
	closeFn := func() {}
	if cfg.Log.File != "" {
		f, err := os.OpenFile(cfg.Log.File, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
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
	closeLog, err := setupLog(cfg, stdio)
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "airlock: %v\n", err)
		return cfg, nil, false
	}
	return cfg, closeLog, true
}
