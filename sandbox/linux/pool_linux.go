package linux

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

// The warm pool keeps sandboxes built ahead of the calls that will use them: each is a
// complete sandbox (namespaces, root, cgroup, seccomp) whose init waits for its call,
// with the interpreter already loaded when the template has a Preload. A call takes one,
// uses it once, and it is destroyed like a cold one; nothing is ever reused.

// pool is the set of templates and their ready sandboxes.
type pool struct {
	s      *Sandbox
	size   int
	slots  []*slot
	cancel context.CancelFunc
	done   sync.WaitGroup
	hits   atomic.Int64
	misses atomic.Int64
}

// slot is one template's sandboxes. need holds a token per sandbox to prepare: a call
// returns its token only when it has finished, so refilling never competes with the call
// it replaces for the CPU (agents think between calls; a tight loop of calls finds the
// other prepared sandboxes first).
type slot struct {
	tmpl    sandbox.Spec
	ready   chan *launch
	need    chan struct{}
	waiting atomic.Int32 // prepared and not yet taken
}

// refill asks for one more prepared sandbox.
func (sl *slot) refill() {
	select {
	case sl.need <- struct{}{}:
	default: // cannot happen: tokens are bounded by the channel's size
	}
}

// Warm starts keeping size sandboxes ready for each template. A second call replaces
// the pool (the old one is drained).
func (s *Sandbox) Warm(templates []sandbox.Spec, size int) {
	if old := s.pool.Swap(nil); old != nil {
		old.close()
	}
	if size <= 0 || len(templates) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &pool{s: s, size: size, cancel: cancel}
	for _, t := range templates {
		t = withDefaultNetwork(t)
		err := validate(t)
		if err == nil {
			err = s.prepared(t.Network)
		}
		if err != nil {
			s.log.Warn("pool template refused", "language", t.Language, "err", err)
			continue
		}
		sl := &slot{tmpl: t, ready: make(chan *launch, size), need: make(chan struct{}, size)}
		for range size {
			sl.refill()
		}
		p.slots = append(p.slots, sl)
		p.done.Add(1)
		go p.fill(ctx, sl)
	}
	s.pool.Store(p)
}

// Close drains the pool (every waiting sandbox is killed and its cgroup removed), waits
// for the cleanup of finished sandboxes and stops the zygote. A sandbox still running
// dies with the zygote; Run must not be called after Close.
func (s *Sandbox) Close() error {
	if p := s.pool.Swap(nil); p != nil {
		p.close()
	}
	s.closeDone()
	s.leaveToZygote()
	if s.zyg.detach() {
		// A one-shot run's zygote finishes the teardown: it ends and reaps the
		// sandboxes, then removes every cgroup this process made (zygote_linux.c),
		// while the run's process exits. Its answer has been written.
		return nil
	}
	s.cleanup.Wait()
	s.deadNets.flush()
	s.zyg.stop()
	s.ll.close(s.log)
	// Every sandbox's cgroup is gone with the cleanup: the server's own dirs follow.
	if err := s.cg.removeAll(); err != nil {
		s.log.Warn("cgroup left behind", "err", err)
		return err
	}
	return nil
}

// PoolStats reports the pool's state; IdleMemory is what the waiting sandboxes'
// cgroups hold (zero without cgroups, where it cannot be measured).
func (s *Sandbox) PoolStats() sandbox.PoolStats {
	p := s.pool.Load()
	if p == nil {
		return sandbox.PoolStats{}
	}
	st := sandbox.PoolStats{Size: p.size, Templates: len(p.slots), Hits: p.hits.Load(), Misses: p.misses.Load()}
	for _, sl := range p.slots {
		// A take may count its sandbox out before fill has counted it in: never below 0.
		st.Ready += max(0, int(sl.waiting.Load()))
	}
	if s.cg.version > 0 {
		st.IdleMemory = s.cg.usage()
	}
	return st
}

func (p *pool) close() {
	p.cancel()
	p.done.Wait()
	for _, sl := range p.slots {
		for {
			select {
			case l := <-sl.ready:
				sl.waiting.Add(-1)
				l.discard()
				p.s.release(l)
				continue
			default:
			}
			break
		}
	}
}

// fill prepares a sandbox for each token until the pool closes. A failing preparation
// is retried with backoff; the calls meanwhile run cold.
func (p *pool) fill(ctx context.Context, sl *slot) {
	defer p.done.Done()
	backoff := 100 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-sl.need:
		}
		for {
			l, err := p.prepare(sl.tmpl)
			if err == nil {
				backoff = 100 * time.Millisecond
				// Counted once it can be taken: counted before the send, PoolStats could
				// report it ready while a take found the channel empty (a miss).
				sl.ready <- l // never blocks: at most size sandboxes exist per slot
				sl.waiting.Add(1)
				break
			}
			p.s.log.Warn("pool: prepare failed", "language", sl.tmpl.Language, "err", err, "retry_in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 30*time.Second)
		}
	}
}

var errDied = errors.New("prepared sandbox died before its call")

// readsProcFD reports whether a preload's argv reads a descriptor through /dev/fd.
func readsProcFD(argv []string) bool {
	return slices.ContainsFunc(argv, func(a string) bool { return strings.Contains(a, "/dev/fd/") })
}

// prepare builds one sandbox for tmpl and waits until its interpreter is loaded.
func (p *pool) prepare(tmpl sandbox.Spec) (*launch, error) {
	spec := tmpl
	spec.ID = newID()
	cfg := p.s.config(spec)
	cfg.Preload = tmpl.Preload
	if p.s.adapt.noProc && readsProcFD(tmpl.Preload) {
		// Under a container's masked /proc the sandbox's /proc is empty, so /dev/fd (a
		// link into it) resolves to nothing and such a bootstrap (bash's BASH_ENV on fd
		// 5) could never load: the sandbox is prepared without its interpreter, which
		// then starts at the handover as in a cold run (still a hit, as before preloads).
		cfg.Preload = nil
	}
	l, err := p.s.prepare(spec, cfg)
	if err != nil {
		return nil, err
	}
	if l.cg != nil {
		// For the spare it took, while its interpreter loads: asked for once it was
		// ready, the spares were made while the next call ran (in the bench, the other
		// build's cold call).
		p.s.cg.refill()
	}
	timer := time.NewTimer(setupTimeout)
	defer timer.Stop()
	select {
	case <-l.readyCh:
		if l.cg != nil {
			l.cg.openCounters() // here, not between the call's exit and its answer
		}
		return l, nil
	case <-l.waited:
		err = errDied
	case <-timer.C:
		err = fmt.Errorf("prepared sandbox not ready within %s", setupTimeout)
	}
	l.discard()
	p.s.release(l)
	if l.setup != nil {
		err = l.setup
	}
	return nil, err
}

// take returns a ready sandbox for spec and its slot, or nil when none matches or none
// is ready. The caller gives the slot its token back when the call is over.
func (p *pool) take(spec sandbox.Spec) (*launch, *slot) {
	for _, sl := range p.slots {
		if !fits(sl.tmpl, spec) {
			continue
		}
		for {
			select {
			case l := <-sl.ready:
				sl.waiting.Add(-1)
				if l.dead() {
					l.discard()
					p.s.release(l)
					sl.refill()
					continue
				}
				p.hits.Add(1)
				return l, sl
			default:
				p.misses.Add(1)
				return nil, nil
			}
		}
	}
	return nil, nil
}

// fits reports whether a sandbox prepared for tmpl can serve spec: the same program and
// environment, the same workspace size, and no limit above the template's (limits are
// only ever lowered at the handover).
func fits(tmpl, spec sandbox.Spec) bool {
	n := len(tmpl.Argv)
	if len(spec.Argv) < n || !slices.Equal(tmpl.Argv, spec.Argv[:n]) ||
		!slices.Equal(tmpl.Env, spec.Env) || !slices.Equal(tmpl.Mounts, spec.Mounts) ||
		!slices.Equal(tmpl.Preload, spec.Preload) {
		return false
	}
	if tmpl.Language != spec.Language || tmpl.Network != spec.Network || tmpl.Environment != spec.Environment ||
		tmpl.CodeFile != spec.CodeFile || tmpl.OutDir != spec.OutDir ||
		tmpl.Artifacts != spec.Artifacts {
		return false
	}
	t, c := tmpl.Limits, spec.Limits
	return c.Workspace == t.Workspace && c.Memory <= t.Memory && c.Pids <= t.Pids &&
		c.CPU <= t.CPU && c.FileSize <= t.FileSize && c.OpenFiles <= t.OpenFiles &&
		effectiveAS(c) <= effectiveAS(t)
}

func effectiveAS(l sandbox.Limits) int64 {
	if l.AddressSpace > 0 {
		return l.AddressSpace
	}
	return l.Memory
}

// dead reports whether the init already exited.
func (l *launch) dead() bool { return closed(l.waited) }

// runPooled serves spec from a prepared sandbox: the cgroup limits are lowered to the
// call's, the call is handed over, and the wall clock starts when the program does.
func (s *Sandbox) runPooled(ctx context.Context, l *launch, sl *slot, spec sandbox.Spec) (sandbox.Result, error) {
	// The refill starts once the caller has had a moment to deliver this result, as a
	// finished sandbox's teardown does (teardownDelay): a preparation is a whole sandbox's
	// set-up and an interpreter's start, which competed with the answer for the CPUs
	// (without the delay a pooled print(1) over MCP took 0.1-0.3 ms longer, in two
	// interleaved A/B runs on 2 CPUs).
	defer time.AfterFunc(teardownDelay, sl.refill)
	if l.cg != nil {
		if err := l.cg.limit(spec.Limits); err != nil {
			l.discard()
			s.release(l)
			err = fmt.Errorf("%w: %w", errCgroup, err)
			return sandbox.Result{ID: spec.ID, Status: sandbox.StatusSandboxError, ExitCode: -1, Detail: err.Error()}, err
		}
	}
	return s.serve(ctx, l, spec)
}
