package linux

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/internal/stamp"
	"github.com/airlock-mcp/airlock/internal/sysfile"
	"github.com/airlock-mcp/airlock/sandbox"
)

// Host ids: which host uid and gid a sandbox's uid and gid 1000 map to.
//
// The kernel keeps several budgets per user, not per process or cgroup: pipe buffer
// pages (fs.pipe-user-pages-soft), descriptors in flight over unix sockets (bounded by
// RLIMIT_NOFILE), and, charged up the user-namespace chain to the namespace's creator,
// pending signals, message-queue bytes, locked memory and processes. Sandboxes sharing
// one host uid share every one of them: one run could starve the next, and host
// processes of that uid (or of the creator: root) with it. So each live sandbox gets a
// host uid of its own (isolate's box-uid scheme):
//
//	scheme  server        ids                                  creator of the namespace
//	range   root          sandbox.uid_range, one uid+gid each  that uid (the spawner switches first)
//	subid   unprivileged  its /etc/subuid, /etc/subgid ranges  the server's uid (newuidmap writes the maps)
//	own     unprivileged  its own uid and gid, shared          the server's uid
//	shared  root          sandbox.host_user, shared            root (sandbox.uid_range = off)
//
// own and shared leave the per-uid budgets shared between concurrent runs; the probe
// reports cross-run isolation as degraded there. The per-namespace-chain budgets are
// also bounded per sandbox by rlimits (rlimit_linux.go), which holds in every scheme.

const (
	schemeRange  = "range"
	schemeSubID  = "subid"
	schemeOwn    = "own"
	schemeShared = "shared"
)

// DefaultUIDRange is the block a root server gives its sandboxes unless configured:
// 65536 ids just above the 0x00080000-0x6FFFFFFF block systemd leaves to containers
// (nspawn, homed and dynamic users sit below 65536), and below 2^31, which some tools
// still treat as signed.
const DefaultUIDRange = "1879048192-1879113727"

// hostIDs hands out host ids. It is safe for concurrent use.
type hostIDs struct {
	scheme   string
	uid, gid uint32 // the first id (range, subid) or the only one (own, shared)
	size     uint32 // ids in the block; 1 for own and shared
	// uidmap, gidmap: newuidmap and newgidmap, for subid.
	uidmap, gidmap string

	// lock holds one byte-range lock per id in use, at the offset of the uid itself:
	// other airlock servers on this host (one per MCP client is common) take ids from
	// the same block, and two live sandboxes must never share one. The kernel drops a
	// dead server's locks with its sandboxes. It also holds this process's owner lock
	// (holdOwner). Nil for a single shared id where the file cannot be opened.
	lock *os.File

	mu   sync.Mutex
	next uint32   // ids below next have been tried at least once
	free []uint32 // released offsets, oldest first: a uid rests as long as it can
	bad  int      // quarantined: a sandbox left a process the spawner could not end
}

// lease is one sandbox's host ids.
type lease struct {
	uid, gid uint32
	off      uint32 // offset in the block; meaningless for a single shared id
}

var errNoIDs = errors.New("no free sandbox host id")

// acquire takes a free id. A single shared id is never exhausted.
func (h *hostIDs) acquire() (lease, error) {
	if h.size == 1 && (h.scheme == schemeOwn || h.scheme == schemeShared) {
		return lease{uid: h.uid, gid: h.gid}, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// Every id not held here is a candidate once; one another server holds goes to the
	// back of the queue.
	for range h.size {
		var off uint32
		switch {
		case h.next < h.size:
			off = h.next
			h.next++
		case len(h.free) > 0:
			off = h.free[0]
			h.free = h.free[1:]
		default:
			return lease{}, fmt.Errorf("%w: all %d ids of the block from %d are in use (%d quarantined); widen sandbox.uid_range or lower concurrency.max_parallel and pool.size", errNoIDs, h.size, h.uid, h.bad)
		}
		taken, err := h.lockID(h.uid+off, unix.F_WRLCK)
		if err != nil {
			h.free = append(h.free, off)
			return lease{}, fmt.Errorf("%w: lock host id %d in %s: %w", errNoIDs, h.uid+off, h.lock.Name(), err)
		}
		if !taken {
			h.free = append(h.free, off)
			continue
		}
		return lease{uid: h.uid + off, gid: h.gid + off, off: off}, nil
	}
	return lease{}, fmt.Errorf("%w: every id of the block from %d is in use by this or another airlock server; widen sandbox.uid_range", errNoIDs, h.uid)
}

// lockID takes (F_WRLCK) or drops (F_UNLCK) the cross-server lock on uid. It reports
// false when another server holds it.
func (h *hostIDs) lockID(uid uint32, typ int16) (bool, error) {
	lk := unix.Flock_t{Type: typ, Whence: 0, Start: int64(uid), Len: 1}
	for {
		err := unix.FcntlFlock(h.lock.Fd(), unix.F_OFD_SETLK, &lk)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EACCES):
			return false, nil
		}
		return false, err
	}
}

// openLock opens the cross-server lock file, creating its directory private to the
// server's user: another user must not be able to hold ids it does not own.
func openLock(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return nil, err
	}
	if st.Uid != uint32(os.Geteuid()) || st.Mode&0o022 != 0 {
		return nil, fmt.Errorf("%s must belong to uid %d and not be writable by others", dir, os.Geteuid())
	}
	f, err := os.OpenFile(filepath.Join(dir, "host-ids.lock"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	// Dropping a lock not held changes nothing and shows the kernel has the locks: id
	// 0 is never a sandbox's.
	h := hostIDs{lock: f}
	if _, err := h.lockID(0, unix.F_UNLCK); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s refuses open file description locks (fcntl F_OFD_SETLK: %w)%s", f.Name(), err, lockHint(dir))
	}
	holdOwner(f)
	return f, nil
}

// ownerOnlyLock is the lock file for a scheme with a single shared id, which needs it
// only for the owner lock (holdOwner): nil where it cannot be opened, and the sweeps
// judge this owner by /proc alone.
func ownerOnlyLock() *os.File {
	f, err := openLock(lockDir())
	if err != nil {
		return nil
	}
	return f
}

// lockHint says why a kernel may lack open file description locks.
func lockHint(dir string) string {
	if gvisor() {
		return "; this gVisor kernel implements neither them nor clone3, with which airlock starts every sandbox: " +
			"gVisor is a sandbox of its own, run airlock outside it (or under a runsc release that has both)"
	}
	return "; Linux has them since 3.15: " + dir + " must be on a file system that supports them (tmpfs or a local disk)"
}

// lockDir is where the servers of this user coordinate their ids: this user's state
// directory, which also holds the stamps of passing self-checks.
func lockDir() string { return stamp.DefaultDir() }

// release returns an id once no process of it is left. clean is false when the spawner
// could not prove that: the id is never handed out again.
func (h *hostIDs) release(l lease, clean bool) {
	if h.size == 1 && (h.scheme == schemeOwn || h.scheme == schemeShared) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !clean {
		// The lock stays taken for as long as this server runs.
		h.bad++
		return
	}
	if _, err := h.lockID(l.uid, unix.F_UNLCK); err != nil {
		h.bad++ // cannot happen on an open lock file; the id stays out of use
		return
	}
	h.free = append(h.free, l.off)
}

// lockFD is the lock file's descriptor, -1 without one. A one-shot run's zygote holds
// a copy (the same open file description, so the same locks) until its sandboxes are
// dead: their ids stay taken after the run's process has exited.
func (h *hostIDs) lockFD() int {
	if h.lock == nil {
		return -1
	}
	return int(h.lock.Fd())
}

// owns reports whether uid is one this scheme gives sandboxes.
func (h *hostIDs) owns(uid uint32) bool { return uid >= h.uid && uid-h.uid < h.size }

// ownUID reports whether the spawner switches to the lease's ids before creating the
// namespace, and checks afterwards that nothing of that uid is left (CFG_OWN_UID).
func (h *hostIDs) ownUID() bool { return h.scheme == schemeRange }

// isolated reports whether concurrent sandboxes have host ids of their own.
func (h *hostIDs) isolated() bool { return h.scheme == schemeRange || h.scheme == schemeSubID }

// describe is the probe's account of the scheme.
func (h *hostIDs) describe() string {
	switch h.scheme {
	case schemeRange:
		return fmt.Sprintf("a host uid and gid of its own per live sandbox, from %d-%d (sandbox.uid_range; none used by /etc/passwd, /etc/group or a subordinate range); the namespace belongs to it, and the spawner kills and counts that uid's processes before the uid is reused", h.uid, h.uid+h.size-1)
	case schemeSubID:
		return fmt.Sprintf("a host uid and gid of its own per live sandbox, from the server's subordinate ranges (uids %d-%d, gids from %d) through %s and %s", h.uid, h.uid+h.size-1, h.gid, h.uidmap, h.gidmap)
	case schemeOwn:
		return fmt.Sprintf("every sandbox maps to the server's own uid/gid %d/%d: concurrent runs share the per-user kernel budgets (pipe buffers, descriptors in flight)", h.uid, h.gid)
	}
	return fmt.Sprintf("every sandbox maps to host uid/gid %d/%d (sandbox.uid_range = off): concurrent runs share the per-user kernel budgets (pipe buffers, descriptors in flight)", h.uid, h.gid)
}

// fix is the probe's remedy for a shared scheme.
func (h *hostIDs) fix() string {
	if h.scheme == schemeOwn {
		return "give the server's user subordinate ids (usermod --add-subuids 100000-165535 --add-subgids 100000-165535 USER) and install newuidmap/newgidmap (apt-get install uidmap), or run the server as root"
	}
	return "set sandbox.uid_range to a block of ids no account uses (default " + DefaultUIDRange + ")"
}

// idFiles are the files the schemes read: the host's (hostIDFiles), or a test's.
type idFiles struct {
	passwd, group, subuid, subgid string // the host's accounts and subordinate ranges
	uidMap, gidMap, setgroups     string // this server's own user namespace
}

func hostIDFiles() idFiles {
	return idFiles{passwd: "/etc/passwd", group: "/etc/group", subuid: "/etc/subuid", subgid: "/etc/subgid",
		uidMap: "/proc/self/uid_map", gidMap: "/proc/self/gid_map", setgroups: "/proc/self/setgroups"}
}

// newHostIDs picks the scheme for this server.
func newHostIDs(opts sandbox.Options) (*hostIDs, error) {
	files := hostIDFiles()
	if os.Geteuid() != 0 {
		return unprivilegedIDs(files)
	}
	spec := opts.UIDRange
	if spec == "" {
		spec = DefaultUIDRange
	}
	if spec == "off" {
		name := orDefault(opts.HostUser, "nobody")
		uid, gid, err := lookupUser(name)
		if err != nil {
			return nil, fmt.Errorf("%w: host user %q for sandboxes: %w (set sandbox.host_user to an existing unprivileged account)", sandbox.ErrUnavailable, name, err)
		}
		if uid == 0 || gid == 0 {
			return nil, fmt.Errorf("%w: host user %q is root; sandboxes must map to an unprivileged account", sandbox.ErrUnavailable, name)
		}
		return &hostIDs{scheme: schemeShared, uid: uint32(uid), gid: uint32(gid), size: 1, lock: ownerOnlyLock()}, nil
	}
	first, size, err := ParseUIDRange(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: sandbox.uid_range: %w", sandbox.ErrUnavailable, err)
	}
	if err := rangeMapped(files, first, size); err != nil {
		if refusal := singleIDNamespace(files); refusal != "" {
			return nil, fmt.Errorf("%w: %s", sandbox.ErrUnavailable, refusal)
		}
		return nil, fmt.Errorf("%w: sandbox.uid_range %s: %w (inside a container, choose a block of the ids it maps, or set sandbox.uid_range = off)", sandbox.ErrUnavailable, spec, err)
	}
	if err := rangeUnused(files, first, size); err != nil {
		return nil, fmt.Errorf("%w: sandbox.uid_range %s: %w (choose a block no account, group or subordinate range uses)", sandbox.ErrUnavailable, spec, err)
	}
	lock, err := openLock(lockDir())
	if err != nil {
		return nil, fmt.Errorf("%w: the lock that keeps airlock servers from sharing host ids: %w", sandbox.ErrUnavailable, err)
	}
	return &hostIDs{scheme: schemeRange, uid: first, gid: first, size: size, lock: lock}, nil
}

// ParseUIDRange reads "FIRST-LAST" (inclusive) into the first id and the count.
func ParseUIDRange(s string) (first, size uint32, err error) {
	a, b, ok := strings.Cut(s, "-")
	lo, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 32)
	hi, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 32)
	switch {
	case !ok || err1 != nil || err2 != nil:
		return 0, 0, fmt.Errorf("want FIRST-LAST, e.g. %s, got %q", DefaultUIDRange, s)
	case lo == 0 || hi < lo:
		return 0, 0, fmt.Errorf("want 0 < FIRST <= LAST, got %q", s)
	case hi >= 1<<32-1:
		return 0, 0, fmt.Errorf("4294967295 is the invalid id (-1), got %q", s)
	case hi-lo+1 < 16:
		return 0, 0, fmt.Errorf("at least 16 ids (one per sandbox alive at once), got %d", hi-lo+1)
	}
	return uint32(lo), uint32(hi - lo + 1), nil
}

// rangeUnused checks the block against the accounts, groups and subordinate ranges of
// this host: an id in use would share its budgets, and its files, with a sandbox.
func rangeUnused(files idFiles, first, size uint32) error {
	last := uint64(first) + uint64(size) - 1
	in := func(id uint64) bool { return id >= uint64(first) && id <= last }
	for _, f := range []struct{ path, what string }{{files.passwd, "user"}, {files.group, "group"}} {
		b, err := sysfile.Read(f.path)
		if err != nil {
			return fmt.Errorf("read %s: %w", f.path, err)
		}
		for _, line := range lines(b) {
			fields := strings.Split(line, ":")
			if len(fields) < 3 {
				continue
			}
			if id, err := strconv.ParseUint(fields[2], 10, 32); err == nil && in(id) {
				return fmt.Errorf("%s %s has id %d, inside the block", f.what, fields[0], id)
			}
		}
	}
	for _, path := range []string{files.subuid, files.subgid} {
		b, err := sysfile.Read(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		for _, line := range lines(b) {
			owner, lo, n, ok := subRange(line)
			if ok && lo <= last && lo+n-1 >= uint64(first) {
				return fmt.Errorf("%s gives %s ids %d-%d, overlapping the block", path, owner, lo, lo+n-1)
			}
		}
	}
	return nil
}

// rangeMapped checks that the server's own user namespace maps the whole block, uids
// and gids: a root server in a container often has only 65536 ids.
func rangeMapped(files idFiles, first, size uint32) error {
	for _, f := range []string{files.uidMap, files.gidMap} {
		b, err := sysfile.Read(f)
		if err != nil {
			return fmt.Errorf("read %s: %w", f, err)
		}
		ok := false
		for _, line := range lines(b) {
			v := strings.Fields(line)
			if len(v) != 3 {
				continue
			}
			lo, err1 := strconv.ParseUint(v[0], 10, 32)
			n, err2 := strconv.ParseUint(v[2], 10, 32)
			if err1 == nil && err2 == nil && uint64(first) >= lo && uint64(first)+uint64(size) <= lo+n {
				ok = true
			}
		}
		if !ok {
			return fmt.Errorf("this server's user namespace does not map all of it (%s:\n%s)", f, strings.TrimSpace(string(b)))
		}
	}
	return nil
}

// singleIDNamespace says why sandboxes cannot work when this server is root of a user
// namespace that maps one uid, and the fix; "" when it maps more. A block of ids is
// not the fix there: no block fits, and setgroups is usually denied as well.
func singleIDNamespace(files idFiles) string {
	b, err := sysfile.Read(files.uidMap)
	if err != nil {
		return ""
	}
	var n uint64
	for _, line := range lines(b) {
		if v := strings.Fields(line); len(v) == 3 {
			c, _ := strconv.ParseUint(v[2], 10, 32)
			n += c
		}
	}
	if n != 1 {
		return ""
	}
	why := fmt.Sprintf("this server's user namespace maps a single uid (%s: %s), so no sandbox can have a host uid of its own (sandbox.uid_range)",
		files.uidMap, strings.Join(strings.Fields(string(b)), " "))
	if sg, err := sysfile.Read(files.setgroups); err == nil && strings.TrimSpace(string(sg)) == "deny" {
		why += ", and setgroups is denied in it (" + files.setgroups + "), so no sandbox's groups can be dropped either"
	}
	return why + "; " + singleIDFix
}

func lines(b []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// subRange parses one "owner:first:count" line of /etc/subuid or /etc/subgid.
func subRange(line string) (owner string, first, count uint64, ok bool) {
	f := strings.Split(line, ":")
	if len(f) != 3 {
		return "", 0, 0, false
	}
	lo, err1 := strconv.ParseUint(f[1], 10, 32)
	n, err2 := strconv.ParseUint(f[2], 10, 32)
	if err1 != nil || err2 != nil || n == 0 {
		return "", 0, 0, false
	}
	return f[0], lo, n, true
}

// unprivilegedIDs uses the server's subordinate ids when it has both ranges and the
// setuid helpers that may map them; otherwise its own ids, shared.
func unprivilegedIDs(files idFiles) (*hostIDs, error) {
	own := &hostIDs{scheme: schemeOwn, uid: uint32(os.Geteuid()), gid: uint32(os.Getegid()), size: 1}
	uidmap, err1 := exec.LookPath("newuidmap")
	gidmap, err2 := exec.LookPath("newgidmap")
	if err1 != nil || err2 != nil {
		own.lock = ownerOnlyLock()
		return own, nil
	}
	names := []string{strconv.Itoa(os.Geteuid())}
	if u, err := user.LookupId(names[0]); err == nil {
		names = append(names, u.Username)
	}
	uid, nu := ownSubRange(files.subuid, names)
	gid, ng := ownSubRange(files.subgid, names)
	size := min(nu, ng)
	if size < 16 {
		own.lock = ownerOnlyLock()
		return own, nil
	}
	lock, err := openLock(lockDir())
	if err != nil {
		return nil, fmt.Errorf("%w: the lock that keeps airlock servers from sharing host ids: %w", sandbox.ErrUnavailable, err)
	}
	return &hostIDs{scheme: schemeSubID, uid: uid, gid: gid, size: size, uidmap: uidmap, gidmap: gidmap, lock: lock}, nil
}

// ownSubRange is the first subordinate range of the given owner names, or 0, 0.
func ownSubRange(path string, names []string) (uint32, uint32) {
	b, err := sysfile.Read(path)
	if err != nil {
		return 0, 0
	}
	for _, line := range lines(b) {
		owner, lo, n, ok := subRange(line)
		if !ok {
			continue
		}
		for _, name := range names {
			if owner == name && lo+n <= 1<<32-1 {
				return uint32(lo), uint32(n)
			}
		}
	}
	return 0, 0
}
