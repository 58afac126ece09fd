package linux

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

// oomScore is the host's view of a process's oom_score_adj, and its parent's pid.
func oomScore(t *testing.T, pid int) (int, int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "oom_score_adj"))
	if err != nil {
		t.Fatal(err)
	}
	adj, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(st)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	ppid, _ := strconv.Atoi(f[1])
	return adj, ppid
}

// lowerScore tries to take its own score back down to the server's, then waits.
const lowerScore = `
import time
try:
    open("/proc/self/oom_score_adj", "w").write("0")
except OSError:
    pass
print("up", flush=True)
time.sleep(30)
`

// Where the memory of what holds both the server and its sandboxes runs out (a pod's
// limit, no cgroup of the sandbox's own), the OOM killer must take a sandbox's process,
// never the server: a program's memfds and shared memory count for no process's RSS, and
// in podman one run's memfds made the kernel kill the 19 MiB server. So every process of
// a sandbox (program, init, spawner) has oom_score_adj 1000, and the server keeps its
// own, though the program tries to write its own back to 0 (where it has a /proc: the
// sandbox's refuses the write). Two runs in flight. Seen failing before the spawner raised it: 0 for each.
func TestSandboxProcessesGoFirstOnOOM(t *testing.T) {
	s := testSandbox(t)
	own, _ := oomScore(t, os.Getpid())
	if own == 1000 {
		t.Fatal("this test process already has oom_score_adj 1000: the test would prove nothing")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var dones []<-chan sandbox.Result
	var markers []string
	for range 2 {
		m := newMarker()
		markers = append(markers, m)
		dones = append(dones, runPrinting(t, ctx, s, pySpec(lowerScore, m), "sleeper"))
	}
	for _, m := range markers {
		pids := hostProcsWith(m)
		if len(pids) != 1 {
			t.Fatalf("marker %s: host pids %v", m, pids)
		}
		// The program, its init, and the spawner above it.
		pid := pids[0]
		for _, who := range []string{"program", "init", "spawner"} {
			adj, ppid := oomScore(t, pid)
			if adj != 1000 {
				t.Errorf("%s %d: oom_score_adj %d, want 1000", who, pid, adj)
			}
			pid = ppid
		}
	}
	if after, _ := oomScore(t, os.Getpid()); after != own {
		t.Errorf("the server's own oom_score_adj changed: %d, was %d", after, own)
	}
	cancel()
	for _, d := range dones {
		<-d
	}
}
