// Package runner is the one place that turns a request into a sandbox run. The run_code
// tool, `airlock run` and the probes all go through it, so validation, limits, the
// import policy, concurrency and the audit line are the same everywhere.
package runner

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/airlock-mcp/airlock/egress"
	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/sanitize"
	"github.com/airlock-mcp/airlock/session"
)

// Languages is the part of *policy.Registry the runner needs.
type Languages interface {
	Lookup(name string) (policy.Language, error)
	Enabled() []string
	Languages() []policy.Language
}

// Call is one request to run code.
type Call struct {
	Language string
	// Environment names a configured environment; empty: the language's default
	// environment, if there is one.
	Environment string
	Code        []byte
	Stdin       []byte
	Args        []string
	// Files are placed in the workspace before the program starts; policy.Files
	// validates them against Runner.FileCaps.
	Files []policy.FileInput
	// Timeout is the requested wall-clock limit; zero means the default. It is clamped
	// to the operator's maximum.
	Timeout time.Duration
	// AllowDomains narrows the operator's egress allowlist for this call (network
	// "allowlist" only); empty keeps it whole. It can never widen it.
	AllowDomains []string
	// Progress, when set, receives snapshots while the program runs. It must not block.
	Progress func(sandbox.Progress)
	// Transport and Client say where the call came from, for the audit log; Principal
	// is the authenticated client name (the token's), which the per-client limit counts.
	Transport string
	Client    string
	Principal string
	// Session is "new" to start a session, a session id to continue one, or empty for
	// a single-use call; CloseSession ends it after the call. Owner is who the session
	// belongs to (see tools' owner): only the same owner may use its id.
	Session      string
	CloseSession bool
	Owner        string
}

// Outcome is how a call ended when the sandbox ran it.
type Outcome struct {
	ID       string
	Language policy.Language
	// Environment is the name of the environment the call ran in, if any.
	Environment string
	Limits      sandbox.Limits
	// Lowered lists what the call asked for above the operator's maximum; its result
	// must say so.
	Lowered   []policy.Lowering
	Result    sandbox.Result
	Violation *policy.Violation
	// OutDir is the output directory the artifacts came from; empty when off.
	OutDir string
	// Degraded is set when the server runs with optional isolation layers missing.
	Degraded bool
	// Session is the id of the session the call ran in; SessionRestarted says its
	// processes were killed and restarted (files kept, variables lost); SessionClosed
	// that it has ended, asked to or not.
	Session          string
	SessionRestarted bool
	SessionClosed    bool
}

// Runner runs calls in the sandbox.
type Runner struct {
	Sandbox   sandbox.Sandbox
	Languages Languages
	// Environments are the operator's library sets (nil: none).
	Environments *policy.Environments
	Bounds       policy.Bounds
	Imports      policy.Imports
	Network      sandbox.Network
	// Egress is the operator's allowlist when Network is "allowlist".
	Egress        *sandbox.Egress
	MaxCodeBytes  int
	MaxStdinBytes int
	// FileCaps bound a call's input files (zero fields: policy's defaults).
	FileCaps policy.FileCaps
	// OutDir is the workspace-relative directory whose files come back as artifacts,
	// bounded by Artifacts; empty, or Artifacts.MaxFiles zero, turns artifacts off.
	OutDir    string
	Artifacts sandbox.ArtifactLimits
	Limiter   *Limiter
	Degraded  bool
	// MemoryBound is what enforces the memory limit on this host (the sandbox's probe).
	MemoryBound policy.MemoryBound
	Log         *slog.Logger
	// Audit, when set, gets one record per call, refused calls included.
	Audit *Audit
	// PerClient, when set, bounds each authenticated client's calls in flight.
	PerClient *ClientLimit
	// Observer, when set, is told how every call ended.
	Observer Observer
	// Sessions holds the open sessions; nil: sessions are off.
	Sessions *session.Manager
}

const maxArgs = 64

// clip bounds what a call named that matched nothing (a language, a session id) where
// the log, the audit line or an error repeats it: each took up to the request's 16 MiB.
// What is not visible is escaped (sanitize.Escape): JSON escapes only C0, so a BiDi
// override or a C1 control reached the terminal an operator reads the log in.
func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return sanitize.Escape(s)
}

// Run validates the call, runs it once in a fresh sandbox and logs one summary line.
// A non-nil error means nothing ran: a rejected request (wrapping a policy error), no
// free slot (ErrBusy), cancellation while waiting, or a sandbox failure.
func (r *Runner) Run(ctx context.Context, call Call) (Outcome, error) {
	start := time.Now()
	out := Outcome{ID: newID(), Degraded: r.Degraded}
	sum := sha256.Sum256(call.Code)
	log := r.logger().With("id", out.ID, "language", clip(call.Language),
		"code_sha256", hex.EncodeToString(sum[:]), "code_bytes", len(call.Code))

	out, err := r.run(ctx, call, out)
	if r.Audit != nil {
		if aerr := r.Audit.Write(r.record(ctx, start, call, hex.EncodeToString(sum[:]), out, err)); aerr != nil {
			log.Error("audit line not written; withholding the result", "err", aerr)
			if err == nil {
				out.Result = sandbox.Result{ID: out.ID, Status: sandbox.StatusSandboxError, ExitCode: -1,
					Detail: "the run's audit line could not be written (" + aerr.Error() + "), so its result is withheld; tell the operator"}
			}
		}
	}
	if r.Observer != nil {
		r.Observer.ObserveRun(out.Language.Name, observedStatus(ctx, out, err), time.Since(start))
	}
	attrs := []any{"duration", time.Since(start).Round(time.Millisecond)}
	if call.Principal != "" {
		attrs = append(attrs, "client", call.Principal)
	}
	if out.Environment != "" {
		attrs = append(attrs, "environment", out.Environment)
	}
	if out.Session != "" {
		attrs = append(attrs, "session", out.Session, "session_restarted", out.SessionRestarted)
	}
	if out.Limits != (sandbox.Limits{}) {
		attrs = append(attrs, "wall_limit", out.Limits.Wall, "memory_limit", out.Limits.Memory)
	}
	switch {
	case err != nil:
		log.Warn("run refused", append(attrs, "err", err)...)
	default:
		attrs = append(attrs, "status", out.Result.Status, "exit_code", out.Result.ExitCode,
			"wall", out.Result.Wall, "cpu", out.Result.CPU, "peak_memory", out.Result.PeakMemory,
			"stdout_bytes", out.Result.Stdout.Total, "stderr_bytes", out.Result.Stderr.Total,
			"files", len(call.Files), "artifacts", len(out.Result.Artifacts))
		log.Info("run", attrs...)
	}
	return out, err
}

// record is the audit line of one call. A call that ran nothing is "refused" when the
// request was at fault or the server busy, "sandbox_error" when the host failed.
func (r *Runner) record(ctx context.Context, start time.Time, call Call, sum string, out Outcome, err error) AuditRecord {
	res := out.Result
	rec := AuditRecord{Time: start.UTC(), ID: out.ID, Transport: call.Transport, Client: call.Client, Principal: call.Principal,
		Language: clip(call.Language), CodeSHA256: sum, CodeBytes: len(call.Code),
		Status: string(res.Status), ExitCode: res.ExitCode, WallMs: res.Wall.Milliseconds(), CPUMs: res.CPU.Milliseconds(),
		PeakMemory: res.PeakMemory, DurationMs: time.Since(start).Milliseconds(), Environment: out.Environment}
	if out.Language.Name != "" {
		rec.Language = out.Language.Name // an environment decides the language of a call that names none
	}
	rec.Limits.WallMs, rec.Limits.MemoryBytes = out.Limits.Wall.Milliseconds(), out.Limits.Memory
	rec.Limits.Pids, rec.Limits.OutputBytes = out.Limits.Pids, out.Limits.Output
	if out.Violation != nil {
		rec.Violation = out.Violation.Module
	}
	rec.Egress = res.Network
	rec.Session, rec.SessionRestarted = out.Session, out.SessionRestarted
	if rec.Session == "" && call.Session != "" {
		rec.Session = clip(call.Session)
	}
	if err != nil {
		// The audit log tells the server's failures from every call that did not run
		// for a reason of its own (refused, busy, cancelled).
		rec.Status, rec.Error = "refused", err.Error()
		if FailureOf(ctx, err) == HostFailure {
			rec.Status = string(sandbox.StatusSandboxError)
		}
	}
	return rec
}

// observedStatus is the status metrics count a call under.
func observedStatus(ctx context.Context, out Outcome, err error) string {
	if err == nil {
		return string(out.Result.Status)
	}
	return string(FailureOf(ctx, err))
}

func (r *Runner) run(ctx context.Context, call Call, out Outcome) (Outcome, error) {
	if err := r.validate(call); err != nil {
		return out, err
	}
	if call.Session != "" {
		return r.runSession(ctx, call, out)
	}
	if call.CloseSession {
		return out, fmt.Errorf("%w: close_session needs a session id", policy.ErrInvalidRequest)
	}
	lang, env, err := r.lookup(call)
	if err != nil {
		return out, err
	}
	out.Language = lang
	if env != nil {
		out.Environment = env.Name
		out.Language.Version = env.Version
	}
	req := policy.Request{Timeout: call.Timeout}
	out.Limits = r.Bounds.Clamp(req)
	out.Lowered = r.Bounds.Lowered(req, out.Limits)
	files, err := r.files(call, out.Limits.Workspace)
	if err != nil {
		return out, err
	}
	spec := r.spec(lang, env, call.Code, call.Args, out.Limits)
	spec.ID = out.ID
	spec.Stdin = call.Stdin
	spec.Files = files
	spec.Progress = call.Progress
	if spec.Egress, err = r.egress(call.AllowDomains); err != nil {
		return out, err
	}
	out.OutDir = spec.OutDir
	spec = r.Imports.Apply(spec)

	done, err := r.admit(ctx, call.Principal)
	if err != nil {
		return out, err
	}
	defer done()
	res, err := r.Sandbox.Run(ctx, spec)
	if err != nil {
		return out, fmt.Errorf("sandbox: %w", err)
	}
	if res.ID == "" {
		res.ID = out.ID
	}
	if v, denied := r.Imports.Denied(res); denied {
		res.Status = sandbox.StatusPolicyDenied
		out.Violation = &v
		if res.Detail == "" {
			res.Detail = fmt.Sprintf("import of %q refused by the import policy (line %d)", v.Module, v.Line)
		}
	}
	out.Result = r.explain(res, lang, out.Environment)
	return out, nil
}

// explain adds the hint for a module the environment lacks to a failed result.
func (r *Runner) explain(res sandbox.Result, lang policy.Language, env string) sandbox.Result {
	if res.Status == sandbox.StatusError {
		if m, ok := policy.MissingModule(lang.Name, res.Stderr.Bytes()); ok {
			res.Detail = strings.TrimPrefix(res.Detail+"; ", "; ") + r.Environments.MissingHint(lang.Name, env, m)
		}
	}
	return res
}

// lookup resolves the call's language and environment. A named environment decides the
// language (a different one named in the call is refused); without one, the language's
// default environment, if any, is used.
func (r *Runner) lookup(call Call) (policy.Language, *policy.Environment, error) {
	var env *policy.Environment
	name := call.Language
	if call.Environment != "" {
		e, err := r.Environments.Lookup(call.Environment)
		if err != nil {
			return policy.Language{}, nil, err
		}
		if canon, _ := policy.Canonical(name); name != "" && canon != e.Language {
			return policy.Language{}, nil, fmt.Errorf("%w: environment %s is %s, not %s; omit language or pick another environment",
				policy.ErrInvalidRequest, e.Name, e.Language, clip(name))
		}
		env, name = &e, e.Language
	}
	lang, err := r.Languages.Lookup(name)
	if err != nil {
		return policy.Language{}, nil, err
	}
	if env == nil {
		if e, ok := r.Environments.Default(lang.Name); ok {
			env = &e
		}
	}
	return lang, env, nil
}

func (r *Runner) validate(call Call) error {
	if len(call.Code) == 0 {
		return fmt.Errorf("%w: code is empty", policy.ErrInvalidRequest)
	}
	if err := policy.ValidateCode(string(call.Code), r.MaxCodeBytes); err != nil {
		return err
	}
	switch {
	case !utf8.Valid(call.Code):
		return fmt.Errorf("%w: code is not valid UTF-8", policy.ErrInvalidRequest)
	case len(call.Stdin) > r.MaxStdinBytes:
		return fmt.Errorf("%w: stdin is %d bytes, the limit is %d bytes", policy.ErrInvalidRequest, len(call.Stdin), r.MaxStdinBytes)
	case len(call.Args) > maxArgs:
		return fmt.Errorf("%w: %d args, the limit is %d", policy.ErrInvalidRequest, len(call.Args), maxArgs)
	case call.Timeout < 0:
		return fmt.Errorf("%w: timeout must not be negative", policy.ErrInvalidRequest)
	}
	for i, a := range call.Args {
		if bytes.IndexByte([]byte(a), 0) >= 0 {
			return fmt.Errorf("%w: args[%d] contains a NUL byte", policy.ErrInvalidRequest, i)
		}
	}
	return nil
}

// workspaceMargin is the part of the workspace input files may not take: the program
// needs room to write anything at all, and the code file and the import guard live there too.
func workspaceMargin(workspace int64) int64 {
	return min(1<<20, workspace/4)
}

// files validates the input files; together with the code they must leave the program
// room in the workspace, or the call is refused here instead of failing inside the
// sandbox with a bare ENOSPC.
func (r *Runner) files(call Call, workspace int64) ([]sandbox.File, error) {
	if len(call.Files) == 0 {
		return nil, nil
	}
	files, err := policy.Files(call.Files, r.FileCaps)
	if err != nil {
		return nil, err
	}
	total := int64(len(call.Code))
	for i, f := range files {
		if r.OutDir != "" && (strings.EqualFold(f.Path, r.OutDir) || strings.HasPrefix(strings.ToLower(r.OutDir), strings.ToLower(f.Path)+"/")) {
			return nil, fmt.Errorf("%w: files[%d] %q: %s/ is the output directory; put inputs elsewhere", policy.ErrInvalidRequest, i, f.Path, r.OutDir)
		}
		total += int64(len(f.Data))
	}
	if room := workspace - workspaceMargin(workspace); workspace > 0 && total > room {
		return nil, fmt.Errorf("%w: input files and code total %d bytes, the workspace holds %d and %d must stay free for the program; send less",
			policy.ErrInvalidRequest, total, workspace, workspace-room)
	}
	return files, nil
}

// egress is the call's allowlist: the operator's, narrowed by the call's own list.
func (r *Runner) egress(allow []string) (*sandbox.Egress, error) {
	if r.Network != sandbox.NetworkAllowlist || r.Egress == nil {
		if len(allow) > 0 {
			return nil, fmt.Errorf("%w: allow_domains needs the server's network to be \"allowlist\" (it is %q)", policy.ErrInvalidRequest, r.Network)
		}
		return nil, nil
	}
	domains, err := egress.Narrow(r.Egress.Domains, allow)
	if err != nil {
		return nil, fmt.Errorf("%w: allow_domains: %w", policy.ErrInvalidRequest, err)
	}
	e := *r.Egress
	e.Domains = domains
	return &e, nil
}

func (r *Runner) logger() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.Default().With("component", "runner")
}

// Failure says why a call that returned an error did not run. The audit log, the
// metrics and the tool result take it from FailureOf, so they cannot disagree about
// whose failure it was.
type Failure string

const (
	Refused     Failure = "refused"       // the request itself was bad: the caller can fix it
	Busy        Failure = "busy"          // no sandbox slot in time: the caller may retry
	Cancelled   Failure = "cancelled"     // the caller cancelled, or its deadline passed
	HostFailure Failure = "sandbox_error" // the server's side failed: nothing reliable ran
)

// FailureOf classifies the error of a call made under ctx.
func FailureOf(ctx context.Context, err error) Failure {
	switch {
	case errors.Is(err, ErrBusy):
		return Busy
	case IsRefusal(err):
		return Refused
	case ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return Cancelled
	}
	return HostFailure
}

// IsRefusal reports whether err means the request itself was bad (the caller can fix it).
func IsRefusal(err error) bool {
	for _, e := range []error{policy.ErrInvalidRequest, policy.ErrCodeTooLarge,
		policy.ErrLanguageNotEnabled, policy.ErrLanguageNotInstalled,
		session.ErrUnknown, session.ErrLimit, session.ErrBusy} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// spec is how every call in lang (and env, when not nil) is run, whatever its code: the
// one place a Spec is built, so warm-pool templates match the calls they serve.
func (r *Runner) spec(lang policy.Language, env *policy.Environment, code []byte, args []string, limits sandbox.Limits) sandbox.Spec {
	outDir := ""
	if r.OutDir != "" && r.Artifacts.MaxFiles > 0 {
		outDir = r.OutDir
	}
	var spec sandbox.Spec
	if env != nil {
		spec = env.Spec(lang, code, args, limits, r.MemoryBound, outDir)
	} else {
		spec = lang.Spec(code, args, limits, r.MemoryBound)
	}
	spec.Language = lang.Name
	spec.Network = r.Network
	spec.Egress = r.Egress
	if outDir != "" {
		spec.OutDir, spec.Artifacts = outDir, r.Artifacts
	}
	return spec
}

// Templates are the warm-pool templates: one per enabled language (in its default
// environment, if it has one) and one per other usable environment, with the default
// limits and no code. A call with default (or lower) limits and no import policy in the
// way is served by a sandbox prepared from one of them.
func (r *Runner) Templates() []sandbox.Spec {
	// The limits of a call that asks for nothing: every one filled, as the backend needs.
	limits := r.Bounds.Clamp(policy.Request{})
	var out []sandbox.Spec
	for _, name := range r.Languages.Enabled() {
		lang, err := r.Languages.Lookup(name)
		if err != nil {
			continue
		}
		var env *policy.Environment
		if e, ok := r.Environments.Default(lang.Name); ok {
			env = &e
		}
		out = append(out, r.Imports.Apply(r.spec(lang, env, nil, nil, limits)))
	}
	for _, e := range r.Environments.Usable() {
		lang, err := r.Languages.Lookup(e.Language)
		if err != nil || e.Default {
			continue
		}
		out = append(out, r.Imports.Apply(r.spec(lang, &e, nil, nil, limits)))
	}
	return out
}

// admit takes the client's parallel-call slot, then one of the server's; done gives both
// back. Every call that runs code, single-use or in a session, goes through it.
func (r *Runner) admit(ctx context.Context, principal string) (done func(), err error) {
	mine, err := r.PerClient.Acquire(principal)
	if err != nil {
		return nil, err
	}
	release, err := r.Limiter.Acquire(ctx, principal)
	if err != nil {
		mine()
		return nil, err
	}
	return func() { release(); mine() }, nil
}
