package runner

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

// TestOneClientCannotRefuseAnother is the cross-tenant case of the shared slots: alice
// keeps every slot and the whole queue, then bob calls. With a first-come queue bob was
// refused as busy at once, and would have waited behind all of alice's queued calls.
func TestOneClientCannotRefuseAnother(t *testing.T) {
	var mu sync.Mutex
	started := []string{}
	release := map[string]chan struct{}{}
	for _, c := range []string{"a1", "a2", "a3", "a4", "a5", "a6", "b1"} {
		release[c] = make(chan struct{})
	}
	var logs bytes.Buffer
	r, _ := newRunner(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
		mu.Lock()
		started = append(started, string(s.Code))
		mu.Unlock()
		select {
		case <-release[string(s.Code)]:
		case <-ctx.Done():
		}
		return sandbox.Result{ID: s.ID, Status: sandbox.StatusOK}, nil
	}, &logs)
	r.Limiter = NewLimiter(2, 4, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := map[string]chan error{}
	call := func(who, code string) {
		ch := make(chan error, 1)
		errs[code] = ch
		go func() {
			_, err := r.Run(ctx, Call{Language: "python", Code: []byte(code), Principal: who})
			ch <- err
		}()
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (running %d, waiting %d)", what, r.Limiter.Running(), r.Limiter.Waiting())
			}
		}
	}
	call("alice", "a1")
	call("alice", "a2")
	waitFor("alice's two calls to run", func() bool { return r.Limiter.Running() == 2 })
	for _, c := range []string{"a3", "a4", "a5", "a6"} {
		call("alice", c)
		waitFor(c+" to queue", func() bool { return r.Limiter.Waiting() == int(c[1]-'2') })
	}
	call("bob", "b1")
	select {
	case err := <-errs["b1"]:
		t.Fatalf("bob's call was refused while alice held every slot and the queue: %v", err)
	case err := <-errs["a6"]:
		if !errors.Is(err, ErrBusy) {
			t.Fatalf("alice's newest queued call: err = %v, want busy (it gave its place to bob's)", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("neither bob's call nor alice's newest was answered")
	}
	close(release["a1"])
	waitFor("the freed slot to be taken", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(started) == 3
	})
	mu.Lock()
	next := started[2]
	mu.Unlock()
	if next != "b1" {
		t.Fatalf("the freed slot went to %s, not to bob's call, which waited behind alice's (started %v)", next, started)
	}
	for _, c := range []string{"a2", "a3", "a4", "a5", "b1"} {
		close(release[c])
	}
	for _, c := range []string{"a1", "a2", "a3", "a4", "a5", "b1"} {
		if err := <-errs[c]; err != nil {
			t.Errorf("%s: %v", c, err)
		}
	}
}

// TestLimiterAloneGetsEverySlot: fairness takes nothing from a client alone, and a
// waiter that gives up leaves its slot to the next.
func TestLimiterAloneGetsEverySlot(t *testing.T) {
	l := NewLimiter(2, 2, time.Minute)
	var rel []func()
	for range 2 {
		f, err := l.Acquire(context.Background(), "alice")
		if err != nil {
			t.Fatal(err)
		}
		rel = append(rel, f)
	}
	gone, cancel := context.WithCancel(context.Background())
	got := make(chan error, 2)
	go func() { _, err := l.Acquire(gone, "alice"); got <- err }()
	for l.Waiting() != 1 {
		time.Sleep(time.Millisecond)
	}
	go func() {
		f, err := l.Acquire(context.Background(), "alice")
		if err == nil {
			// Released before it reports: the test counts the slots once it has read this.
			f()
		}
		got <- err
	}()
	for l.Waiting() != 2 {
		time.Sleep(time.Millisecond)
	}
	// A third of alice's is refused: there is no other client to make room for.
	if _, err := l.Acquire(context.Background(), "alice"); !errors.Is(err, ErrBusy) {
		t.Fatalf("a third waiter of one client: err = %v, want busy", err)
	}
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: err = %v", err)
	}
	rel[0]()
	rel[0]() // a second release is a no-op
	if err := <-got; err != nil {
		t.Fatalf("the remaining waiter: %v", err)
	}
	rel[1]()
	if l.Running() != 0 || l.Waiting() != 0 {
		t.Fatalf("running %d waiting %d after every release", l.Running(), l.Waiting())
	}
}

// BenchmarkLimiterAcquire is a call's take and give-back of a free slot, the path every
// call takes when the server is not full.
func BenchmarkLimiterAcquire(b *testing.B) {
	l := NewLimiter(4, 64, time.Second)
	ctx := context.Background()
	for b.Loop() {
		rel, err := l.Acquire(ctx, "alice")
		if err != nil {
			b.Fatal(err)
		}
		rel()
	}
}
