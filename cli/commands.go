package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/airlock-mcp/airlock/config"
	"github.com/airlock-mcp/airlock/egress"
	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/probe"
	"github.com/airlock-mcp/airlock/runner"
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/serve"
	"github.com/airlock-mcp/airlock/tools"
)

// serveFlags are serve's flags: the shared ones and the transport's.
func serveFlags(stdio IO) (c *common, httpAddr, sseAddr *string) {
	c = newFlags("serve", stdio)
	httpAddr = c.fs.String("http", "", "serve Streamable HTTP on this address (e.g. 127.0.0.1:8765) instead of stdio")
	sseAddr = c.fs.String("sse", "", "serve the legacy SSE transport on this address instead of stdio")
	return c, httpAddr, sseAddr
}

func serveCmd(ctx context.Context, args []string, stdio IO) int {
	c, httpAddr, sseAddr := serveFlags(stdio)
	if code, ok := c.parse(args); !ok {
		return code
	}
	if c.fs.NArg() > 0 {
		fmt.Fprintf(stdio.Stderr, "airlock serve: unexpected argument %q\n", c.fs.Arg(0))
		return exitUsage
	}
	if *httpAddr != "" && *sseAddr != "" {
		fmt.Fprintln(stdio.Stderr, "airlock serve: choose one of --http and --sse")
		return exitUsage
	}
	cfg, closeLog, ok := c.loadAndLog(stdio)
	if !ok {
		return exitUsage
	}
	defer closeLog()
	serve.LimitProcs()
	addr := *httpAddr + *sseAddr
	var clients *serve.Clients
	if addr != "" {
		var err error
		if clients, err = serve.NewClients(cfg.HTTP.AuthToken, cfg.HTTP.TokensFile); err != nil {
			fmt.Fprintf(stdio.Stderr, "airlock: %v\n", err)
			return exitUsage
		}
		if err := serve.CheckBind(addr, clients.Enabled()); err != nil {
			fmt.Fprintf(stdio.Stderr, "airlock: %v\n", err)
			return exitUsage
		}
		if err := egress.CheckServerPort(cfg.SandboxEgress(), addr); err != nil {
			fmt.Fprintf(stdio.Stderr, "airlock: %v\n", err)
			return exitUsage
		}
	}
	log := slog.Default().With("component", "serve")
	deps, err := build(ctx, cfg, true, stdio.newSandbox(), nil)
	if err != nil {
		log.Error("refusing to serve: no usable sandbox", "err", err)
		fmt.Fprintf(stdio.Stderr, "airlock: refusing to serve: %v\n", err)
		return exitRefused
	}
	if addr != "" {
		return serveHTTP(ctx, cfg, deps, httpListen{addr: addr, sse: *sseAddr != "", clients: clients}, stdio, log)
	}
	deps.Transport = "stdio"
	if err := startupCheck(ctx, deps, cfg, log); err != nil {
		fmt.Fprintf(stdio.Stderr, "airlock: refusing to serve: %v\n", err)
		return exitRefused
	}
	if stop := warm(deps, cfg, log); stop != nil {
		defer stop()
	}
	srv := serve.New(deps)
	log.Info("serving MCP on stdio", "version", deps.Version, "languages", deps.Runner.Languages.Enabled())
	err = serve.Stdio(ctx, srv, stdio.Stdin, stdio.Stdout, serve.StdioOptions{
		MaxLine:     int(cfg.HTTP.MaxBodyBytes),
		MaxInFlight: cfg.Concurrency.MaxParallel + cfg.Concurrency.QueueSize + 32,
		Log:         slog.Default(),
	})
	if err != nil {
		log.Error("stdio", "err", err)
		return exitFailed
	}
	log.Info("stdio closed, exiting")
	return exitOK
}

// runMemoryLimit is where a one-shot run's garbage collector starts to work.
const runMemoryLimit = 256 << 20

// runOpts are run's own flags.
type runOpts struct {
	lang    *string
	timeout config.Duration
	out     *string
	force   *bool
	recheck *bool
}

func runFlags(stdio IO) (*common, *runOpts) {
	c := newFlags("run", stdio)
	c.quiet = true
	o := &runOpts{}
	o.lang = c.fs.String("language", "", "language of the program (default: python, or the first enabled)")
	c.fs.TextVar(&o.timeout, "timeout", config.Duration(0), "wall-clock timeout: seconds or a duration like 1m30s (default: the configured default)")
	o.out = c.fs.String("out", "", "save the files the program leaves in its output directory here (created if missing)")
	o.force = c.fs.Bool("force", false, "with --out: overwrite files that already exist")
	o.recheck = c.fs.Bool("recheck", false, "run the sandbox's full self-check even if one passed recently for this binary, kernel and settings")
	return c, o
}

func runCmd(ctx context.Context, args []string, stdio IO) int {
	// A one-shot run allocates a few MiB, most of it the packages' init garbage: the
	// collector's one cycle over it cost ~2 ms of CPU (gctrace), a tenth of what the run
	// adds to the program. It runs only past a memory limit instead (the output a run
	// holds is capped far below it).
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(runMemoryLimit))
	c, o := runFlags(stdio)
	if code, ok := c.parse(args); !ok {
		return code
	}
	go warmEncoders()
	if c.fs.NArg() > 1 {
		msg := "give one FILE, or - for stdin"
		if rest := c.fs.Args()[1:]; strings.HasPrefix(rest[0], "-") && rest[0] != "-" {
			// Go's flags stop at the first argument that is not one: a flag after the file
			// was not taken, and the run must not go ahead without it.
			msg = fmt.Sprintf("%s comes after the file, where flags are not read: put the flags before %s", rest[0], c.fs.Arg(0))
		}
		fmt.Fprintf(stdio.Stderr, "airlock run: %s\n", msg)
		return exitUsage
	}
	cfg, closeLog, ok := c.loadAndLog(stdio)
	if !ok {
		return exitUsage
	}
	defer closeLog()
	var saver *saver
	if *o.out != "" {
		s, err := newSaver(*o.out, *o.force)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "airlock run: --out: %v\n", err)
			return exitUsage
		}
		defer s.close()
		saver = s
	}
	code, err := readProgram(c.fs.Arg(0), stdio.Stdin, int64(cfg.MaxCodeBytes))
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "airlock run: %v\n", err)
		return exitUsage
	}
	deps, err := build(ctx, cfg, true, stdio.newSandbox(), &oneShot{stamps: runStamps(cfg, *o.recheck),
		enabledOnly: *o.lang == "" || enabledLanguage(cfg.Languages.Enabled, *o.lang)})
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "airlock: refusing to run: %v\n", err)
		return exitRefused
	}
	defer closeSandbox(deps)
	if *o.lang == "" {
		*o.lang = "python"
		if en := deps.Runner.Languages.Enabled(); len(en) > 0 && !contains(en, "python") {
			*o.lang = en[0]
		}
	}
	out, err := deps.Runner.Run(ctx, runner.Call{Language: *o.lang, Code: code, Timeout: time.Duration(o.timeout)})
	enc := json.NewEncoder(stdio.Stdout)
	enc.SetIndent("", "  ")
	if err != nil {
		_ = enc.Encode(map[string]string{"status": "refused", "error": err.Error()})
		if errors.Is(err, sandbox.ErrUnavailable) {
			return exitRefused
		}
		return exitFailed
	}
	res := tools.ResultOf(out)
	if err := enc.Encode(res); err != nil {
		return exitFailed
	}
	for _, l := range out.Lowered {
		fmt.Fprintf(stdio.Stderr, "airlock run: note: %s\n", cliLowering(l))
	}
	saved := saveArtifacts(saver, out.OutDir, out.Result.Artifacts, stdio.Stderr)
	if out.Result.Status != sandbox.StatusOK || !saved {
		return exitFailed
	}
	return exitOK
}

// warmEncoders builds encoding/json's encoders for the two records a run writes after
// its program has exited, the audit line and the answer: a type's first encoding
// reflects over it (0.17 and 0.11 ms here), and both are on the way from the program's
// exit to the answer. Run beside the run's start, on the CPU its zygote leaves idle, it
// takes that off the answer's path (exit to answer −0.21…−0.25 ms in two 40-run perf
// traces at a load of 5); the encodings it makes are thrown away. Nothing in it may end
// the run: a panic (a zero Outcome a later ResultOf cannot take) is dropped.
func warmEncoders() {
	defer func() { _ = recover() }()
	_, _ = json.Marshal(runner.AuditRecord{})
	_, _ = json.Marshal(tools.ResultOf(runner.Outcome{}))
}

// enabledLanguage reports whether name is one of the enabled languages (none: the
// default). A run in any other is refused, and detecting every language lets the refusal
// say which are installed.
func enabledLanguage(enabled []string, name string) bool {
	if len(enabled) == 0 {
		enabled = []string{policy.DefaultLanguage}
	}
	canon, ok := policy.Canonical(name)
	return ok && slices.ContainsFunc(enabled, func(e string) bool {
		c, _ := policy.Canonical(e)
		return c == canon
	})
}

// cliLowering says a lowered limit in the flag's terms ("--timeout 1h was lowered to 5m").
func cliLowering(l policy.Lowering) string {
	if l.Limit == "timeout" {
		return "--" + l.String()
	}
	return l.String()
}

// readProgram reads FILE, or stdin for "-" or no name, refusing more than max bytes.
func readProgram(name string, stdin io.Reader, max int64) ([]byte, error) {
	r := stdin
	if name != "" && name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("read program: %w", err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("program is larger than max_code_bytes (%s)", policy.FormatSize(max))
	}
	return b, nil
}

// jsonFlags are the flags of probe and config: the shared ones and --json.
func jsonFlags(name, what string, stdio IO) (*common, *bool) {
	c := newFlags(name, stdio)
	return c, c.fs.Bool("json", false, "print the "+what+" as JSON")
}

func probeCmd(ctx context.Context, args []string, stdio IO) int {
	c, asJSON := jsonFlags("probe", "report", stdio)
	c.quiet = true
	if code, ok := c.parse(args); !ok {
		return code
	}
	cfg, closeLog, ok := c.loadAndLog(stdio)
	if !ok {
		return exitUsage
	}
	defer closeLog()
	deps, buildErr := build(ctx, cfg, false, stdio.newSandbox(), nil)
	if deps.Prober == nil {
		fmt.Fprintf(stdio.Stderr, "airlock probe: %v\n", buildErr)
		return exitFailed
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if buildErr == nil {
		deps.Runner.CheckEnvironments(pctx)
	}
	rep, err := deps.Prober.Run(pctx, probe.Filter{})
	if err != nil {
		// The sandbox could not even start: that is the unsafe verdict, with the reason.
		rep = probe.NewReport(sandbox.Report{Platform: runtime.GOOS}, nil)
		rep.Verdict = probe.Unsafe
		rep.Fixes = append(rep.Fixes, err.Error())
	}
	if *asJSON {
		enc := json.NewEncoder(stdio.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		text := tools.RenderReport(rep)
		if isTerminal(stdio.Stdout) {
			text = colour(text)
		}
		fmt.Fprint(stdio.Stdout, text)
	}
	if rep.Verdict != probe.Isolated {
		return exitFailed
	}
	return exitOK
}

func configCmd(ctx context.Context, args []string, stdio IO) int {
	c, asJSON := jsonFlags("config", "configuration", stdio)
	if code, ok := c.parse(args); !ok {
		return code
	}
	cfg, closeLog, ok := c.loadAndLog(stdio)
	if !ok {
		return exitUsage
	}
	defer closeLog()
	deps, buildErr := build(ctx, cfg, false, stdio.newSandbox(), nil)
	if deps.Runner == nil {
		fmt.Fprintf(stdio.Stderr, "airlock config: %v\n", buildErr)
		return exitFailed
	}
	v := tools.EffectiveConfig(ctx, deps)
	if *asJSON {
		enc := json.NewEncoder(stdio.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
	} else {
		fmt.Fprint(stdio.Stdout, tools.RenderConfig(v))
	}
	return exitOK
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && os.Getenv("NO_COLOR") == ""
}

// colour highlights the words that matter in a probe table.
func colour(s string) string {
	for word, code := range map[string]string{"MISSING": "31", "failed": "31", "unsafe": "31",
		"degraded": "33", "error": "33", "isolated": "32", "passed": "32"} {
		s = replaceWord(s, word, "\x1b["+code+"m"+word+"\x1b[0m")
	}
	return s
}

func replaceWord(s, word, with string) string {
	out := []byte{}
	for i := 0; i < len(s); {
		if len(s)-i >= len(word) && s[i:i+len(word)] == word && (i == 0 || !isLetter(s[i-1])) &&
			(i+len(word) == len(s) || !isLetter(s[i+len(word)])) {
			out = append(out, with...)
			i += len(word)
			continue
		}
		out = append(out, s[i])
		i++
	}
	return string(out)
}

func isLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b == '_' }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
