package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/airlock-mcp/airlock/runner"
)

// ownCalls are the requests in flight, keyed by who may cancel them, so that a
// notifications/cancelled ends exactly the requests it names. mcp-go finds the call a
// cancellation names by the session's id and fmt's %v of the request's id, which fails
// three ways:
//   - Without a session (every request of a stateless server, and 2026-07-28 requests
//     on any) the first is "" for everyone (or whatever Mcp-Session-Id a stateless
//     client sent): ids are small counters every client repeats, so one client's
//     cancellation of its request 2 ended another client's request 2.
//   - %v makes the string "7" and the number 7 one key: two calls so named shared one
//     slot, the later took it, and a cancellation of 7 ended the call "7".
//   - Two requests with one id in a session shared one slot too: the second replaced
//     the first's, and once either ended the other could not be cancelled at all.
//
// So every notifications/cancelled is taken from mcp-go and applied here; ids are keyed
// as mcp-go answers them (idKey), so 7, 7.0 and 7e0 are one request and "7" another.
type ownCalls struct {
	mu   sync.Mutex
	seq  uint64
	live map[callKey]map[uint64]context.CancelFunc
}

// callKey is a request of one client: the token's name ("" without tokens: a loopback
// server without them has one user), its MCP session ("" without one) and its id
// (idKey).
type callKey struct{ who, session, id string }

func newOwnCalls() *ownCalls { return &ownCalls{live: map[callKey]map[uint64]context.CancelFunc{}} }

// idKey is the key of a request's id: as mcp-go writes it in the answer (answerKey), or
// as sent when it does not decode (mcp-go then refuses the request, and nothing runs).
func idKey(id json.RawMessage) string {
	if k, ok := answerKey(id); ok {
		return k
	}
	return string(bytes.TrimSpace(id))
}

// idInUse is the refusal of a request whose id is in flight already.
func idInUse(id json.RawMessage) string {
	return "request id " + string(clipID(bytes.TrimSpace(id))) + " is already in use by a request in flight: use a new id; nothing ran"
}

// serve passes a message to next, a request under a context its own client's
// cancellation ends; a notifications/cancelled is answered here (202) and never reaches
// mcp-go. In a session (session != "") an id is the session's, and a request whose id
// is in flight there is refused (409): JSON-RPC forbids the reuse, and the client could
// not tell the answers apart. Without one each request is its own POST (its own stream
// in 2026-07-28), and one client's ids are no other's to refuse.
//
// In a session the id is free again as its answer is written (answerWriter: before the
// client can have read it), not when the handler returns: mcp-go flushes an SSE answer
// and only then returns, and a client that reused the id as soon as it read the answer
// was refused (409) in most tries (TestSessionIDReusedRightAfterItsAnswer). Freed, the
// request is out of reach of a cancellation of its id, which from then on can only name
// a later request: the answered one needs none. The handler's return frees it too, for
// an answer never written (the client went away).
func (o *ownCalls) serve(w http.ResponseWriter, r *http.Request, next http.Handler, msg envelope, session string) {
	if r.Method != http.MethodPost {
		next.ServeHTTP(w, r)
		return
	}
	who := runner.PrincipalFrom(r.Context())
	switch {
	case msg.Method == string(mcp.MethodNotificationCancelled):
		o.cancel(callKey{who, session, idKey(msg.Params.RequestID)})
		w.WriteHeader(http.StatusAccepted)
	case msg.Method == "" || len(msg.ID) == 0:
		next.ServeHTTP(w, r)
	default:
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		k := callKey{who, session, idKey(msg.ID)}
		done, ok := o.add(k, cancel, session != "")
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(errorResponse(msg.ID, mcp.INVALID_REQUEST, idInUse(msg.ID)))
			return
		}
		free := sync.OnceFunc(done)
		defer free()
		if session != "" {
			// Without a session no id is refused: nothing to free early.
			w = newBodyAnswerWriter(w, func(key string) *release {
				if key == k.id {
					free()
				}
				return nil
			})
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	}
}

// add records a request in flight; the returned func removes it. With unique, it
// refuses (false) a key that is in flight already.
func (o *ownCalls) add(k callKey, cancel context.CancelFunc, unique bool) (func(), bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if unique && len(o.live[k]) > 0 {
		return nil, false
	}
	o.seq++
	n := o.seq
	if o.live[k] == nil {
		o.live[k] = map[uint64]context.CancelFunc{}
	}
	o.live[k][n] = cancel
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if delete(o.live[k], n); len(o.live[k]) == 0 {
			delete(o.live, k)
		}
	}, true
}

// cancel ends the client's requests with that id (all of them: a client that reused an
// id while the first was running, where that is not refused, cannot say which it meant).
func (o *ownCalls) cancel(k callKey) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range o.live[k] {
		c()
	}
}
