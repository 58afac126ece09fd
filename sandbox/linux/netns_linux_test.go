package linux

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

// heldNetns lists the network namespaces this process holds a descriptor of, by the
// descriptors' links ("net:[inode]").
func heldNetns(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil {
			if link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err == nil && strings.HasPrefix(link, "net:[") {
				out = append(out, link)
			}
		}
	}
	return out
}

// TestDeadNetnsDroppedTogether: a finished cold run's network namespace is held by the
// server, not by any later run, and dropped with netnsBatch-1 others (or by the timer,
// Wait or Close), so the kernel tears them down in one cleanup_net batch
// (netns_linux.go). Each held namespace is the run's own: not the server's, not another
// run's, and none of them is the namespace a later run is in.
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
	if held := heldNetns(t); len(held) != 0 {
		t.Fatalf("namespaces held before any run: %v", held)
	}
	seen := map[string]bool{}
	for i := 1; i < netnsBatch; i++ {
		res := run(t, sandbox.Spec{Argv: []string{"/usr/bin/readlink", "/proc/self/ns/net"}})
		if res.Status != sandbox.StatusOK {
			t.Fatalf("run %d: %+v", i, brief(res))
		}
		inside := strings.TrimSpace(string(res.Stdout.Bytes()))
		s.cleanup.Wait() // its release, without Wait's flush
		held := heldNetns(t)
		if len(held) != i || s.deadNets.held() != i {
			t.Fatalf("after %d runs the server holds %d namespaces (%d in its batch): %v", i, len(held), s.deadNets.held(), held)
		}
		if seen[inside] || inside == own {
			t.Fatalf("run %d is in namespace %s, the server's (%s) or an earlier run's (%v)", i, inside, own, seen)
		}
		seen[inside] = true
		for _, h := range held {
			if !seen[h] {
				t.Fatalf("the server holds %s, no run's namespace (runs: %v; its own %s)", h, seen, own)
			}
		}
	}
	run(t, sandbox.Spec{Argv: []string{"/bin/true"}})
	s.cleanup.Wait()
	if held := heldNetns(t); len(held) != 0 || s.deadNets.held() != 0 {
		t.Fatalf("the full batch of %d was not dropped: %d held (%v)", netnsBatch, s.deadNets.held(), held)
	}

	// The timer drops a batch that does not fill.
	s.deadNets.mu.Lock()
	s.deadNets.after = 20 * time.Millisecond
	s.deadNets.mu.Unlock()
	run(t, sandbox.Spec{Argv: []string{"/bin/true"}})
	s.cleanup.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for len(heldNetns(t)) != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if held := heldNetns(t); len(held) != 0 {
		t.Fatalf("the timer left %v held", held)
	}
}
