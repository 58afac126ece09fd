package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/session"
)

// NewSession is the Call.Session that starts a session.
const NewSession = "new"

// sessionMeta is what the runner keeps with an open session.
type sessionMeta struct {
	lang   policy.Language
	env    string
	outDir string // where each call's artifacts come from; empty when off
}

// runSession runs a call in a session: a new one (Call.Session "new") or the caller's
// open one. The session's sandbox is built from the same spec as a single-use call of
// its language, with the language's driver as the program; the call's own limits are
// its timeout and CPU time, the rest are the session's.
func (r *Runner) runSession(ctx context.Context, call Call, out Outcome) (Outcome, error) {
	backend, ok := r.Sandbox.(sandbox.Sessions)
	switch {
	case r.Sessions == nil:
		return out, fmt.Errorf("%w: sessions are off on this server (sessions.enabled = false); omit session for a single-use call", policy.ErrInvalidRequest)
	case !ok:
		return out, fmt.Errorf("%w: this platform's sandbox has no sessions; omit session for a single-use call", policy.ErrInvalidRequest)
	case len(call.Args) > 0:
		return out, fmt.Errorf("%w: args are not available in a session (its program is an interpreter that runs each call's code)", policy.ErrInvalidRequest)
	case len(call.AllowDomains) > 0:
		return out, fmt.Errorf("%w: allow_domains is not available in a session (its network is fixed when it starts)", policy.ErrInvalidRequest)
	case len(call.Files) > 0 && call.Session != NewSession:
		return out, fmt.Errorf("%w: files can be given only with session: \"new\"; later calls write files themselves", policy.ErrInvalidRequest)
	}
	req := policy.Request{Timeout: call.Timeout}
	out.Limits = r.Bounds.Clamp(req)
	out.Lowered = r.Bounds.Lowered(req, out.Limits)

	done, err := r.admit(ctx, call.Principal)
	if err != nil {
		return out, err
	}
	defer done()

	var h *session.Handle
	if call.Session == NewSession {
		h, err = r.openSession(ctx, backend, call, &out)
	} else {
		h, err = r.Sessions.Acquire(call.Owner, call.Session)
	}
	if err != nil {
		return out, err
	}
	meta := h.Meta.(sessionMeta)
	out.Session, out.Language, out.Environment, out.OutDir = h.ID, meta.lang, meta.env, meta.outDir
	if meta.env != "" {
		if e, err := r.Environments.Lookup(meta.env); err == nil {
			out.Language.Version = e.Version
		}
	}
	if err := r.sessionCallValid(call, meta.lang, meta.env); err != nil {
		out.SessionClosed = r.release(h, call.CloseSession)
		return out, err
	}
	res, err := h.Session.Call(ctx, sandbox.SessionCall{ID: out.ID, Code: call.Code, Stdin: call.Stdin,
		Limits: out.Limits, Progress: call.Progress})
	out.SessionClosed = r.release(h, call.CloseSession)
	if err != nil {
		if errors.Is(err, sandbox.ErrSessionEnded) {
			return out, session.Unknown(call.Session)
		}
		return out, fmt.Errorf("sandbox: %w", err)
	}
	res.ID = out.ID
	out.SessionRestarted = res.Restarted
	out.Result = r.explain(res, meta.lang, meta.env)
	return out, nil
}

// sessionGoneWithin bounds the wait for a closed session's processes: the spawner's kill
// and the kernel's teardown of the pid namespace took 0.14–0.26 s under load (a worker
// with pandas and matplotlib loaded, and a daemon holding 192 MiB); a plain python
// session with a daemon, 11 ms (a close_session call's median 0.9 ms before, 12.2 ms
// with the wait: 20 interleaved pairs, load 11–13, 2 CPUs).
const sessionGoneWithin = 5 * time.Second

// release ends the call's hold on its session. When that ends the session
// (close_session, or it ended on its own), the answer waits until no process of the
// session is left, as a single-use call's answer comes once its program's processes are
// dead: the manager's Close only starts the kill, and a session's daemon went on
// running for 0.14–0.26 s after its client was told session_closed
// (TestRealTenantsPooledEnvironment).
func (r *Runner) release(h *session.Handle, end bool) bool {
	closed := r.Sessions.Release(h, end)
	if closed {
		t := time.NewTimer(sessionGoneWithin)
		defer t.Stop()
		select {
		case <-h.Session.Gone():
		case <-t.C:
			r.logger().Error("a closed session's processes are still running", "waited", sessionGoneWithin)
		}
	}
	return closed
}

// openSession starts a session for the call's language and environment.
func (r *Runner) openSession(ctx context.Context, backend sandbox.Sessions, call Call, out *Outcome) (*session.Handle, error) {
	if call.Owner == "" {
		return nil, fmt.Errorf("%w: sessions need a client identity, which this transport does not give (stateless HTTP without client tokens); use single-use calls, or configure http.tokens_file", policy.ErrInvalidRequest)
	}
	lang, env, err := r.lookup(call)
	if err != nil {
		return nil, err
	}
	driver, ok := policy.SessionDriver(lang.Name)
	if !ok {
		return nil, fmt.Errorf("%w: %s has no sessions; sessions run python, javascript and bash", policy.ErrInvalidRequest, lang.Name)
	}
	if lang.Name == "python" && !r.Imports.Empty() {
		// The import guard checks each program before it runs; a session's calls are
		// not programs it sees.
		return nil, fmt.Errorf("%w: python sessions are off while the server has an import policy (imports.deny_import, imports.deny_from); use single-use calls", policy.ErrInvalidRequest)
	}
	// The session's sandbox has the default limits, which its memory and pids keep for
	// the whole session; so it is served by the warm pool like any default call.
	spec := r.spec(lang, env, driver, nil, r.Bounds.Default)
	if spec.Files, err = r.files(call, spec.Limits.Workspace); err != nil {
		return nil, err
	}
	meta := sessionMeta{lang: lang, outDir: spec.OutDir}
	if env != nil {
		meta.env = env.Name
		out.Environment = env.Name
	}
	// The sandbox's own id (its cgroup's name, the logs') is not the session's: the
	// session id is the client's capability and stays out of the host's view.
	spec.ID = "session-" + newID()
	// The caps count a token's sessions together, whichever MCP session started them.
	client := call.Owner
	if call.Principal != "" {
		client = "token:" + call.Principal
	}
	return r.Sessions.OpenFor(call.Owner, client, lang.Name, meta, func(string) (sandbox.Session, error) {
		s, err := backend.OpenSession(ctx, spec)
		if err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		return s, nil
	})
}

// sessionCallValid checks what a session's language decides about a call.
func (r *Runner) sessionCallValid(call Call, lang policy.Language, env string) error {
	if call.Environment != "" && call.Environment != env {
		return fmt.Errorf("%w: session %s runs in environment %q, not %q; omit environment or start another session", policy.ErrInvalidRequest, call.Session, env, call.Environment)
	}
	if call.Language != "" {
		if canon, _ := policy.Canonical(call.Language); canon != lang.Name {
			return fmt.Errorf("%w: session %s runs %s, not %s; omit language or start another session", policy.ErrInvalidRequest, call.Session, lang.Name, clip(call.Language))
		}
	}
	if len(call.Stdin) > 0 && !policy.SessionStdin(lang.Name) {
		return fmt.Errorf("%w: stdin is not available in a %s session; put the input in a file or in the code", policy.ErrInvalidRequest, lang.Name)
	}
	return nil
}
