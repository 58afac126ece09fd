package linux

// #include "protocol_linux.h"
import "C"

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	seccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/sandbox"
)

// The Landlock tier (sandbox.isolation = "landlock") is for hosts where user namespaces
// cannot be created at all: Docker's and Kubernetes' default seccomp profiles, a
// restricted Pod Security profile, Ubuntu 24.04 without the AppArmor profile. It runs
// the same zygote, spawner and init (init_linux.c, landlock_linux.c), the same seccomp
// filter, rlimits, cgroups, per-sandbox host uid, report channel, artifacts and output
// caps, and differs only where it must:
//
//	namespace tier                         Landlock tier
//	user namespace, uid 1000 inside        the sandbox's host uid itself (root server), or the server's uid
//	new root: tmpfs + read-only binds      Landlock: read-only the same binds (rootPlan), read-write the run's dirs
//	/workspace, /tmp: size-capped tmpfs    a secret-named directory in <run dir>/workspace and <run dir>/tmp: tmpfs the server mounts (root), else RLIMIT_FSIZE only
//	network namespace                      seccomp: AF_UNIX sockets only; Landlock: TCP bind and connect denied (ABI 4)
//	ipc namespace, abstract sockets        Landlock scoping of abstract unix sockets and signals (ABI 6)
//	pid namespace dies with its pid 1      init and spawner are subreapers and sweep to a fixed point; per-uid kill
//
// What it cannot give is in weaker (probe, README "Security").

// Bits of the landlock frame's want field (protocol_linux.h).
const (
	llNet   = C.LL_NET
	llScope = C.LL_SCOPE
)

// cfgLandlock: a landlock frame follows the cgroup frame (protocol_linux.h).
const cfgLandlock = C.CFG_LANDLOCK

// landlockWeaker is what this tier gives up against the namespace tier, each piece as
// probe lists it: the verdict is degraded, never isolated.
var landlockWeaker = []sandbox.Layer{
	{Name: "pid-namespace", Detail: "no own pid view: host processes are listable in /proc with their command lines (another run's args among them: pass secrets through stdin or files), their status, cgroups and CPU time to the nanosecond (/proc/PID/sched), and the host's /proc files the namespace tier masks (cmdline, modules, interrupts …) are readable; their memory, environment, cwd and fds stay closed (Landlock's ptrace rule and the per-run uid), and PIDFD_GET_INFO is refused"},
	{Name: "mount-namespace", Detail: "no fresh mount table: /proc/self/mountinfo shows the host's, every run's workspace and tmp mount among them; paths are the host's (the workspace is a secret-named directory in <run dir>/workspace, not /workspace)"},
	{Name: "uts-namespace", Detail: "no private hostname: the host's name is visible"},
	{Name: "ipc-namespace", Detail: "no own IPC namespace: System V IPC and POSIX message queues are refused (seccomp, EPERM) rather than private; abstract unix sockets are scoped by Landlock"},
	{Name: "network-namespace", Detail: "no own network stack: AF_UNIX only (seccomp), TCP bind/connect denied (Landlock), connect and sendto with an address refused (seccomp: Landlock ABI 7 cannot restrict pathname unix sockets), bind and listen refused (seccomp: the abstract names are the host's, and host clients may connect in); AF_UNIX sockets of the stream and seqpacket types only (seccomp), since sendmsg's address is out of seccomp's reach"},
	{Name: "cgroup-namespace", Detail: "the host's cgroup paths are visible in /proc/self/cgroup"},
	{Name: "private-tmp", Detail: "/tmp, /var/tmp and /dev/shm are unreachable, not private: TMPDIR points at the run's own tmp; python multiprocessing's semaphores fail"},
	{Name: "workspace-size", Detail: "the workspace is a host directory: files are capped by RLIMIT_FSIZE and the file count, not by a tmpfs size"}, // unless the server mounts one (unsized)
}

// landlockFix is every weaker layer's fix.
const landlockFix = "use the namespace tier (sandbox.isolation = \"namespaces\") where user namespaces are allowed: " + userNSSettings

// landlockTier is the tier's state in a Sandbox (nil: the namespace tier).
type landlockTier struct {
	abi     int
	want    uint32   // llNet | llScope: what the kernel can enforce
	missing []string // pieces this kernel lacks, served only with allow_degraded
	base    string   // the server's directory of run directories
	// unsized says why the run's workspace and tmp are plain host directories; empty
	// where the server mounts a size-capped tmpfs on each (it can mount: root).
	unsized string
	// submounts are the server's mount points, read once: those beneath a granted
	// directory are left out of it (landlockPaths).
	submounts []string
	// program is the seccomp program the program loads on top of the tier's filter
	// (compileProgramFilter), set once the host ids are known (compileProgram).
	program *bpf
}

// newLandlockTier checks the kernel's Landlock ABI itself (a best-effort library would
// succeed with no Landlock at all) and refuses what it cannot enforce unless degraded
// mode is allowed, naming each missing piece.
func newLandlockTier(opts sandbox.Options) (*landlockTier, error) {
	t := &landlockTier{abi: landlockABI()}
	var err error
	if t.want, t.missing, err = landlockPieces(t.abi, opts.AllowDegraded); err != nil {
		return nil, err
	}

	// Not in the lock directory itself: it is private to the server's uid, and each
	// run's uid must pass through to its own directory.
	parent := lockDir() + "-runs"
	if opts.StateDir != "" {
		parent = filepath.Join(opts.StateDir, "runs")
	}
	if err := os.MkdirAll(parent, 0o711); err != nil {
		return nil, fmt.Errorf("%w: the Landlock tier's run directories: %w", sandbox.ErrUnavailable, err)
	}
	// Not a symlink, this uid's, writable by no one else, as openLock asks of the lock
	// directory: /tmp/airlock-UID-runs (an unprivileged server without XDG_RUNTIME_DIR)
	// is a name anyone may take first, and whoever owns it could swap the directory made
	// below for a symlink, so that a run's workspace, its code and files, lands in theirs.
	var st unix.Stat_t
	if err := unix.Lstat(parent, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR ||
		st.Uid != uint32(os.Geteuid()) || st.Mode&0o022 != 0 {
		return nil, fmt.Errorf("%w: the Landlock tier's run directories: %s must be a directory of uid %d that no one else may write (remove it; or set XDG_RUNTIME_DIR or sandbox.state_dir)", sandbox.ErrUnavailable, parent, os.Geteuid())
	}
	if st.Mode&0o001 == 0 {
		return nil, fmt.Errorf("%w: the Landlock tier's run directories: %s must be searchable by the sandboxes' uids (chmod 0711 %s)", sandbox.ErrUnavailable, parent, parent)
	}
	removeStaleRuns(parent)
	base, err := os.MkdirTemp(parent, "landlock-"+ownerName()+"-")
	if err != nil {
		return nil, fmt.Errorf("%w: the Landlock tier's run directories: %w", sandbox.ErrUnavailable, err)
	}
	// Each run's uid must reach its own directory below.
	if err := os.Chmod(base, 0o711); err != nil {
		return nil, fmt.Errorf("%w: the Landlock tier's run directories: %w", sandbox.ErrUnavailable, err)
	}
	t.base = base
	t.unsized = tmpfsRefused(base)
	t.submounts = submounts()
	return t, nil
}

// close removes the server's directory of run directories once every run is released
// (a nil tier: the namespace tier, nothing to do). A run directory still there means a
// run was not released: the directory stays, and says so.
func (t *landlockTier) close(log *slog.Logger) {
	if t == nil {
		return
	}
	if err := os.Remove(t.base); err != nil && !errors.Is(err, os.ErrNotExist) {
		log.Warn("the Landlock tier's run directories left behind", "dir", t.base, "err", err)
	}
}

// landlockPieces is what a kernel with Landlock ABI abi can enforce (want) and what it
// lacks, each piece named; without allowDegraded a missing piece refuses.
func landlockPieces(abi int, allowDegraded bool) (want uint32, missing []string, err error) {
	if abi < 1 {
		return 0, nil, fmt.Errorf("%w: sandbox.isolation = landlock, but this kernel has no Landlock (needs Linux 5.13+ with CONFIG_SECURITY_LANDLOCK=y and landlock in the lsm= boot list)", sandbox.ErrUnavailable)
	}
	if abi >= 4 {
		want |= llNet
	} else {
		missing = append(missing, fmt.Sprintf("TCP bind/connect denial (Landlock ABI 4, this kernel has %d; seccomp still allows only AF_UNIX sockets)", abi))
	}
	if abi >= 6 {
		want |= llScope
	} else {
		missing = append(missing, fmt.Sprintf("abstract unix socket and signal scoping (Landlock ABI 6, this kernel has %d: the program can signal the server's other processes of its uid and reach abstract sockets)", abi))
	}
	if len(missing) > 0 && !allowDegraded {
		return 0, nil, fmt.Errorf("%w: the Landlock tier lacks on this kernel: %s (use a newer kernel, or set sandbox.allow_degraded = true to serve without them)",
			sandbox.ErrUnavailable, strings.Join(missing, "; "))
	}
	return want, missing, nil
}

// compileProgram compiles the program's seccomp program for the host ids the runs get:
// where they share a uid, their file metadata changes are refused too.
func (t *landlockTier) compileProgram(ids *hostIDs) error {
	var err error
	if t.program, err = compileProgramFilter(seccomp.ArchInvalid, !ids.isolated()); err != nil {
		return fmt.Errorf("%w: %w (install libseccomp: apt-get install libseccomp2)", sandbox.ErrUnavailable, err)
	}
	return nil
}

// landlockIDs are an unprivileged server's host ids in this tier: its own. Subordinate
// ids need a user namespace to be used.
func landlockIDs() *hostIDs {
	return &hostIDs{scheme: schemeOwn, uid: uint32(os.Geteuid()), gid: uint32(os.Getegid()), size: 1}
}

// isolation is the tier's name, as results, get_config and probe state it.
func (s *Sandbox) isolation() string {
	if s.ll != nil {
		return sandbox.IsolationLandlock
	}
	return sandbox.IsolationNamespaces
}

// landlockSpec refuses what this tier cannot do.
func landlockSpec(spec sandbox.Spec) error {
	switch {
	case spec.Network != sandbox.NetworkNone:
		return fmt.Errorf("%w: network %q needs the namespace tier (the Landlock tier has no network namespace to bridge or share)", sandbox.ErrInvalidSpec, spec.Network)
	case spec.Environment != "":
		return fmt.Errorf("%w: environments need the namespace tier (it binds them at %s)", sandbox.ErrInvalidSpec, sandbox.EnvironmentDir)
	}
	return nil
}

// landlockPaths derives the tier's rules from the namespace tier's root plan, so both
// tiers read exactly the same host paths: the read-only binds and copied files, /proc,
// and the device nodes (read-write). Synthesised files (/etc/passwd, hosts) have no
// host counterpart the program may read. A mount beneath a bound directory (a file a
// container engine bound under /usr: the server's binary, say) is left out, as the
// namespace tier covers it (cover_submounts): Landlock has no deny rule, so its
// directory is granted entry by entry instead (grantAround).
func landlockPaths(plan []mountOp, host dirReader, submounts []string) (ro, dev []string) {
	for _, op := range plan {
		switch op.Kind {
		case opBindRO:
			if op.Source == op.Target {
				ro = append(ro, grantAround(op.Source, submounts, host)...)
			}
		case opCopy:
			if op.Source != "" {
				ro = append(ro, op.Source)
			}
		case opProc:
			ro = append(ro, "/proc")
		case opBindDev:
			dev = append(dev, op.Source)
		}
	}
	return ro, dev
}

// dirReader lists a directory; tests substitute a fake.
type dirReader interface {
	ReadDir(name string) ([]os.DirEntry, error)
}

type realDirs struct{}

func (realDirs) ReadDir(name string) ([]os.DirEntry, error) { return os.ReadDir(name) }

// grantAround is root, or, when something in skip lies beneath it, root's entries but
// those (recursively), never following a symlink: a rule on one would grant its target.
func grantAround(root string, skip []string, host dirReader) []string {
	beneath := false
	for _, s := range skip {
		if s == root {
			return nil
		}
		beneath = beneath || strings.HasPrefix(s, root+"/")
	}
	if !beneath {
		return []string{root}
	}
	entries, err := host.ReadDir(root)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		p := filepath.Join(root, e.Name())
		if e.Type()&os.ModeSymlink != 0 {
			continue
		}
		out = append(out, grantAround(p, skip, host)...)
	}
	return out
}

// submounts are the mount points of this server's mount namespace (a container's, say),
// from /proc/self/mountinfo.
func submounts() []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] != "/" {
			out = append(out, unescapeMount(f[4]))
		}
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeStaleRuns removes what dead servers left in parent: the directories, and their
// tmpfs mounts, of the runs they had in flight or prepared when they died. A server's
// directory is landlock-<owner>-… (ownerName); it is stale when its owner is proved
// gone (sweep.gone, as for cgroups: cleanStale).
func removeStaleRuns(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	mounts := submounts()
	var sw sweep
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "landlock-")
		name, _, dashed := strings.Cut(rest, "-")
		o, parsed := parseOwner(name)
		if !ok || !dashed || !parsed || !sw.gone(o) {
			continue
		}
		base := filepath.Join(parent, e.Name())
		for _, m := range slices.Backward(mounts) {
			if strings.HasPrefix(m, base+"/") {
				_ = unix.Unmount(m, unix.MNT_DETACH)
			}
		}
		_ = sandbox.RemoveTree(base, nil)
	}
}

// tmpfsRefused tries a tmpfs mount in base and says why the server cannot make one
// (an unprivileged server, a container without CAP_SYS_ADMIN), or "".
func tmpfsRefused(base string) string {
	d := filepath.Join(base, ".mount-check")
	if err := os.Mkdir(d, 0o700); err != nil {
		return fmt.Sprintf("the server cannot make a directory to mount on (%v)", err)
	}
	defer os.Remove(d)
	if err := unix.Mount("tmpfs", d, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=4k"); err != nil {
		return fmt.Sprintf("the server cannot mount a tmpfs (%v): that needs CAP_SYS_ADMIN, which root on a host has and a container's root has not", err)
	}
	_ = unix.Unmount(d, unix.MNT_DETACH)
	return ""
}

// runDirs creates the run's directory and its workspace and tmp, owned by the run's
// host uid and private to it; where the server can mount, each is a tmpfs of the
// namespace tier's size (the workspace limit, tmpSize), so a run cannot fill the
// host's disk or /run.
//
// The program's workspace and tmp are a directory with a secret name inside each
// (<run dir>/workspace/<secret>), not the mount points themselves. Landlock checks
// opens, not lookups: where the runs share a host uid (an unprivileged server, or
// sandbox.uid_range = "off") one that knows a path in another's workspace may stat
// it, access() it and readlink it (a file's size, a symlink's target). And the run
// directory is no secret: it is named after the run's ID, which names its cgroups
// (/proc/PID/cgroup), and the mount points are in the host's mount table
// (/proc/self/mountinfo), both readable by every run (TestLandlockRunFilesUnfound).
// Only the run's own processes learn the secret: in its cwd, HOME and TMPDIR, which
// /proc closes to other runs (Landlock's ptrace rule), unless its command lines hold it.
func (t *landlockTier) runDirs(id string, ids lease, workspace int64) (dir, ws, tmp string, err error) {
	dir = filepath.Join(t.base, id)
	mws, mtmp := filepath.Join(dir, "workspace"), filepath.Join(dir, "tmp")
	ws, tmp = filepath.Join(mws, newSecret()), filepath.Join(mtmp, newSecret())
	// Close removed the parent; the backend may be used again after it.
	if err := os.Mkdir(t.base, 0o711); err == nil {
		if err := os.Chmod(t.base, 0o711); err != nil {
			return "", "", "", fmt.Errorf("landlock run directory: %w", err)
		}
	} else if !errors.Is(err, os.ErrExist) {
		return "", "", "", fmt.Errorf("landlock run directory: %w", err)
	}
	sizes := map[string]string{
		mws:  fmt.Sprintf("size=%d,nr_inodes=%d", workspace, wsInodes),
		mtmp: fmt.Sprintf("size=%d,nr_inodes=4096", tmpSize),
	}
	for _, d := range []string{dir, mws, mtmp, ws, tmp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			_ = removeRunDir(dir) // the error below says what failed
			return "", "", "", fmt.Errorf("landlock run directory: %w", err)
		}
		if os.Geteuid() == 0 {
			if err := os.Chown(d, int(ids.uid), int(ids.gid)); err != nil {
				_ = removeRunDir(dir) // the error below says what failed
				return "", "", "", fmt.Errorf("landlock run directory: %w", err)
			}
		}
		if size := sizes[d]; size != "" && t.unsized == "" {
			data := fmt.Sprintf("mode=0700,uid=%d,gid=%d,%s", ids.uid, ids.gid, size)
			if err := unix.Mount("tmpfs", d, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
				_ = removeRunDir(dir) // the error below says what failed
				return "", "", "", fmt.Errorf("landlock run directory: mount a tmpfs on %s: %w", d, err)
			}
		}
	}
	return dir, ws, tmp, nil
}

// newSecret is a directory name no one can guess: 128 random bits.
func newSecret() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// removeRunDir unmounts a run directory's tmpfs mounts, if any, and removes it. Its
// processes are dead; the walk does not follow symlinks the program left, and opens up
// directories it locked (an unprivileged server's run has its uid: TestNoLeftovers).
func removeRunDir(dir string) error {
	for _, d := range []string{"workspace", "tmp"} {
		_ = unix.Unmount(filepath.Join(dir, d), unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW) // EINVAL: not a mount
	}
	return sandbox.RemoveTree(dir, nil)
}

// encodeLandlock is the landlock frame: what the init may reach, and the program's own
// seccomp program.
func encodeLandlock(want uint32, ws, tmp string, ro, dev []string, program []byte) ([]byte, error) {
	if err := noNUL("landlock path", append(append([]string{ws, tmp}, ro...), dev...)...); err != nil {
		return nil, err
	}
	var e encoder
	e.u32(want)
	e.str(ws)
	e.str(tmp)
	e.strs(ro)
	e.strs(dev)
	e.bytes(program)
	return e.frame(), nil
}

// landlockFrame makes the run's directories and the frame for them; the directory is
// removed at release.
func (l *launch) landlockFrame(cfg *initConfig) ([]byte, error) {
	t := l.sb.ll
	dir, ws, tmp, err := t.runDirs(l.spec.ID, l.ids, cfg.Limits.Workspace)
	if err != nil {
		return nil, err
	}
	l.runDir = dir
	ro, dev := landlockPaths(rootPlan(cfg, realFS{}), realDirs{}, t.submounts)
	return encodeLandlock(t.want, ws, tmp, ro, dev, t.program.prog)
}

// removeRunDir removes a finished run's directory.
func (l *launch) removeRunDir() {
	if l.runDir == "" {
		return
	}
	if err := removeRunDir(l.runDir); err != nil && !errors.Is(err, os.ErrNotExist) {
		l.sb.log.Warn("landlock run directory left behind", "id", l.spec.ID, "dir", l.runDir, "err", err)
	}
}

// landlockLayers are the layers this tier really has, and the ones it lacks.
func (s *Sandbox) landlockLayers(ok bool, fail string, rules int) []sandbox.Layer {
	t := s.ll
	var out []sandbox.Layer
	layer := func(name string, active, required bool, detail, fix string) {
		l := sandbox.Layer{Name: name, Active: ok && active, Required: required, Detail: detail}
		if !ok {
			l.Detail = fail
		}
		if !l.Active {
			l.Fix = fix
		}
		out = append(out, l)
	}
	kernelFix := "use a kernel with a newer Landlock ABI (this one has " + fmt.Sprint(t.abi) + ")"
	layer("landlock-fs", true, true, fmt.Sprintf("Landlock ABI %d: read and execute only the namespace tier's read-only binds (%s, /etc's copies and binds), /proc read-only; read-write only the run's workspace and tmp", t.abi, strings.Join(systemDirs, " ")), kernelFix)
	layer("landlock-net", t.want&llNet != 0, true, "TCP bind and connect denied by Landlock, beneath seccomp's AF_UNIX-only sockets", kernelFix)
	layer("landlock-scope", t.want&llScope != 0, true, "abstract unix sockets and signals scoped to the sandbox's Landlock domain", kernelFix)
	uids := sandbox.Layer{Name: "host-uids", Active: ok && s.ids.isolated(), Detail: s.ids.describe()}
	if s.ids.scheme == schemeOwn {
		uids.Detail = "the server's own uid (an unprivileged server has no other in this tier): its other processes' /proc entries are closed by Landlock's ptrace rule, their signals by scoping, their resource limits and scheduling by seccomp (another pid refused), files of that uid outside the allowed paths by Landlock; but the runs share that uid's RLIMIT_NPROC with each other and the server's threads, and DAC does not separate their pathname sockets (seccomp refuses connect)"
		uids.Fix = "run the server as root so each sandbox gets its own host uid (sandbox.uid_range)"
	} else if !s.ids.isolated() {
		uids.Fix = s.ids.fix()
	}
	out = append(out, uids)
	if !s.ids.isolated() {
		out = append(out, sandbox.Layer{Name: "file-metadata", Fix: uids.Fix,
			Detail: "chmod, chown, utime and the inode-flag ioctls (FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR, fs-verity) refused (EPERM) in the run's own files too: Landlock does not cover metadata, and the runs' uid owns files outside the granted paths (the server's, another run's, an interpreter's prefix in its home)"})
	}
	layer("seccomp", true, true, fmt.Sprintf("the namespace tier's filter, %d rules, default ENOSYS; sockets: AF_UNIX only; and the program's own on top, %d rules: no other process's limits, niceness or scheduling, no extended attributes, read or changed (EOPNOTSUPP: Landlock checks neither, so the host's files' would be readable and the world-writable ones' writable)", rules, t.program.rules), "install libseccomp (apt-get install libseccomp2)")
	layer("no-new-privs", true, true, "set before Landlock and the filter; setuid binaries and file capabilities are inert", "")
	layer("capabilities", true, true, "every capability set of the program empty; the bounding set emptied under a root server", "")
	layer("process-tree", true, true, "init and spawner are child subreapers: every descendant (setsid, double fork, fork chains) is killed and reaped to a fixed point; a root server's per-run uid is swept with kill(-1)", "")
	layer("rlimits", true, true, "the namespace tier's rlimits", "")
	for _, w := range landlockWeaker {
		switch {
		case w.Name == "workspace-size" && t.unsized == "":
			layer(w.Name, true, false, fmt.Sprintf("the run's workspace and tmp are tmpfs mounts the server makes on its host directories: the workspace limit, %d MiB for tmp", tmpSize>>20), "")
			continue
		case w.Name == "workspace-size":
			w.Detail += ": " + t.unsized
		}
		out = append(out, sandbox.Layer{Name: w.Name, Detail: w.Detail, Fix: landlockFix})
	}
	return out
}
