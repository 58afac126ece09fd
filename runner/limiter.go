package runner

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// ErrBusy means no sandbox slot became free in time; the caller should retry later.
var ErrBusy = errors.New("busy")

// Limiter bounds how many sandboxes run at once. Waiting calls form a bounded queue with
// a timeout, so an overloaded server answers "busy" instead of hanging a client.
type Limiter struct {
	slots   chan struct{}
	waiting atomic.Int64
	queue   int64
	timeout time.Duration
}

// NewLimiter allows parallel runs at once, queue waiting calls, each for at most timeout.
func NewLimiter(parallel, queue int, timeout time.Duration) *Limiter {
	return &Limiter{slots: make(chan struct{}, max(parallel, 1)), queue: int64(queue), timeout: timeout}
}

// Acquire takes a slot; the returned func gives it back.
func (l *Limiter) Acquire(ctx context.Context) (func(), error) {
	release := func() { <-l.slots }
	select {
	case l.slots <- struct{}{}:
		return release, nil
	default:
	}
	if n := l.waiting.Add(1); n > l.queue {
		l.waiting.Add(-1)
		return nil, fmt.Errorf("%w: all %d sandbox slots are in use and %d calls are already waiting", ErrBusy, cap(l.slots), l.queue)
	}
	defer l.waiting.Add(-1)
	t := time.NewTimer(l.timeout)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return release, nil
	case <-t.C:
		return nil, fmt.Errorf("%w: no sandbox slot became free within %s (%d running)", ErrBusy, l.timeout, cap(l.slots))
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a sandbox slot: %w", context.Cause(ctx))
	}
}

// Running is the number of slots in use.
func (l *Limiter) Running() int { return len(l.slots) }

// Parallel is the number of slots.
func (l *Limiter) Parallel() int { return cap(l.slots) }

// Waiting is the number of calls queued for a slot.
func (l *Limiter) Waiting() int { return int(l.waiting.Load()) }
