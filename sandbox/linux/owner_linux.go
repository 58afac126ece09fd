package linux

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/internal/sysfile"
)

// A server's leftovers (its cgroups, the Landlock tier's run directories) are named by
// their owner, so that a later server can remove what a dead one left. Other airlock
// processes share those places while alive: servers in the same cgroup, some in a pid
// namespace of their own (unshare -p, bwrap --unshare-pid, a container left in its
// caller's cgroup), some from a binary installed under another name. A pid alone, with
// "is it an airlock" guessed from /proc/PID/cmdline, named a live server dead in each
// of those cases, and the sweep killed its runs in flight. So the name carries the
// owner's pid namespace and time namespace and its start time, and a server removes a
// leftover only when it can prove the owner gone (sweep.gone). Anything else (a live
// namespace's it cannot see into, an older version's bare pid) is left alone: a leak,
// never a kill.

// A one-shot run (`airlock run`) exits as soon as its answer is written and leaves its
// zygote to finish the teardown (zygote_linux.c): until that is done the run's dirs are
// the zygote's to remove, yet by /proc their owner is gone, and back to back the next
// run's sweep killed and removed them beside that zygote (half of the sweep's samples;
// docs/performance.md, tenth round). So each owner also holds a read lock on one byte of
// the host-id lock file (ownerLock), on the open file description whose copy the zygote
// is handed with its list (zygote.leaveBehind): the kernel drops it only with the last
// of the owner and that zygote. An owner whose lock is held is not gone (sweep.held).

// ownerLockBase is where the owners' locks are in the host-id lock file: above every
// host id's own lock (at the uid itself, below 2^32).
const ownerLockBase = 1 << 62

// ownerLock is o's byte in the host-id lock file: a hash of the whole identity, so that
// a later process with the same pid has another. Two owners that share a byte only
// keep each other's leftovers a while longer: a leak, never a kill.
func (o owner) ownerLock(typ int16) unix.Flock_t {
	b := binary.LittleEndian.AppendUint64(nil, uint64(o.pid))
	b = binary.LittleEndian.AppendUint64(b, o.pidNS)
	b = binary.LittleEndian.AppendUint64(b, o.timeNS)
	b = binary.LittleEndian.AppendUint64(b, o.start)
	h := fnv.New64a()
	_, _ = h.Write(b)
	return unix.Flock_t{Type: typ, Start: ownerLockBase + int64(h.Sum64()>>3), Len: 1}
}

// holdOwner takes this process's owner lock on f, the host-id lock file, for as long
// as f's open file description lives. It cannot fail on a file openLock has checked;
// if it did, the sweeps would judge this owner by /proc alone, as before the lock.
func holdOwner(f *os.File) {
	o, judge := self()
	if !judge {
		return // its identity is not one a sweep can match
	}
	lk := o.ownerLock(unix.F_RDLCK)
	for errors.Is(unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk), unix.EINTR) {
	}
}

// owner is a server process's identity as its leftovers' names carry it.
type owner struct {
	pid           int
	pidNS, timeNS uint64 // inode numbers of /proc/self/ns/{pid,time} (time: 0 if absent)
	start         uint64 // the start time in /proc/PID/stat, in clock ticks after boot
}

// token is the part of a name after the pid: "PIDNS.TIMENS.START".
func (o owner) token() string { return fmt.Sprintf("%d.%d.%d", o.pidNS, o.timeNS, o.start) }

// self is this process's identity, and whether this process can judge others' (its
// /proc shows its own pid namespace). Unknown parts are 0, which no judge matches.
var self = sync.OnceValues(func() (owner, bool) {
	o := owner{pid: os.Getpid(), pidNS: nsInode("pid"), timeNS: nsInode("time")}
	start, err := startTime("self")
	o.start = start
	// /proc/self names this process as /proc's pid namespace sees it: with /proc from
	// another namespace (unshare -p without a fresh /proc) every /proc/PID is someone
	// else's.
	link, lerr := os.Readlink("/proc/self")
	judge := err == nil && lerr == nil && link == strconv.Itoa(o.pid) && o.pidNS != 0
	return o, judge
})

func nsInode(ns string) uint64 {
	var st unix.Stat_t
	if unix.Stat("/proc/self/ns/"+ns, &st) != nil {
		return 0
	}
	return st.Ino
}

// startTime is field 22 of /proc/PID/stat. The command name before it may hold spaces
// and parentheses: the fields start after the last ')'.
func startTime(pid string) (uint64, error) {
	b, err := sysfile.Read("/proc/" + pid + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%s/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%s/stat: %d fields", pid, len(f)+2)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// ownerName is "PID.TOKEN", this process's owner part of a leftover's name.
func ownerName() string {
	o, _ := self()
	return strconv.Itoa(o.pid) + "." + o.token()
}

// parseOwner reads "PID.PIDNS.TIMENS.START"; ok is false for any other form (an older
// version's bare pid).
func parseOwner(s string) (o owner, ok bool) {
	f := strings.Split(s, ".")
	if len(f) != 4 {
		return owner{}, false
	}
	var n [4]uint64
	for i, x := range f {
		v, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			return owner{}, false
		}
		n[i] = v
	}
	if n[0] == 0 || n[0] > 1<<22 {
		return owner{}, false
	}
	return owner{pid: int(n[0]), pidNS: n[1], timeNS: n[2], start: n[3]}, true
}

// initPidNS is the initial pid namespace's inode number (the kernel's PROC_PID_INIT_INO).
const initPidNS = 0xEFFFFFFC

// sweep judges the owners of one sweep's leftovers; nsAlive is the pid namespaces that
// have a process, read from /proc once, when a leftover of another namespace is found.
// judged keeps each owner's verdict for the rest of the sweep: a server's own dir is in
// every shared base (four with this host's cgroup v1: memory, pids, cpu, cpuacct), and
// reading the same live server's /proc/PID/stat once per base was half of a one-shot
// run's sweep (docs/performance.md, eighth round). A verdict cannot go stale in the
// wrong direction: an owner is a pid and its start time, and once gone it never comes
// back (a new process with that pid starts later); one that ends during the sweep is
// left to the next.
type sweep struct {
	nsAlive map[uint64]bool
	judged  map[owner]bool
	// lock is the host-id lock file, whose owner locks keep an owner that /proc proves
	// gone alive while its one-shot zygote is (ownerLock); nil: /proc alone judges.
	lock *os.File
}

// gone reports whether o is certainly no running process: only then may what it left
// be killed and removed. An owner of this pid namespace is gone when its pid is gone
// or another process's. One of another pid namespace is gone only when that whole
// namespace is: a server in the initial namespace sees every process, and a namespace
// lives exactly as long as its init, whose entry stays in /proc all that time (a
// server in a namespace of its own that was its pid 1 leaves its dirs behind that way).
func (s *sweep) gone(o owner) bool {
	if g, ok := s.judged[o]; ok {
		return g
	}
	g := s.judge(o) && !s.held(o)
	if s.judged == nil {
		s.judged = map[owner]bool{}
	}
	s.judged[o] = g
	return g
}

// judge is gone without the sweep's memory.
func (s *sweep) judge(o owner) bool {
	me, judge := self()
	switch {
	case !judge:
		return false
	case o.pidNS != me.pidNS:
		if me.pidNS != initPidNS || o.pidNS == 0 {
			return false
		}
		if s.nsAlive == nil {
			s.nsAlive = livePidNamespaces()
		}
		return s.nsAlive != nil && !s.nsAlive[o.pidNS]
	case o.timeNS != me.timeNS:
		return false // the start times were read with another clock offset
	}
	start, err := startTime(strconv.Itoa(o.pid))
	switch {
	case err == nil:
		return start != o.start // the pid is another process's now
	case errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH):
		return true
	}
	return false
}

// held reports whether an open file description other than the sweep's holds o's owner
// lock: o, or the one-shot zygote it handed its copy to, is alive. A lock that cannot be
// read counts as held.
func (s *sweep) held(o owner) bool {
	if s.lock == nil {
		return false
	}
	lk := o.ownerLock(unix.F_WRLCK)
	for {
		err := unix.FcntlFlock(s.lock.Fd(), unix.F_OFD_GETLK, &lk)
		switch {
		case err == nil:
			return lk.Type != unix.F_UNLCK
		case !errors.Is(err, unix.EINTR):
			return true
		}
	}
}

// livePidNamespaces is the pid namespace of every process in /proc; nil if /proc cannot
// be listed (then nothing of another namespace is proved gone).
func livePidNamespaces() map[uint64]bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	live := map[uint64]bool{}
	var st unix.Stat_t
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		if unix.Stat("/proc/"+e.Name()+"/ns/pid", &st) == nil {
			live[st.Ino] = true
		}
	}
	return live
}
