package serve

import (
	"bytes"
	"context"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/airlock-mcp/airlock/runner"
)

// ownCalls are the requests in flight that have no MCP session: every request of a
// stateless server, and 2026-07-28 requests on any. mcp-go finds the call a
// notifications/cancelled names by the session's id and the request's id, and without
// a session the first is "" for everyone (or whatever Mcp-Session-Id a stateless
// client sent): ids are small counters every client repeats, so one client's
// cancellation of its request 2 ended another client's request 2. Here a cancellation
// on those paths is taken from mcp-go and applied to its own client's requests only.
type ownCalls struct {
	mu   sync.Mutex
	seq  uint64
	live map[callKey]map[uint64]context.CancelFunc
}

// callKey is a request of one client: the token's name ("" without tokens: a loopback
// server without them has one user) and the request's id as sent.
type callKey struct{ who, id string }

func newOwnCalls() *ownCalls { return &ownCalls{live: map[callKey]map[uint64]context.CancelFunc{}} }

// serve passes a message to next, a request under a context its own client's
// cancellation ends; a notifications/cancelled is answered here (202) and never reaches
// mcp-go.
func (o *ownCalls) serve(w http.ResponseWriter, r *http.Request, next http.Handler, msg envelope) {
	if r.Method != http.MethodPost {
		next.ServeHTTP(w, r)
		return
	}
	who := runner.PrincipalFrom(r.Context())
	switch {
	case msg.Method == string(mcp.MethodNotificationCancelled):
		o.cancel(callKey{who, string(bytes.TrimSpace(msg.Params.RequestID))})
		w.WriteHeader(http.StatusAccepted)
	case msg.Method == "" || len(msg.ID) == 0:
		next.ServeHTTP(w, r)
	default:
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer o.add(callKey{who, string(bytes.TrimSpace(msg.ID))}, cancel)()
		next.ServeHTTP(w, r.WithContext(ctx))
	}
}

// add records a request in flight; the returned func removes it.
func (o *ownCalls) add(k callKey, cancel context.CancelFunc) func() {
	o.mu.Lock()
	defer o.mu.Unlock()
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
	}
}

// cancel ends the client's requests with that id (all of them: a client that reused an
// id while the first was running cannot say which it meant).
func (o *ownCalls) cancel(k callKey) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range o.live[k] {
		c()
	}
}
