package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// ErrBusy means no sandbox slot became free in time; the caller should retry later.
var ErrBusy = errors.New("busy")

// Limiter bounds how many sandboxes run at once. Waiting calls form a bounded queue with
// a timeout, so an overloaded server answers "busy" instead of hanging a client.
//
// The slots and the queue are shared fairly between clients (authenticated principals):
// a freed slot goes to the waiting client with the fewest calls running, not to the
// oldest waiter, and a full queue makes room for a client with fewer calls waiting by
// refusing the newest waiter of the client with the most. A first-come queue let one
// token that kept max_parallel + queue_size calls in flight refuse every other client of
// a shared server as busy, for as long as it kept them there. Calls without a principal
// (stdio, a server without tokens) are one client, first come, first served. It stays
// work-conserving: a client alone gets every slot.
type Limiter struct {
	mu       sync.Mutex
	parallel int
	queue    int
	timeout  time.Duration
	running  int
	held     map[string]int // slots held, per client
	waiters  []*waiter      // in arrival order
}

// waiter is one queued call. ready is closed once it has a slot (granted) or lost its
// place to another client's call (evicted).
type waiter struct {
	who              string
	ready            chan struct{}
	granted, evicted bool
}

// NewLimiter allows parallel runs at once, queue waiting calls, each for at most timeout.
func NewLimiter(parallel, queue int, timeout time.Duration) *Limiter {
	return &Limiter{parallel: max(parallel, 1), queue: max(queue, 0), timeout: timeout, held: map[string]int{}}
}

// Acquire takes a slot for client who ("" for a call without a principal); the returned
// func gives it back.
func (l *Limiter) Acquire(ctx context.Context, who string) (func(), error) {
	l.mu.Lock()
	// Free slots exist only while nobody waits: a freed slot is handed to a waiter.
	if l.running < l.parallel {
		l.take(who)
		l.mu.Unlock()
		return l.releaser(who), nil
	}
	if len(l.waiters) >= l.queue && !l.makeRoom(who) {
		l.mu.Unlock()
		return nil, fmt.Errorf("%w: all %d sandbox slots are in use and %d calls are already waiting", ErrBusy, l.parallel, l.queue)
	}
	w := &waiter{who: who, ready: make(chan struct{})}
	l.waiters = append(l.waiters, w)
	l.mu.Unlock()

	t := time.NewTimer(l.timeout)
	defer t.Stop()
	timedOut := false
	select {
	case <-w.ready:
	case <-t.C:
		timedOut = true
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case w.granted && ctx.Err() == nil:
		return l.releaser(who), nil
	case w.granted:
		l.free(who) // granted as the caller gave up: the slot goes on to the next waiter
	case w.evicted:
		return nil, fmt.Errorf("%w: all %d sandbox slots are in use and this call gave its place in the queue to another client's (yours has more calls waiting)", ErrBusy, l.parallel)
	default:
		l.waiters = slices.DeleteFunc(l.waiters, func(x *waiter) bool { return x == w })
	}
	if timedOut && ctx.Err() == nil {
		return nil, fmt.Errorf("%w: no sandbox slot became free within %s (%d running)", ErrBusy, l.timeout, l.parallel)
	}
	return nil, fmt.Errorf("waiting for a sandbox slot: %w", context.Cause(ctx))
}

// take counts a slot for who; l.mu is held.
func (l *Limiter) take(who string) {
	l.running++
	l.held[who]++
}

// releaser gives who's slot back, once.
func (l *Limiter) releaser(who string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.free(who)
		})
	}
}

// free gives back a slot of who's and hands it to the waiter whose client holds the
// fewest (the oldest of them); l.mu is held.
func (l *Limiter) free(who string) {
	l.running--
	if l.held[who]--; l.held[who] <= 0 {
		delete(l.held, who)
	}
	if len(l.waiters) == 0 {
		return
	}
	next := 0
	for i, w := range l.waiters {
		if l.held[w.who] < l.held[l.waiters[next].who] {
			next = i
		}
	}
	w := l.waiters[next]
	l.waiters = slices.Delete(l.waiters, next, next+1)
	w.granted = true
	l.take(w.who)
	close(w.ready)
}

// makeRoom refuses the newest waiter of the client with the most waiting, when that is
// at least two more than who has, so that who can take its place; l.mu is held.
func (l *Limiter) makeRoom(who string) bool {
	waiting := map[string]int{}
	for _, w := range l.waiters {
		waiting[w.who]++
	}
	victim := ""
	for c, n := range waiting {
		if n > waiting[victim] || n == waiting[victim] && c < victim {
			victim = c
		}
	}
	if waiting[victim] < waiting[who]+2 {
		return false
	}
	for i := len(l.waiters) - 1; i >= 0; i-- {
		if w := l.waiters[i]; w.who == victim {
			l.waiters = slices.Delete(l.waiters, i, i+1)
			w.evicted = true
			close(w.ready)
			return true
		}
	}
	return false
}

// Running is the number of slots in use.
func (l *Limiter) Running() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.running
}

// Parallel is the number of slots.
func (l *Limiter) Parallel() int { return l.parallel }

// Waiting is the number of calls queued for a slot.
func (l *Limiter) Waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiters)
}
