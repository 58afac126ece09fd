package linux

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

// batchNetns lists what the sandbox's batch of dead network namespaces holds: each
// descriptor's link ("net:[inode]"), keyed by the descriptor.
func batchNetns(t *testing.T, s *Sandbox) map[int]string {
	t.Helper()
	s.deadNets.mu.Lock()
	defer s.deadNets.mu.Unlock()
	out := map[int]string{}
	for _, fd := range s.deadNets.fds {
		link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		if err != nil {
			t.Fatalf("held descriptor %d: %v", fd, err)
		}
		out[fd] = link
	}
	return out
}

// stillOpen lists the descriptors of held that still name the same namespace.
func stillOpen(held map[int]string) []string {
	var out []string
	for fd, link := range held {
		if l, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err == nil && l == link {
			out = append(out, link)
		}
	}
	return out
}

// TestDeadNetnsDroppedTogether: a finished cold run's network namespace is held by the
// server and dropped with netnsBatch-1 others (or by the timer, Wait or Close), so the
// kernel tears them down in one cleanup_net batch (netns_linux.go). Each held namespace
// is a finished run's own: not the server's, not another run's, and not the namespace
// a later run is in.
func TestDeadNetnsDroppedTogether(t *testing.T) {
	s := testSandbox(t)
	if s.ll != nil {
		t.Skip("the Landlock tier creates no network namespace")
	}
	s.Wait() // earlier tests' namespaces dropped
	s.deadNets.mu.Lock()
	s.deadNets.after = time.Hour // only the batch, Wait or Close drop them here
	s.deadNets.mu.Unlock()
	t.Cleanup(func() {
		s.deadNets.mu.Lock()
		s.deadNets.after = 0
		s.deadNets.mu.Unlock()
		s.Wait()
	})
	own, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	// A sandbox given an empty /proc (a container that masks its own) cannot name its
	// namespace; there the held ones are still checked distinct and not the server's.
	seeInside := !s.adapt.noProc
	if !seeInside {
		t.Log("NOT CHECKED: THIS HOST GIVES SANDBOXES AN EMPTY /proc (container adaptation): a run cannot name its network namespace, so a held one is not matched to the run that was in it")
	}
	runs := map[string]bool{} // the namespaces the runs were in
	var held map[int]string
	for i := 1; i < netnsBatch; i++ {
		argv := []string{"/usr/bin/readlink", "/proc/self/ns/net"}
		if !seeInside {
			argv = []string{"/bin/true"}
		}
		res := run(t, sandbox.Spec{Argv: argv})
		if res.Status != sandbox.StatusOK {
			t.Fatalf("run %d: %+v", i, brief(res))
		}
		if seeInside {
			inside := strings.TrimSpace(string(res.Stdout.Bytes()))
			if !strings.HasPrefix(inside, "net:[") || runs[inside] || inside == own {
				t.Fatalf("run %d is in namespace %q: the server's (%s), an earlier run's (%v), or none", i, inside, own, runs)
			}
			for _, h := range held {
				if h == inside {
					t.Fatalf("run %d is in %s, a dead run's namespace the server holds", i, inside)
				}
			}
			runs[inside] = true
		}
		s.cleanup.Wait() // its release, without Wait's flush
		held = batchNetns(t, s)
		if len(held) != i {
			t.Fatalf("after %d runs the server holds %d namespaces: %v", i, len(held), held)
		}
		distinct := map[string]bool{}
		for _, h := range held {
			if h == own || distinct[h] || (seeInside && !runs[h]) {
				t.Fatalf("the server holds %s: its own (%s), held twice, or no run's namespace (runs: %v)", h, own, runs)
			}
			distinct[h] = true
		}
	}
	run(t, sandbox.Spec{Argv: []string{"/bin/true"}})
	s.cleanup.Wait()
	if n, open := s.deadNets.held(), stillOpen(held); n != 0 || len(open) != 0 {
		t.Fatalf("the full batch of %d was not dropped: %d held, still open %v", netnsBatch, n, open)
	}

	// The timer drops a batch that does not fill.
	s.deadNets.mu.Lock()
	s.deadNets.after = 20 * time.Millisecond
	s.deadNets.mu.Unlock()
	run(t, sandbox.Spec{Argv: []string{"/bin/true"}})
	s.cleanup.Wait()
	held = batchNetns(t, s)
	deadline := time.Now().Add(5 * time.Second)
	for s.deadNets.held() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n, open := s.deadNets.held(), stillOpen(held); n != 0 || len(open) != 0 {
		t.Fatalf("the timer left %d held, still open %v", n, open)
	}
}
