package linux

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/internal/sandboxtest"
	"github.com/airlock-mcp/airlock/sandbox"
)

// proc is a process the test started, and whether it has ended.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startProc(t testing.TB, newPidNS bool) *proc {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if newPidNS {
		// In a user namespace of its own, so that a container without CAP_SYS_ADMIN
		// (podman's default) can make the pid namespace too, as the sandboxes do.
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  unix.CLONE_NEWUSER | unix.CLONE_NEWPID,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(p.end)
	return p
}

func (p *proc) end() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// identity is what p would name its leftovers by, had it been a server: its pid as its
// own pid namespace numbers it, that namespace, and its start time.
func (p *proc) identity(t testing.TB) owner {
	t.Helper()
	pid := strconv.Itoa(p.cmd.Process.Pid)
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+pid+"/ns/pid", &st); err != nil {
		t.Fatal(err)
	}
	start, err := startTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	me, _ := self()
	o := owner{pid: p.cmd.Process.Pid, pidNS: st.Ino, timeNS: me.timeNS, start: start}
	if st.Ino != me.pidNS {
		o.pid = 1 // the first process of its namespace
	}
	return o
}

// A server's sweep of stale cgroups kills the runs in another server's cgroups only when
// that server is proved gone. Each case is the own dir of a server as it would name it,
// with a run's cgroup in it holding a live process: a live owner of this pid namespace
// whose command line does not say airlock (a binary installed under another name: the
// old sweep, guessing from the command line, killed its run; seen with two `airlock
// run`s, the first one's run killed, "sandbox init ended without a report"); a live
// server of another pid namespace (pid 1 there: the old sweep judged the host's pid 1;
// seen with `unshare -p -f --mount-proc airlock run` beside a host `airlock run`); an
// older version's bare pid. The dead owner, the pid now another process's, and (from
// the initial pid namespace, which sees every process) the pid namespace that has ended
// are swept, their runs killed.
func TestStaleSweepKillsOnlyTheProvedGone(t *testing.T) {
	skipUnprivilegedRun(t)
	if os.Geteuid() != 0 {
		sandboxtest.SkipOrFail(t, "the cgroup sweep needs root (v1) or a delegated cgroup")
	}
	m := detectCgroups()
	if m.version == 0 {
		// As the other cgroup tests: a container that gives none (podman's default
		// mounts them read-only) has no sweep to judge.
		t.Skipf("SKIPPING: no cgroups here, so the sweep is not tested: %s", m.reason)
	}
	t.Cleanup(func() { _ = m.removeAll() })
	me, judge := self()
	if !judge {
		t.Fatalf("this process cannot judge owners (%+v): its /proc is not its pid namespace's", me)
	}

	liveSame := startProc(t, false).identity(t)
	liveOther := startProc(t, true).identity(t)
	dead := startProc(t, false)
	deadSame := dead.identity(t)
	deadNS := startProc(t, true)
	deadOther := deadNS.identity(t)
	dead.end()
	deadNS.end()
	reused := liveSame
	reused.start++
	// A dead owner whose one-shot zygote is finishing: a process that holds the open
	// file description the owner took its lock on, as the zygote holds the run's.
	lock := testLock(t)
	deadHeld := deadOwner(t)
	zygote := holdingOwnerLock(t, lock.Name(), deadHeld)

	name := func(o owner) string { return fmt.Sprintf("%d.%s.9", o.pid, o.token()) }
	cases := []struct {
		what, dir string
		swept     bool
	}{
		{"a live owner whose command line is not airlock's", name(liveSame), false},
		{"a live owner in another pid namespace", name(liveOther), false},
		{"an older version's bare pid of no process", fmt.Sprintf("%d.9", deadSame.pid), false},
		{"a dead owner", name(deadSame), true},
		{"an owner whose pid another process has now", name(reused), true},
		{"an owner whose pid namespace has ended", name(deadOther), me.pidNS == initPidNS},
		{"a dead owner whose one-shot zygote holds its lock", name(deadHeld), false},
	}
	type made struct {
		dirs   []string
		victim *proc
	}
	var all []made
	t.Cleanup(func() {
		for _, c := range all {
			c.victim.end()
			for _, d := range c.dirs {
				_ = removeCgroupDir(filepath.Join(d, "7-run"))
				_ = removeCgroupDir(d)
			}
		}
	})
	for _, c := range cases {
		v := made{victim: startProc(t, false)}
		for _, base := range m.shared {
			d := filepath.Join(base, c.dir)
			if err := os.MkdirAll(filepath.Join(d, "7-run"), 0o755); err != nil {
				t.Fatal(err)
			}
			v.dirs = append(v.dirs, d)
			if err := os.WriteFile(filepath.Join(d, "7-run", "cgroup.procs"), []byte(strconv.Itoa(v.victim.cmd.Process.Pid)), 0); err != nil {
				t.Fatal(err)
			}
		}
		all = append(all, v)
	}

	// The kernel reuses a namespace's inode number once the namespace is gone, and other
	// tests' sandboxes make pid namespaces all the time: one that got deadOther's number
	// makes that owner rightly not provably gone, so that case then proves nothing.
	nsReused := livePidNamespaces()[deadOther.pidNS]
	m.cleanStale(slog.New(slog.DiscardHandler), lock)
	if !zygote.alive() {
		t.Fatal("the process holding the dead owner's lock died: the case proved nothing")
	}
	nsReused = nsReused || livePidNamespaces()[deadOther.pidNS]

	for i, c := range cases {
		v := all[i]
		if c.dir == name(deadOther) && nsReused {
			t.Logf("NOT CHECKED: %s: a live pid namespace has its inode number %d now", c.what, deadOther.pidNS)
			continue
		}
		if c.swept {
			select {
			case <-v.victim.done:
			case <-time.After(5 * time.Second):
				t.Errorf("%s (%s): its run still lives after the sweep", c.what, c.dir)
			}
		} else if !v.victim.alive() {
			t.Errorf("%s (%s): the sweep killed its run", c.what, c.dir)
		}
		for _, d := range v.dirs {
			if _, err := os.Stat(d); (err == nil) == c.swept {
				t.Errorf("%s: %s exists %t after the sweep, want %t", c.what, d, err == nil, !c.swept)
			}
		}
	}
}

// A dead owner's leftovers are swept once the process that held its lock (its one-shot
// zygote) has gone too; and a lock at another owner's byte keeps nothing.
func TestStaleSweepTakesAnOwnerOnceItsLockGoes(t *testing.T) {
	lock := testLock(t)
	o := deadOwner(t)
	other := o
	other.start++
	zygote := holdingOwnerLock(t, lock.Name(), other) // the same pid, another process
	var sw sweep
	sw.lock = lock
	if !sw.gone(o) {
		t.Fatalf("a dead owner %+v is not gone while only another owner's lock is held", o)
	}
	zygote.end()
	zygote = holdingOwnerLock(t, lock.Name(), o)
	if sw = (sweep{lock: lock}); sw.gone(o) {
		t.Fatalf("a dead owner %+v whose lock is held is gone", o)
	}
	zygote.end()
	if sw = (sweep{lock: lock}); !sw.gone(o) {
		t.Fatalf("a dead owner %+v whose lock holder has exited is not gone", o)
	}
}

// holdingOwnerLock starts a process that holds o's owner lock in the lock file path on
// an open file description of its own (as a one-shot zygote holds its run's), the test
// keeping no descriptor of it.
func holdingOwnerLock(t *testing.T, path string, o owner) *proc {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lk := o.ownerLock(unix.F_RDLCK)
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "600")
	cmd.ExtraFiles = []*os.File{f}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(p.end)
	return p
}

// The Landlock tier's run directories of other servers are removed on the same proof:
// those of a live owner whose command line is not airlock's, and of a live owner in
// another pid namespace, stay (the old sweep removed both, unmounting their runs'
// workspaces); a dead owner's go.
func TestStaleRunDirsOnlyTheProvedGone(t *testing.T) {
	skipUnprivilegedRun(t)
	if os.Geteuid() != 0 {
		sandboxtest.SkipOrFail(t, "the owners it judges are made in a pid namespace of their own, which needs root")
	}
	liveSame := startProc(t, false).identity(t)
	liveOther := startProc(t, true).identity(t)
	dead := startProc(t, false)
	deadSame := dead.identity(t)
	dead.end()
	parent := t.TempDir()
	dir := func(o owner) string {
		d := filepath.Join(parent, fmt.Sprintf("landlock-%d.%s-x1", o.pid, o.token()))
		if err := os.MkdirAll(filepath.Join(d, "run", "workspace"), 0o700); err != nil {
			t.Fatal(err)
		}
		return d
	}
	keep := []string{dir(liveSame), dir(liveOther)}
	gone := dir(deadSame)
	removeStaleRuns(parent)
	for _, d := range keep {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("a live server's run directory was removed: %v", err)
		}
	}
	if _, err := os.Stat(gone); err == nil {
		t.Errorf("a dead server's run directory %s was left", gone)
	}
}

// skipUnprivilegedRun skips a sweep test in TestUnprivileged's run as nobody: its
// owners are processes in pid namespaces of their own and cgroups, which only root
// makes; the root run of the same suite covers it (and fails where it cannot run).
func skipUnprivilegedRun(t *testing.T) {
	t.Helper()
	if os.Getenv("AIRLOCK_UNPRIV_CHILD") == "1" {
		t.Skip("the unprivileged run: the sweep's owners need root to make; the root run covers it")
	}
}

// BenchmarkStaleSweep is one sweep of stale cgroups as a one-shot run's start makes it
// beside itself, with five live servers' own dirs (each with a run's cgroup) in every
// shared base (and whatever this host's servers have there): none of them is removed,
// every owner is judged.
func BenchmarkStaleSweep(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("SKIPPING: the cgroup sweep needs root (v1) or a delegated cgroup")
	}
	m := detectCgroups()
	if m.version == 0 {
		b.Skipf("SKIPPING: no cgroups here: %s", m.reason)
	}
	b.Cleanup(func() { _ = m.removeAll() })
	var dirs []string
	b.Cleanup(func() {
		for _, d := range slices.Backward(dirs) {
			_ = removeCgroupDir(d)
		}
	})
	for range 5 {
		o := startProc(b, false).identity(b)
		for _, base := range m.shared {
			d := filepath.Join(base, fmt.Sprintf("%d.%s.1", o.pid, o.token()))
			if err := os.MkdirAll(filepath.Join(d, "7-run"), 0o755); err != nil {
				b.Fatal(err)
			}
			dirs = append(dirs, d, filepath.Join(d, "7-run"))
		}
	}
	log := slog.New(slog.DiscardHandler)
	m.cleanStale(log, nil) // what dead servers on this host left, before the timing
	for b.Loop() {
		m.cleanStale(log, nil)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			b.Fatalf("the sweep removed a live server's dir: %v", err)
		}
	}
}

// A one-shot backend (`airlock run`, its self-check reused from a stamp) sweeps once its
// program has been spawned, not beside its start: a proved-gone owner's cgroups made
// after New, with a process in them, are killed and removed by that run's sweep all
// the same.
func TestOneShotSweepsOnceItsProgramIsSpawned(t *testing.T) {
	skipUnprivilegedRun(t)
	if os.Geteuid() != 0 {
		sandboxtest.SkipOrFail(t, "the cgroup sweep needs root (v1) or a delegated cgroup")
	}
	opts := sandbox.Options{OneShot: true, Stamps: stampStore(t, t.TempDir())}
	first, err := New(opts) // the full check, stamped: its spawn is New's
	sandboxtest.Require(t, err)
	first.Close()
	s := newStamped(t, opts)
	if s.checked == nil || !s.filtersStamped {
		t.Fatal("the second one-shot backend did not reuse the stamped check")
	}
	if s.cg.version == 0 {
		t.Skipf("SKIPPING: no cgroups here, so the sweep is not tested: %s", s.cg.reason)
	}
	dead := startProc(t, false)
	gone := dead.identity(t)
	dead.end()
	victim := startProc(t, false)
	t.Cleanup(victim.end)
	var dirs []string
	for _, base := range s.cg.shared {
		d := filepath.Join(base, fmt.Sprintf("%d.%s.9", gone.pid, gone.token()))
		if err := os.MkdirAll(filepath.Join(d, "7-run"), 0o755); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
		t.Cleanup(func() {
			_ = removeCgroupDir(filepath.Join(d, "7-run"))
			_ = removeCgroupDir(d)
		})
		if err := os.WriteFile(filepath.Join(d, "7-run", "cgroup.procs"), []byte(strconv.Itoa(victim.cmd.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.Run(t.Context(), withDefaults(shSpec("true", newMarker())))
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("run: %v %s", err, brief(res))
	}
	select {
	case <-victim.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the gone owner's run still lives after the one-shot run's sweep")
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, d := range dirs {
		for _, err := os.Stat(d); err == nil; _, err = os.Stat(d) {
			if time.Now().After(deadline) {
				t.Fatalf("%s is left after the one-shot run's sweep", d)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// testLock is a host-id lock file of the test's own, closed when it ends.
func testLock(t *testing.T) *os.File {
	t.Helper()
	lock, err := openLock(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })
	return lock
}

// deadOwner is the identity of a process that has exited.
func deadOwner(t *testing.T) owner {
	t.Helper()
	p := startProc(t, false)
	o := p.identity(t)
	p.end()
	return o
}
