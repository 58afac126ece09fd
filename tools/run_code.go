package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/invopop/jsonschema"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/runner"
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/sanitize"
	"github.com/airlock-mcp/airlock/session"
)

// RunCodeArgs are run_code's arguments.
type RunCodeArgs struct {
	Code           string   `json:"code"`
	Language       string   `json:"language,omitempty"`
	Environment    string   `json:"environment,omitempty"`
	TimeoutSeconds *float64 `json:"timeout_seconds,omitempty"`
	Stdin          string   `json:"stdin,omitempty"`
	Args           []string `json:"args,omitempty"`
	Files          []File   `json:"files,omitempty"`
	AllowDomains   []string `json:"allow_domains,omitempty"`
	Session        string   `json:"session,omitempty"`
	CloseSession   bool     `json:"close_session,omitempty"`
}

// File is one input file of run_code.
type File struct {
	Path     string `json:"path" jsonschema_description:"Relative path in the workspace, e.g. data/input.csv."`
	Content  string `json:"content" jsonschema_description:"The file's content: text, or base64 when encoding is base64."`
	Encoding string `json:"encoding,omitempty" jsonschema:"enum=utf8,enum=base64,default=utf8"`
}

var runCodeArgNames = []string{"code", "language", "environment", "timeout_seconds", "stdin", "args", "files", "allow_domains", "session", "close_session"}

// Violation is the import the policy refused.
type Violation struct {
	Module string `json:"module"`
	Line   int    `json:"line"`
}

// RunCodeResult is run_code's structured result.
type RunCodeResult struct {
	ID              string  `json:"id"`
	Status          string  `json:"status" jsonschema:"enum=ok,enum=error,enum=timeout,enum=memory_limit,enum=output_limit,enum=killed,enum=cancelled,enum=policy_denied,enum=sandbox_error,enum=invalid_request,enum=busy"`
	ExitCode        int     `json:"exit_code"`
	Signal          string  `json:"signal,omitempty"`
	Stdout          string  `json:"stdout"`
	Stderr          string  `json:"stderr"`
	StdoutTruncated bool    `json:"stdout_truncated"`
	StderrTruncated bool    `json:"stderr_truncated"`
	StdoutBytes     int64   `json:"stdout_bytes"`
	StderrBytes     int64   `json:"stderr_bytes"`
	WallMs          int64   `json:"wall_ms"`
	CPUMs           int64   `json:"cpu_ms"`
	PeakMemoryBytes int64   `json:"peak_memory_bytes"`
	TimeoutSeconds  float64 `json:"timeout_seconds"`
	Language        string  `json:"language"`
	LanguageVersion string  `json:"language_version"`
	Environment     string  `json:"environment,omitempty"`
	Detail          string  `json:"detail,omitempty"`
	Degraded        bool    `json:"degraded,omitempty"`
	// Isolation is the tier the run had on Linux: "namespaces" or "landlock".
	Isolation string     `json:"isolation,omitempty"`
	Violation *Violation `json:"violation,omitempty"`
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// Lowered is never silent: a call that asked for more than the server allows ran
	// with less, and must know it.
	Lowered []LoweredLimit `json:"lowered,omitempty" jsonschema:"description=Limits the call asked for above the server's maximum and the values it ran with."`
	// Network is what the program did through the egress proxy (network "allowlist").
	Network *sandbox.NetworkUse `json:"network,omitempty"`
	// The session the call ran in (session "new" or an id).
	SessionID        string `json:"session_id,omitempty" jsonschema_description:"The session the call ran in: pass it as session to continue it."`
	SessionRestarted bool   `json:"session_restarted,omitempty" jsonschema_description:"The session's processes were killed and restarted (a timeout the interpreter did not stop, the memory limit, an exit): files in the workspace are kept, variables are lost."`
	SessionClosed    bool   `json:"session_closed,omitempty" jsonschema_description:"The session has ended (close_session, or its sandbox ended); its id is no longer valid."`
}

// LoweredLimit is one limit a call asked for above the server's maximum.
type LoweredLimit struct {
	Limit     string  `json:"limit" jsonschema:"description=The argument that asked for it, e.g. timeout_seconds."`
	Requested float64 `json:"requested"`
	Granted   float64 `json:"granted" jsonschema:"description=The value the program ran with: the server's maximum."`
	Unit      string  `json:"unit" jsonschema:"enum=seconds,enum=bytes"`
	Setting   string  `json:"setting" jsonschema:"description=The server setting that holds the maximum, e.g. limits.max.wall."`
}

// loweredOf names each lowered limit after the argument that asks for it.
func loweredOf(ls []policy.Lowering) []LoweredLimit {
	var out []LoweredLimit
	for _, l := range ls {
		ll := LoweredLimit{Limit: l.Limit + "_bytes", Requested: float64(l.Requested), Granted: float64(l.Granted),
			Unit: "bytes", Setting: l.Setting}
		if l.Duration {
			ll.Requested, ll.Granted = time.Duration(l.Requested).Seconds(), time.Duration(l.Granted).Seconds()
			ll.Unit, ll.Limit = "seconds", l.Limit+"_seconds"
		}
		out = append(out, ll)
	}
	return out
}

// Statuses of calls refused before anything ran, beside the sandbox's own: the request
// itself was wrong (bad argument, language, timeout, code too large), or every slot was
// taken. Their structuredContent conforms to the output schema like any other result's.
const (
	statusInvalidRequest = "invalid_request"
	statusBusy           = "busy"
)

// maxTimeoutSeconds rejects values no operator maximum could mean (a day); smaller
// values above the maximum are clamped instead, so a model asking for "a lot" still runs.
const maxTimeoutSeconds = 24 * 60 * 60

// RunCode returns the run_code tool.
func RunCode(d Deps) server.ServerTool {
	enabled := d.Runner.Languages.Enabled()
	bounds := d.Runner.Bounds
	defLang := "python"
	if len(enabled) > 0 && !contains(enabled, defLang) {
		defLang = enabled[0]
	}
	in := reflectSchema(&RunCodeArgs{}, func(p func(string) *jsonschema.Schema) {
		p("code").Description = fmt.Sprintf("Source code to run, at most %d bytes.", d.Runner.MaxCodeBytes)
		maxLen := uint64(d.Runner.MaxCodeBytes)
		p("code").MaxLength = &maxLen
		l := p("language")
		l.Description = "Language of the code."
		l.Default = defLang
		l.Enum = nil
		for _, name := range enabled {
			l.Enum = append(l.Enum, name)
		}
		environmentSchema(p("environment"), d.Runner.Environments.Usable())
		t := p("timeout_seconds")
		t.Description = fmt.Sprintf("Wall-clock timeout in seconds (default %g, larger values are lowered to %g).",
			bounds.Default.Wall.Seconds(), bounds.Max.Wall.Seconds())
		t.Default = bounds.Default.Wall.Seconds()
		t.Minimum = json.Number("0")
		p("stdin").Description = "Text fed to the program's standard input."
		p("args").Description = "Command-line arguments passed to the program."
		fc := d.Runner.FileCaps.WithDefaults()
		f := p("files")
		f.Description = fmt.Sprintf("Input files written into the workspace before the program starts (read them by their relative path). "+
			"At most %d files, %d KiB each, %d KiB in all; paths are relative, without .. or a leading /, and unique.",
			fc.MaxFiles, fc.MaxFileBytes>>10, fc.MaxTotalBytes>>10)
		maxFiles := uint64(fc.MaxFiles)
		f.MaxItems = &maxFiles
		p("allow_domains").Description = `Only with the server's network "allowlist": narrow its allowlist for this call to these names ` +
			`(exact, or *.suffix for subdomains); each must be on the server's list. Omit to keep the whole list.`
		sessionSchema(p("session"), p("close_session"), d)
	})
	tool := mcp.NewToolWithRawSchema("run_code", runCodeDescription(d, enabled), in)
	tool.Title = "Run code in a sandbox"
	tool.RawOutputSchema = reflectSchema(&RunCodeResult{}, nil)
	tool.Annotations = mcp.ToolAnnotation{
		Title:           tool.Title,
		ReadOnlyHint:    boolPtr(false),
		DestructiveHint: boolPtr(false), // each run gets a fresh, disposable sandbox
		IdempotentHint:  boolPtr(false),
		OpenWorldHint:   boolPtr(d.Runner.Network == sandbox.NetworkHost || d.Runner.Network == sandbox.NetworkAllowlist),
	}
	return server.ServerTool{Tool: tool, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return runCode(ctx, d, req, defLang)
	}}
}

func runCodeDescription(d Deps, enabled []string) string {
	b := d.Runner.Bounds
	net := "no network access"
	switch {
	case d.Runner.Network == sandbox.NetworkHost:
		net = "the host's network"
	case d.Runner.Network == sandbox.NetworkAllowlist && d.Runner.Egress != nil:
		e := d.Runner.Egress
		net = fmt.Sprintf("network access only through an HTTP(S) proxy (the proxy variables are set; nothing else has a route) to %s on ports %s, at most %d MiB per call; "+
			"a refused connection gets HTTP 403 naming the rule", strings.Join(e.Domains, ", "), joinPorts(e.Ports), e.MaxBytes>>20)
	}
	return fmt.Sprintf(`Run a program in a fresh, single-use, isolated sandbox and return its exit status, stdout and stderr.
Languages: %s. The sandbox has %s, a private writable workspace (the current directory, at most %d MiB) and a read-only view of the interpreter; nothing persists between calls%s.
Limits per run: timeout %gs by default (at most %gs), memory %d MiB, %d processes, %d KiB of output kept per stream (head and tail when longer).
A non-ok status (error, timeout, memory_limit, ...) is reported with isError and a detail saying why.
Input files: pass "files" (path, content, encoding utf8 or base64); they are placed in the workspace and count against its size.
%s%s`,
		strings.Join(enabled, ", "), net, b.Default.Workspace>>20, sessionsNote(d), b.Default.Wall.Seconds(), b.Max.Wall.Seconds(),
		b.Default.Memory>>20, b.Default.Pids, b.Default.Output>>10, outputsDescription(d), environmentsDescription(d))
}

// mainPackages is how many packages the description names per environment.
const mainPackages = 8

func environmentSchema(p *jsonschema.Schema, envs []policy.Environment) {
	if len(envs) == 0 {
		p.Description = "Library environment to run in; this server has none."
		return
	}
	p.Description = "Library environment to run in (see the tool description for what each holds); it decides the language. Default: the language's default environment, if any."
	for _, e := range envs {
		p.Enum = append(p.Enum, e.Name)
	}
}

// environmentsDescription lists each usable environment with its main packages, so a
// model picks one before it writes an import.
func environmentsDescription(d Deps) string {
	envs := d.Runner.Environments.Usable()
	if len(envs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nEnvironments (pass \"environment\"; packages cannot be installed in the sandbox):")
	for _, e := range envs {
		fmt.Fprintf(&b, "\n- %s: %s %s", e.Name, e.Language, e.Version)
		var pkgs []string
		for _, p := range e.MainPackages(mainPackages) {
			pkgs = append(pkgs, p.Name+" "+p.Version)
		}
		if len(pkgs) > 0 {
			fmt.Fprintf(&b, " with %s", strings.Join(pkgs, ", "))
		}
		if n := len(e.Packages) - len(pkgs); n > 0 {
			fmt.Fprintf(&b, " and %d more (get_config lists them)", n)
		}
		if e.Default {
			fmt.Fprintf(&b, "; the default for %s", e.Language)
		}
		if e.Language == "python" && d.Runner.OutDir != "" && d.Runner.Artifacts.MaxFiles > 0 {
			fmt.Fprintf(&b, "; matplotlib is headless: figures shown with plt.show() or left open at exit come back as PNG images (%s/figure-N.png)", d.Runner.OutDir)
		}
	}
	return b.String()
}

func outputsDescription(d Deps) string {
	r := d.Runner
	if r.OutDir == "" || r.Artifacts.MaxFiles <= 0 {
		return "Output files are not returned on this server."
	}
	return fmt.Sprintf(`Output files: files the program writes under %[1]s/ (it exists at start; use the relative path %[1]s/, the current directory is the workspace; on Linux that is /workspace/%[1]s) come back after it exits, even when it fails: at most %[2]d files, %[3]d KiB each, %[4]d KiB in all.
PNG, JPEG, GIF and WebP images come back as image content; SVG comes back as its source in a text/plain resource, never as an image (it can hold scripts and external references); other UTF-8 text as an embedded text resource (control, escape and invisible characters removed), anything else as a base64 blob resource; file names are shown quoted, with invisible characters escaped; structuredContent.artifacts lists every file with its size, MIME type and sha256, and why any was not returned (too large, too many, symlink, hard link, not a regular file).`,
		r.OutDir, r.Artifacts.MaxFiles, r.Artifacts.MaxFileBytes>>10, r.Artifacts.MaxTotal>>10)
}

func runCode(ctx context.Context, d Deps, req mcp.CallToolRequest, defLang string) (*mcp.CallToolResult, error) {
	var args RunCodeArgs
	if err := bindStrict(req, &args, runCodeArgNames); err != nil {
		return refused("", statusInvalidRequest, "invalid arguments: "+err.Error()), nil
	}
	if raw, ok := req.GetArguments()["code"]; !ok || raw == nil {
		return refused("", statusInvalidRequest, `missing required argument "code": pass the source code to run`), nil
	}
	if args.Language == "" && args.Environment == "" && (args.Session == "" || args.Session == runner.NewSession) {
		args.Language = defLang
	}
	timeout, err := timeoutOf(args.TimeoutSeconds)
	if err != nil {
		return refused("", statusInvalidRequest, err.Error()), nil
	}
	call := runner.Call{Language: args.Language, Environment: args.Environment, Code: []byte(args.Code), Stdin: []byte(args.Stdin),
		Args: args.Args, Timeout: timeout, AllowDomains: args.AllowDomains, Session: args.Session, CloseSession: args.CloseSession}
	call.Transport, call.Client = origin(ctx, req)
	call.Principal = runner.PrincipalFrom(ctx)
	call.Owner = owner(ctx, call.Principal, d.Config.HTTP.Stateless)
	for _, f := range args.Files {
		call.Files = append(call.Files, policy.FileInput{Path: f.Path, Content: f.Content, Encoding: f.Encoding})
	}
	prog := newProgress(ctx, req)
	if prog != nil {
		call.Progress = prog.send
	}
	out, err := d.Runner.Run(ctx, call)
	if prog != nil {
		prog.stop() // no notification may follow the result
	}
	if err != nil {
		if r := hostFailure(ctx, out, err); r != nil {
			return r, nil
		}
		r := refusal(ctx, out.ID, err)
		if out.Session != "" {
			// A refused call in an open session: the session is still there (or not).
			if sc, ok := r.StructuredContent.(RunCodeResult); ok {
				sc.SessionID, sc.SessionClosed = out.Session, out.SessionClosed
				r.StructuredContent = sc
			}
		}
		return r, nil
	}
	content, list := artifactContent(out.ID, out.OutDir, out.Result.Artifacts, d.Runner.Artifacts.MaxTotal)
	res := resultOf(out, list)
	var text strings.Builder
	text.WriteString(renderRun(res, out.Limits))
	renderArtifacts(&text, out.OutDir, list)
	r := mcp.NewToolResultStructured(res, text.String())
	r.Content = append(r.Content, content...)
	r.IsError = res.Status != string(sandbox.StatusOK)
	return r, nil
}

func timeoutOf(secs *float64) (time.Duration, error) {
	if secs == nil {
		return 0, nil
	}
	s := *secs
	switch {
	case math.IsNaN(s) || math.IsInf(s, 0):
		return 0, fmt.Errorf("timeout_seconds must be a finite number")
	case s < 0:
		return 0, fmt.Errorf("timeout_seconds must not be negative, got %g", s)
	case s > maxTimeoutSeconds:
		return 0, fmt.Errorf("timeout_seconds %g is not a plausible timeout; ask for at most the maximum, or omit it for the default", s)
	case s == 0:
		return 0, nil
	}
	return max(time.Duration(s*float64(time.Second)), time.Millisecond), nil
}

// refusal is the result of a call the runner refused before the program started, with
// the status and text a model can act on.
func refusal(ctx context.Context, id string, err error) *mcp.CallToolResult {
	switch runner.FailureOf(ctx, err) {
	case runner.Refused:
		if errors.Is(err, policy.ErrCodeTooLarge) {
			return refused(id, statusInvalidRequest, "code too large: "+err.Error()+"; shorten it or split it into several calls")
		}
		if errors.Is(err, session.ErrLimit) || errors.Is(err, session.ErrBusy) {
			return refused(id, statusBusy, err.Error())
		}
		return refused(id, statusInvalidRequest, err.Error())
	case runner.Busy:
		return refused(id, statusBusy, "server busy: "+err.Error()+"; retry in a few seconds")
	case runner.Cancelled:
		return refused(id, string(sandbox.StatusCancelled), "cancelled before the program started")
	}
	if errors.Is(err, sandbox.ErrUnavailable) {
		return refused(id, string(sandbox.StatusSandboxError), "sandbox unavailable, nothing was run: "+err.Error())
	}
	return refused(id, string(sandbox.StatusSandboxError), "sandbox error, nothing reliable ran: "+err.Error())
}

// refused is an isError result for a call that ran nothing: the text as the only content
// block, and a structuredContent that validates against the output schema (clients
// check it, and 2025-06-18 says a tool with an outputSchema MUST return conforming
// structured results), with the same text as its detail and exit_code -1. The text is
// sanitized for both: it may quote what the call sent (a language, a session id).
func refused(id, status, text string) *mcp.CallToolResult {
	text = sanitize.String(text)
	res := RunCodeResult{ID: id, Status: status, ExitCode: -1, Detail: text}
	r := mcp.NewToolResultStructured(res, text)
	r.IsError = true
	return r
}

// ResultOf maps a finished run to the structured result (also printed by `airlock run`).
func ResultOf(o runner.Outcome) RunCodeResult {
	return resultOf(o, artifactList(o.ID, o.OutDir, o.Result.Artifacts))
}

func resultOf(o runner.Outcome, arts []Artifact) RunCodeResult {
	r := o.Result
	stdout, stdoutCut := streamText(r.Stdout, o.Limits.Output)
	stderr, stderrCut := streamText(r.Stderr, o.Limits.Output)
	res := RunCodeResult{
		ID: o.ID, Status: string(r.Status), ExitCode: r.ExitCode, Signal: r.Signal,
		Stdout: stdout, Stderr: stderr, StdoutTruncated: stdoutCut, StderrTruncated: stderrCut,
		StdoutBytes: r.Stdout.Total, StderrBytes: r.Stderr.Total,
		WallMs: r.Wall.Milliseconds(), CPUMs: r.CPU.Milliseconds(), PeakMemoryBytes: r.PeakMemory,
		TimeoutSeconds: o.Limits.Wall.Seconds(),
		Language:       o.Language.Name, LanguageVersion: o.Language.Version, Environment: o.Environment,
		Detail: sanitize.String(r.Detail), Degraded: o.Degraded, Lowered: loweredOf(o.Lowered),
		Isolation: r.Isolation,
	}
	if o.Violation != nil {
		// The guard reports the module the program asked for: its own string.
		res.Violation = &Violation{Module: sanitize.Escape(o.Violation.Module), Line: o.Violation.Line}
	}
	if len(arts) > 0 {
		res.Artifacts = arts
	}
	if r.Network != nil {
		res.Network = sanitizeNetwork(r.Network)
	}
	res.SessionID, res.SessionRestarted, res.SessionClosed = o.Session, o.SessionRestarted, o.SessionClosed
	return res
}

// sanitizeNetwork copies the proxy's account with the host names cleaned: they are
// what the program asked for, and so are the program's text.
func sanitizeNetwork(n *sandbox.NetworkUse) *sandbox.NetworkUse {
	out := *n
	out.Connections = make([]sandbox.Connection, len(n.Connections))
	for i, c := range n.Connections {
		c.Host = sanitize.String(c.Host)
		out.Connections[i] = c
	}
	return &out
}

func joinPorts(ports []int) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ", ")
}

// renderRun is the human-readable text block: a status line a model can act on, then
// the two streams.
func renderRun(r RunCodeResult, l sandbox.Limits) string {
	var b strings.Builder
	switch sandbox.Status(r.Status) {
	case sandbox.StatusOK:
		// A pooled program starts with its interpreter loaded: print(1) takes well
		// under a millisecond, which "in 0 ms" would misstate.
		if r.WallMs == 0 {
			b.WriteString("status: ok (exit 0) in <1 ms")
		} else {
			fmt.Fprintf(&b, "status: ok (exit 0) in %d ms", r.WallMs)
		}
	case sandbox.StatusError:
		fmt.Fprintf(&b, "status: error: the program exited with code %d", r.ExitCode)
	case sandbox.StatusTimeout:
		fmt.Fprintf(&b, "status: timeout: the program was killed at the %gs limit; make it faster or pass a larger timeout_seconds", l.Wall.Seconds())
	case sandbox.StatusMemoryLimit:
		fmt.Fprintf(&b, "status: memory_limit: the program exceeded %d MiB; use less memory", l.Memory>>20)
	case sandbox.StatusOutputLimit:
		b.WriteString("status: output_limit: the program was killed for flooding its output; print less")
	case sandbox.StatusPolicyDenied:
		b.WriteString("status: policy_denied: the import policy refused the program; do not use that module")
	case sandbox.StatusCancelled:
		b.WriteString("status: cancelled: the run was stopped before it finished")
	case sandbox.StatusSandboxError:
		b.WriteString("status: sandbox_error: the sandbox failed, nothing reliable ran; retrying may help")
	default:
		fmt.Fprintf(&b, "status: %s", r.Status)
	}
	if r.Signal != "" {
		fmt.Fprintf(&b, " (signal %s)", r.Signal)
	}
	if r.Detail != "" {
		fmt.Fprintf(&b, "\ndetail: %s", r.Detail)
	}
	if r.Violation != nil {
		fmt.Fprintf(&b, "\nviolation: import %s at line %d", quoteEscaped(r.Violation.Module), r.Violation.Line)
	}
	for _, l := range r.Lowered {
		fmt.Fprintf(&b, "\nnote: %s %g was lowered to %g, the server's maximum (%s)", l.Limit, l.Requested, l.Granted, l.Setting)
	}
	if r.Degraded {
		b.WriteString("\nwarning: the server runs in degraded isolation mode (see probe_sandbox)")
	}
	if r.Isolation == sandbox.IsolationLandlock {
		b.WriteString("\nisolation: landlock (the weaker tier: no pid, mount, network or IPC namespace; see probe_sandbox)")
	}
	if r.SessionID != "" {
		fmt.Fprintf(&b, "\nsession: %s", r.SessionID)
		switch {
		case r.SessionClosed:
			b.WriteString(" (ended)")
		case r.SessionRestarted:
			b.WriteString(" (restarted: files kept, variables lost)")
		}
	}
	if n := r.Network; n != nil {
		fmt.Fprintf(&b, "\nnetwork: %d connections allowed, %d refused; %d bytes sent, %d received", n.Allowed, n.Refused, n.Sent, n.Received)
		if n.Capped {
			fmt.Fprintf(&b, "\nnetwork: the call's byte cap of %d bytes was reached and its connections were cut; downloads may be incomplete", n.MaxBytes)
		}
	}
	fmt.Fprintf(&b, "\n--- stdout (%d bytes%s) ---\n%s", r.StdoutBytes, truncNote(r.StdoutTruncated), r.Stdout)
	fmt.Fprintf(&b, "\n--- stderr (%d bytes%s) ---\n%s", r.StderrBytes, truncNote(r.StderrTruncated), r.Stderr)
	return b.String()
}

func truncNote(t bool) string {
	if t {
		return ", truncated"
	}
	return ""
}

// progress sends notifications/progress for one call, one per snapshot the sandbox
// takes. The sandbox already paces them (a 1 s ticker); a second throttle here, by the
// time since the last one sent, dropped every tick that came a little early: about half
// of them. stop makes sure none is sent after the result: the sandbox may call send from
// its own goroutine at any time.
type progress struct {
	ctx   context.Context
	srv   *server.MCPServer
	token mcp.ProgressToken
	mu    sync.Mutex
	n     int
	done  bool
}

func newProgress(ctx context.Context, req mcp.CallToolRequest) *progress {
	if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil {
		return nil
	}
	srv := server.ServerFromContext(ctx)
	if srv == nil {
		return nil
	}
	return &progress{ctx: ctx, srv: srv, token: req.Params.Meta.ProgressToken}
}

func (p *progress) send(s sandbox.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	// The count, not the elapsed time, is the progress value: it strictly increases
	// however the ticks jitter, as the spec requires.
	p.n++
	msg := fmt.Sprintf("running %.0fs, %d bytes of output", s.Elapsed.Seconds(), s.StdoutBytes+s.StderrBytes)
	// Dropped when the notification queue is full; progress is best effort by design.
	_ = p.srv.SendNotificationToClient(p.ctx, "notifications/progress", map[string]any{
		"progressToken": p.token, "progress": p.n, "message": msg})
}

func (p *progress) stop() {
	p.mu.Lock()
	p.done = true
	p.mu.Unlock()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
