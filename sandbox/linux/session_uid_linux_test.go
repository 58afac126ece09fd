package linux

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/sandbox"
	sessions "github.com/airlock-mcp/airlock/session"
)

// TestSessionExpiryReturnsItsHostUID: a session holds a host uid of its own for its
// whole life. Its code tries to keep that uid after the session: daemons in new
// sessions that ignore SIGTERM and SIGHUP, one of them double-forked. Once the session
// has idle-expired, no host process has the uid, the cross-server lock on it is free
// (another server could take it) and the uid is back in this server's free list, not
// quarantined: a session cannot hold a host uid past its end, which with many sessions
// would exhaust the block for other tenants.
func TestSessionExpiryReturnsItsHostUID(t *testing.T) {
	s := testSandbox(t)
	needSessions(t, s)
	if !s.ids.isolated() || s.ids.lock == nil {
		t.Skipf("SKIPPING: the %s id scheme shares one host uid by design (TestTenantBudgets checks the probe says so)", s.ids.scheme)
	}
	m := sessions.New(sessions.Limits{IdleTTL: 300 * time.Millisecond, MaxLifetime: time.Hour, MaxPerClient: 4, MaxTotal: 16}, nil)
	t.Cleanup(m.Close)
	marker := newMarker()
	var ss sandbox.Session
	h, err := m.Open("owner", "python", nil, func(string) (sandbox.Session, error) {
		var err error
		ss, err = s.OpenSession(context.Background(), withDefaults(sessionSpec(t, "python")))
		return ss, err
	})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	ids := ss.(*session).l.ids
	hold := `import signal, time
for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(s, signal.SIG_IGN)
time.sleep(300)`
	res := call(t, ss, "import os, subprocess, sys\n"+
		"code = "+strconv.Quote(hold)+"\n"+
		"subprocess.Popen([sys.executable, '-c', code, '"+marker+"'], start_new_session=True)\n"+
		"if os.fork() == 0:\n"+
		"    os.setsid()\n"+
		"    if os.fork() == 0:\n"+
		"        os.execv(sys.executable, [sys.executable, '-c', code, '"+marker+"'])\n"+
		"    os._exit(0)\n"+
		"print(os.getuid())")
	wantOut(t, res, sandbox.StatusOK, "1000")
	m.Release(h, false)
	waitHostProc(t, marker, 5*time.Second)
	if n := len(procsOfUID(ids.uid)); n == 0 {
		t.Fatalf("no host process has the session's uid %d while it runs", ids.uid)
	}
	select {
	case <-ss.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the idle session did not expire")
	}
	s.Wait()
	assertNoSurvivors(t, marker)
	if pids := procsOfUID(ids.uid); len(pids) > 0 {
		t.Fatalf("host processes of the expired session's uid %d: %v", ids.uid, pids)
	}
	// Another open file description is another server, as far as OFD locks go.
	f, err := os.OpenFile(s.ids.lock.Name(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Start: int64(ids.uid), Len: 1}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		t.Fatal(err)
	}
	if lk.Type != unix.F_UNLCK {
		t.Fatalf("the expired session's uid %d is still locked in %s", ids.uid, s.ids.lock.Name())
	}
	s.ids.mu.Lock()
	free, bad := slices.Contains(s.ids.free, ids.off), s.ids.bad
	s.ids.mu.Unlock()
	if !free || bad != 0 {
		t.Fatalf("the expired session's uid %d: back in the free list %v, quarantined ids %d", ids.uid, free, bad)
	}
}

// procsOfUID lists the host processes whose real, effective or saved uid is uid.
func procsOfUID(uid uint32) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 4 && f[0] == "Uid:" {
				u := strconv.FormatUint(uint64(uid), 10)
				if f[1] == u || f[2] == u || f[3] == u {
					pids = append(pids, pid)
				}
			}
		}
	}
	return pids
}
