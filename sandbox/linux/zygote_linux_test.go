package linux

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/internal/sandboxtest"
	"github.com/airlock-mcp/airlock/sandbox"
)

func zygotePID(s *Sandbox) int {
	s.zyg.mu.Lock()
	defer s.zyg.mu.Unlock()
	return s.zyg.pid
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !containsState(string(b), "Z")
}

func containsState(stat, state string) bool {
	for i := len(stat) - 1; i >= 0; i-- {
		if stat[i] == ')' {
			return len(stat) > i+2 && stat[i+2:i+3] == state
		}
	}
	return false
}

// A zygote that dies is replaced at the next call, and a sandbox it was serving dies
// with it (its spawner's Pdeathsig) instead of running on unsupervised.
func TestZygoteReplacedAfterDeath(t *testing.T) {
	s, marker, done := sleepingRun(t, sandbox.Options{})
	old := zygotePID(s)
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res.Status == sandbox.StatusOK {
			t.Errorf("the run outlived its zygote: %s", brief(res))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not end when its zygote was killed")
	}
	// Without the spawner's orderly kill, the pid namespace ends as its init's Pdeathsig
	// lands: soon, not necessarily before Run returns.
	deadline := time.Now().Add(2 * time.Second)
	for len(hostProcsWith(marker)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	assertNoSurvivors(t, marker)
	res, err := s.Run(context.Background(), withDefaults(sandbox.Spec{Argv: []string{"/bin/echo", "again"}}))
	if err != nil || res.Status != sandbox.StatusOK || string(res.Stdout.Bytes()) != "again\n" {
		t.Fatalf("the next run: %v %s", err, brief(res))
	}
	if now := zygotePID(s); now == old || !alive(now) {
		t.Errorf("zygote %d, want a new live one (the old was %d)", now, old)
	}
}

// Close ends the zygote: a server that stopped leaves no helper behind.
func TestCloseStopsZygote(t *testing.T) {
	s, err := New(sandbox.Options{})
	sandboxtest.Require(t, err)
	if res, err := s.Run(context.Background(), withDefaults(sandbox.Spec{Argv: []string{"/bin/true"}})); err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("%v %s", err, brief(res))
	}
	pid := zygotePID(s)
	if !alive(pid) {
		t.Fatalf("zygote %d is not running", pid)
	}
	s.Close()
	if alive(pid) {
		t.Errorf("zygote %d still running after Close", pid)
	}
}

// A one-shot backend's zygote outlives its process and finishes what that left: when
// its socket closes with a sandbox still running (the run's process killed in the
// middle), it ends the sandbox, removes every cgroup dir the backend made and exits.
func TestOneShotZygoteFinishes(t *testing.T) {
	s, marker, done := sleepingRun(t, sandbox.Options{OneShot: true})
	trees, _ := s.cg.teardownDirs()
	// A process the sandboxes' teardown would not end, in a cgroup of the backend's:
	// the zygote kills what a cgroup it removes still holds. (Without cgroups, as
	// nobody, there is none to put it in.)
	stray := exec.Command("/bin/sleep", "60")
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	strayDone := make(chan struct{})
	go func() { _ = stray.Wait(); close(strayDone) }()
	if len(trees) == 0 {
		t.Log("no cgroups here: the stray process is not put in one")
		_ = stray.Process.Kill()
	}
	for _, d := range trees {
		dir := filepath.Join(d, "stray")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(stray.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
	}
	s.zyg.mu.Lock()
	pid, wait := s.zyg.pid, s.zyg.wait
	s.zyg.mu.Unlock()
	exited := make(chan struct{})
	go func() { wait(); close(exited) }()
	if !s.zyg.detach() {
		t.Fatal("a one-shot zygote with its list was not left to finish")
	}
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("the one-shot zygote %d did not finish", pid)
	}
	assertNoSurvivors(t, marker)
	select {
	case <-strayDone: // dead before its cgroup could go; reaped here a moment later
	case <-time.After(5 * time.Second):
		_ = stray.Process.Kill()
		t.Error("a process in a cgroup the zygote removed outlived it")
	}
	for _, d := range trees {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("cgroup %s is still there after the zygote finished (%v)", d, err)
		}
	}
	if res := <-done; res.Status == sandbox.StatusOK {
		t.Errorf("the run outlived its zygote: %s", brief(res))
	}
}

// A server's zygote is not one-shot: a ZYG_LEAVE sent to it (with a descriptor) is
// dropped, descriptor and all, and it goes on serving.
func TestServerZygoteIgnoresLeave(t *testing.T) {
	s, err := New(sandbox.Options{})
	sandboxtest.Require(t, err)
	t.Cleanup(func() { s.Close() })
	run := func() {
		t.Helper()
		if res, err := s.Run(context.Background(), withDefaults(sandbox.Spec{Argv: []string{"/bin/true"}})); err != nil || res.Status != sandbox.StatusOK {
			t.Fatalf("%v %s", err, brief(res))
		}
	}
	run()
	fds := func() int {
		ents, _ := os.ReadDir("/proc/" + strconv.Itoa(zygotePID(s)) + "/fd")
		return len(ents)
	}
	before := fds()
	f, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := s.zyg.leaveBehind([]string{t.TempDir()}, nil, int(f.Fd())); err != nil || !s.zyg.left {
		t.Fatalf("send: %v (delivered %t)", err, s.zyg.left)
	}
	run()
	if after := fds(); after != before {
		t.Errorf("the server's zygote holds %d descriptors after a ZYG_LEAVE, %d before", after, before)
	}
	if s.zyg.detach() {
		t.Error("a server's zygote was left to finish by itself")
	}
}

// waitPidfd must not take an interrupted poll for an exit: the launch reads "the
// spawner exited" as "every process of the sandbox is dead" and stops supervising.
// (A soak of 2000 calls once hung that way: the run never ended.)
func TestWaitPidfdSurvivesEINTR(t *testing.T) {
	cmd := exec.Command("/bin/sleep", "0.3")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.PidfdOpen(cmd.Process.Pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	interrupted := 0
	poll := func(p []unix.PollFd, timeout int) (int, error) {
		if interrupted < 3 {
			interrupted++
			return 0, unix.EINTR
		}
		return unix.Poll(p, timeout)
	}
	start := time.Now()
	if err := waitPidfdPolling(f, poll); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 250*time.Millisecond || interrupted < 3 {
		t.Fatalf("waitPidfd returned after %s (%d interruptions), before the process exited", took, interrupted)
	}
	_ = cmd.Wait()
}

// sleepingRun starts a backend with opts and a run in it that sleeps for a minute, and
// returns once the run's program is on the host; done gets the run's result.
func sleepingRun(t *testing.T, opts sandbox.Options) (s *Sandbox, marker string, done <-chan sandbox.Result) {
	t.Helper()
	s, err := New(opts)
	sandboxtest.Require(t, err)
	t.Cleanup(func() { s.Close() })
	marker = newMarker()
	results := make(chan sandbox.Result, 1)
	go func() {
		res, _ := s.Run(context.Background(), withDefaults(shSpec("sleep 60", marker)))
		results <- res
	}()
	waitHostProc(t, marker, 5*time.Second)
	return s, marker, results
}
