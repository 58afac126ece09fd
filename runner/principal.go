package runner

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Observer is told how each call ended, for metrics. language is the enabled language
// the call resolved to, or "" when it was refused before that (until then it is the
// caller's text, which must not become a label). status is the sandbox's Status for a
// call that ran, or "refused", "busy", "cancelled" or "sandbox_error" for one that did
// not. It must not block.
type Observer interface {
	ObserveRun(language, status string, d time.Duration)
}

type principalKey struct{}

// WithPrincipal marks ctx as carrying a call from the authenticated client name (the
// name of the bearer token it presented), for the audit log and the per-client limit.
func WithPrincipal(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, principalKey{}, name)
}

// PrincipalFrom is the authenticated client name in ctx, or "".
func PrincipalFrom(ctx context.Context) string {
	s, _ := ctx.Value(principalKey{}).(string)
	return s
}

// ClientLimit bounds the calls one authenticated client has running or waiting at
// once, so one agent of a fleet cannot take every slot of a shared server. Zero
// means no limit.
type ClientLimit struct {
	max  int
	mu   sync.Mutex
	busy map[string]int
}

// NewClientLimit allows each client max calls at once (0: unlimited).
func NewClientLimit(max int) *ClientLimit {
	return &ClientLimit{max: max, busy: map[string]int{}}
}

// Acquire counts a call for client; the returned func gives it back. Calls without a
// client name (stdio, in-process) are not counted.
func (l *ClientLimit) Acquire(client string) (func(), error) {
	if l == nil || l.max <= 0 || client == "" {
		return func() {}, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.busy[client] >= l.max {
		return nil, fmt.Errorf("%w: client %q already has %d calls in flight, its limit (http.client_max_parallel)", ErrBusy, client, l.max)
	}
	l.busy[client]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.busy[client]--; l.busy[client] == 0 {
			delete(l.busy, client)
		}
	}, nil
}
