package linux

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	seccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/sandbox"
)

// fakeFS is a host filesystem as data: path → kind ("dir", "file" or "->target").
type fakeFS map[string]string

type fakeInfo struct {
	name string
	mode fs.FileMode
}

func (f fakeInfo) Name() string       { return f.name }
func (f fakeInfo) Size() int64        { return 0 }
func (f fakeInfo) Mode() fs.FileMode  { return f.mode }
func (f fakeInfo) ModTime() time.Time { return time.Time{} }
func (f fakeInfo) IsDir() bool        { return f.mode.IsDir() }
func (f fakeInfo) Sys() any           { return nil }

func (h fakeFS) Lstat(name string) (os.FileInfo, error) {
	k, ok := h[name]
	switch {
	case !ok:
		return nil, &fs.PathError{Op: "lstat", Path: name, Err: fs.ErrNotExist}
	case k == "dir":
		return fakeInfo{name, fs.ModeDir | 0o755}, nil
	case strings.HasPrefix(k, "->"):
		return fakeInfo{name, fs.ModeSymlink | 0o777}, nil
	default:
		return fakeInfo{name, 0o644}, nil
	}
}

func (h fakeFS) Readlink(name string) (string, error) {
	if k := h[name]; strings.HasPrefix(k, "->") {
		return strings.TrimPrefix(k, "->"), nil
	}
	return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
}

// mergedUsr is a Debian 12 style host with secrets in the usual places.
var mergedUsr = fakeFS{
	"/usr": "dir", "/bin": "->usr/bin", "/sbin": "->usr/sbin", "/lib": "->usr/lib",
	"/lib64": "->usr/lib64", "/opt": "dir", "/opt/python": "dir", "/opt/tool.bin": "file",
	"/etc/ld.so.cache": "file", "/etc/nsswitch.conf": "file", "/etc/services": "file",
	"/etc/shadow": "file", "/etc/gshadow": "file", "/etc/passwd": "file", "/etc/sudoers": "file",
	"/etc/ssh": "dir", "/etc/ssl": "dir", "/etc/alternatives": "dir", "/etc/localtime": "->/usr/share/zoneinfo/UTC",
	"/etc/resolv.conf": "file", "/root": "dir", "/home": "dir", "/var": "dir",
}

func TestRootPlan(t *testing.T) {
	cfg := &initConfig{
		Limits:  sandbox.Limits{Workspace: 5 << 20},
		Network: sandbox.NetworkNone,
		Mounts:  []string{"/opt/python", "/usr/lib/python3", "/opt/missing", "opt/relative", "/", "/opt/tool.bin", "/opt/python/../python"},
	}
	plan := rootPlan(cfg, mergedUsr)
	byTarget := map[string]mountOp{}
	for _, op := range plan {
		if _, dup := byTarget[op.Target]; dup && op.Kind != opDir {
			t.Errorf("target %s planned twice", op.Target)
		}
		byTarget[op.Target] = op
	}
	// Merged /usr: the top-level links are recreated as the same links, /usr is bound.
	for link, to := range map[string]string{"/bin": "usr/bin", "/sbin": "usr/sbin", "/lib": "usr/lib", "/lib64": "usr/lib64"} {
		if op := byTarget[link]; op.Kind != opSymlink || op.Link != to {
			t.Errorf("%s: %+v, want symlink to %s", link, op, to)
		}
	}
	if op := byTarget["/usr"]; op.Kind != opBindRO || op.Source != "/usr" {
		t.Errorf("/usr: %+v, want a read-only bind", op)
	}
	// Mounts: a directory outside the system dirs is bound, once; covered, missing,
	// relative, root and non-directory entries are not.
	if op := byTarget["/opt/python"]; op.Kind != opBindRO || op.Source != "/opt/python" {
		t.Errorf("/opt/python: %+v, want a read-only bind", op)
	}
	for _, p := range []string{"/usr/lib/python3", "/opt/missing", "opt/relative", "/opt/tool.bin", "/opt"} {
		if op, ok := byTarget[p]; ok {
			t.Errorf("%s planned: %+v", p, op)
		}
	}
	// /etc: only the allowlisted files, the sandbox's own passwd, never a secret.
	allowedEtc := map[string]bool{"/etc/passwd": true, "/etc/group": true, "/etc/hosts": true,
		"/etc/hostname": true, "/etc/resolv.conf": true, "/etc/localtime": true, "/etc": true}
	for _, f := range etcCopies {
		allowedEtc["/etc/"+f] = true
	}
	for _, d := range etcBinds {
		allowedEtc["/etc/"+d] = true
	}
	for _, op := range plan {
		if strings.HasPrefix(op.Target, "/etc") && !allowedEtc[op.Target] {
			t.Errorf("unexpected /etc entry %+v", op)
		}
		for _, secret := range []string{"/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh", "/root", "/home", "/var", "/etc/passwd"} {
			if op.Source == secret || strings.HasPrefix(op.Source, secret+"/") {
				t.Errorf("host %s reaches the sandbox: %+v", secret, op)
			}
		}
		if op.Kind == opBindRO && op.Source != op.Target {
			t.Errorf("bind moves a host path: %+v", op)
		}
	}
	if op := byTarget["/etc/passwd"]; op.Kind != opCopy || op.Source != "" || !strings.Contains(string(op.Content), "sandbox:x:1000:1000") {
		t.Errorf("/etc/passwd: %+v, want the sandbox's own", op)
	}
	// No network: an empty resolv.conf, not the host's.
	if op := byTarget["/etc/resolv.conf"]; op.Source != "" || len(op.Content) != 0 {
		t.Errorf("/etc/resolv.conf without network: %+v", op)
	}
	// Writable mounts are size-capped tmpfs without setuid or devices: the workspace
	// its own, /tmp and /dev/shm directories of the root's (whose size is theirs).
	if op := byTarget["/workspace"]; op.Kind != opTmpfs || op.Flags&unix.MS_NOSUID == 0 || op.Flags&unix.MS_NODEV == 0 || !strings.Contains(op.Data, "size=") {
		t.Errorf("/workspace: %+v, want a nosuid,nodev tmpfs with a size", op)
	}
	for _, p := range []string{"/tmp", "/dev/shm"} {
		op := byTarget[p]
		if op.Kind != opScratch || op.Flags&unix.MS_NOSUID == 0 || op.Flags&unix.MS_NODEV == 0 {
			t.Errorf("%s: %+v, want a nosuid,nodev scratch directory", p, op)
		}
	}
	if op := byTarget["/dev/shm"]; op.Flags&unix.MS_NOEXEC == 0 {
		t.Errorf("/dev/shm: %+v, want noexec", op)
	}
	if op := plan[0]; !strings.Contains(op.Data, fmt.Sprintf("size=%d,", rootSize+tmpSize+shmSize)) {
		t.Errorf("root tmpfs %q: want the scratch directories' size too", op.Data)
	}
	if op := byTarget["/workspace"]; !strings.Contains(op.Data, "size=5242880,") {
		t.Errorf("workspace size not from the limit: %q", op.Data)
	}
	if op := byTarget["/proc"]; op.Kind != opProc {
		t.Errorf("/proc: %+v, want a fresh proc", op)
	}

	host := rootPlan(&initConfig{Network: sandbox.NetworkHost}, mergedUsr)
	for _, op := range host {
		if op.Target == "/etc/resolv.conf" && op.Source != "/etc/resolv.conf" {
			t.Errorf("host network: resolv.conf %+v, want the host's", op)
		}
	}
}

// An environment is the one bind whose target is not its source: it appears at
// sandbox.EnvironmentDir, read-only, and nothing else of its host path's parents does.
// TestScratchDirsCovered: /tmp's and /dev/shm's own paths in the root lie under a later
// step's mount, with or without a fresh /proc, so nothing but their binds reaches them
// (an uncovered one would show the program its /tmp a second time, and the next plan
// step writing there would write into the program's scratch space).
func TestScratchDirsCovered(t *testing.T) {
	for _, cfg := range []*initConfig{{}, {NoProc: true}} {
		plan := rootPlan(cfg, mergedUsr)
		scratch := 0
		for i, op := range plan {
			if op.Kind != opScratch {
				continue
			}
			scratch++
			covered := false
			for _, later := range plan[i+1:] {
				mounts := later.Kind == opProc || later.Kind == opTmpfs
				if mounts && strings.HasPrefix(op.Source, later.Target+"/") {
					covered = true
				}
				if !mounts && strings.HasPrefix(later.Target, op.Source) {
					t.Errorf("NoProc %v: %+v writes into the scratch directory %s", cfg.NoProc, later, op.Source)
				}
			}
			if !covered {
				t.Errorf("NoProc %v: %+v: no later mount covers its source", cfg.NoProc, op)
			}
		}
		if scratch != 2 {
			t.Errorf("NoProc %v: %d scratch directories, want /tmp and /dev/shm", cfg.NoProc, scratch)
		}
	}
}

func TestRootPlanEnvironment(t *testing.T) {
	plan := rootPlan(&initConfig{Environment: "/opt/venvs/data/"}, mergedUsr)
	var env []mountOp
	for _, op := range plan {
		if op.Kind == opBindRO && op.Source != op.Target {
			env = append(env, op)
		}
		if strings.HasPrefix(op.Target, "/opt") {
			t.Errorf("host path of the environment planned: %+v", op)
		}
	}
	if len(env) != 1 || env[0].Source != "/opt/venvs/data" || env[0].Target != sandbox.EnvironmentDir {
		t.Fatalf("environment binds %+v, want /opt/venvs/data at %s", env, sandbox.EnvironmentDir)
	}
	for _, bad := range []string{"relative/env", "/"} {
		for _, op := range rootPlan(&initConfig{Environment: bad}, mergedUsr) {
			if op.Target == sandbox.EnvironmentDir {
				t.Errorf("environment %q planned: %+v", bad, op)
			}
		}
	}
}

func TestRootPlanSplitUsr(t *testing.T) {
	split := fakeFS{"/usr": "dir", "/bin": "dir", "/sbin": "dir", "/lib": "dir", "/lib64": "dir"}
	plan := rootPlan(&initConfig{Mounts: []string{"/lib/x86_64-linux-gnu"}}, split)
	var binds []string
	for _, op := range plan {
		if op.Kind == opBindRO {
			binds = append(binds, op.Target)
		}
		if op.Kind == opSymlink && (op.Target == "/bin" || op.Target == "/lib") {
			t.Errorf("real directory planned as a link: %+v", op)
		}
	}
	if got := strings.Join(binds, " "); got != "/usr /bin /sbin /lib /lib64" {
		t.Errorf("binds %q", got)
	}
}

func TestRlimitPlan(t *testing.T) {
	get := func(plan []rlimit, name string) (uint64, bool) {
		for _, r := range plan {
			if r.Name == name {
				return r.Value, true
			}
		}
		return 0, false
	}
	l := sandbox.Limits{CPU: 1500 * time.Millisecond, Memory: 256 << 20, Pids: 10, FileSize: 1 << 20, OpenFiles: 64}
	plan := rlimits(l, false)
	for name, want := range map[string]uint64{"cpu": 2, "fsize": 1 << 20, "nofile": 64, "nproc": 10 + initProcs,
		"core": 0, "msgqueue": 0, "rtprio": 0, "nice": 0} {
		if got, ok := get(plan, name); !ok || got != want {
			t.Errorf("%s = %d (present %v), want %d", name, got, ok, want)
		}
	}
	if _, ok := get(plan, "as"); ok {
		t.Error("RLIMIT_AS applied although a memory cgroup enforces the limit")
	}
	if got, _ := get(rlimits(l, true), "as"); got != 256<<20 {
		t.Errorf("as = %d, want the memory limit", got)
	}
	l.AddressSpace = 4 << 30
	if got, _ := get(rlimits(l, true), "as"); got != 4<<30 {
		t.Errorf("as = %d, want AddressSpace", got)
	}
	// A zero limit never means unlimited: after the backend's defaults, nothing is.
	zero := withDefaults(sandbox.Spec{}).Limits
	for _, r := range rlimits(zero, true) {
		if r.Value == unix.RLIM_INFINITY {
			t.Errorf("%s is unlimited for a zero Limits", r.Name)
		}
	}
	if got, _ := get(rlimits(sandbox.Limits{CPU: time.Millisecond}, false), "cpu"); got != 1 {
		t.Errorf("cpu for 1 ms = %d, want 1 (never 0, which would kill at once)", got)
	}
}

func TestFilterPlan(t *testing.T) {
	if got := (filterPlan{}).socketFamilies(); len(got) != 1 || got[0] != unix.AF_UNIX {
		t.Errorf("no network: families %v, want only AF_UNIX", got)
	}
	host := (filterPlan{network: true}).socketFamilies()
	for _, fam := range []uint64{unix.AF_PACKET, unix.AF_VSOCK, unix.AF_BLUETOOTH} {
		for _, h := range host {
			if h == fam {
				t.Errorf("host network allows family %d", fam)
			}
		}
	}
	// Allowlist: the inet families to reach the proxy on loopback, and nothing more.
	if got := (filterPlan{loopback: true}).socketFamilies(); !slices.Equal(got, []uint64{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6}) {
		t.Errorf("allowlist network: families %v, want AF_UNIX, AF_INET, AF_INET6 (no netlink)", got)
	}
	allowed := map[string]bool{}
	for _, n := range allowedSyscalls {
		allowed[n] = true
	}
	for _, n := range deniedSyscalls {
		if allowed[n] {
			t.Errorf("%s is both allowed and denied", n)
		}
	}
	// Argument-filtered or default-denied: never unconditionally allowed.
	for _, n := range []string{"clone", "clone3", "socket", "socketpair", "ioctl", "fcntl", "ptrace", "personality",
		"preadv2", "fadvise64", "prctl", "mount", "unshare", "setns", "bpf", "io_uring_setup", "userfaultfd", "keyctl", "perf_event_open",
		"kexec_load", "init_module", "process_vm_readv", "open_by_handle_at", "reboot", "syslog"} {
		if allowed[n] {
			t.Errorf("%s is unconditionally allowed", n)
		}
	}
	for _, p := range []filterPlan{{}, {network: true}, {loopback: true}} {
		f, err := compileFilter(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.prog) == 0 || len(f.prog)%8 != 0 || f.rules < len(allowedSyscalls) {
			t.Errorf("plan %+v: %d bytes, %d rules", p, len(f.prog), f.rules)
		}
	}
}

// TestFilterPerArch builds the filter for x86_64 and arm64 whatever this machine is:
// every rule names its syscall, and a syscall one architecture lacks (arch_prctl, open,
// fork on arm64) must drop out rather than fail the build or land on another number.
// Each program checks its own AUDIT_ARCH first, so the other ABIs (i386, x32, arm32)
// meet the bad-arch action.
func TestFilterPerArch(t *testing.T) {
	const (
		auditArchX86_64  = 0xc000003e
		auditArchAarch64 = 0xc00000b7
	)
	for _, tc := range []struct {
		arch       seccomp.ScmpArch
		audit      uint32
		notAudit   uint32
		onlyHere   string // a syscall only this architecture has
		onlyHereNr uint32
		prlimit64  uint32
	}{
		{seccomp.ArchAMD64, auditArchX86_64, auditArchAarch64, "arch_prctl", 158, 302},
		{seccomp.ArchARM64, auditArchAarch64, auditArchX86_64, "", 0, 261},
	} {
		// The Landlock tier's program filter too: its own arch, its own numbers.
		pf, err := compileProgramFilter(tc.arch, false)
		if err != nil {
			t.Fatalf("%s program filter: %v", tc.arch, err)
		}
		if ks := bpfConstants(pf.prog); !ks[tc.audit] || ks[tc.notAudit] || !ks[tc.prlimit64] || pf.rules != 8+len(xattrSyscalls)+len(xattrReadSyscalls) {
			t.Errorf("%s program filter: own AUDIT_ARCH %v, another's %v, prlimit64 (%d) %v, %d rules (want %d)",
				tc.arch, ks[tc.audit], ks[tc.notAudit], tc.prlimit64, ks[tc.prlimit64], pf.rules, 8+len(xattrSyscalls)+len(xattrReadSyscalls))
		}
		for _, network := range []bool{false, true} {
			f, err := compileFilter(filterPlan{network: network, arch: tc.arch})
			if err != nil {
				t.Fatalf("%s network=%v: %v", tc.arch, network, err)
			}
			ks := bpfConstants(f.prog)
			if !ks[tc.audit] || ks[tc.notAudit] {
				t.Errorf("%s: the program does not check its own AUDIT_ARCH (%#x) alone", tc.arch, tc.audit)
			}
			if tc.onlyHere != "" && !ks[tc.onlyHereNr] {
				t.Errorf("%s: %s (%d) is not in the program", tc.arch, tc.onlyHere, tc.onlyHereNr)
			}
		}
	}
	// The same names give different numbers: openat is 257 on x86_64 and 56 on arm64.
	for arch, want := range map[seccomp.ScmpArch]seccomp.ScmpSyscall{seccomp.ArchAMD64: 257, seccomp.ArchARM64: 56} {
		if got, err := seccomp.GetSyscallFromNameByArch("openat", arch); err != nil || got != want {
			t.Errorf("openat on %s = %d (%v), want %d", arch, got, err, want)
		}
	}
}

// bpfConstants returns the k operands of a BPF program's instructions (struct
// sock_filter: u16 code, u8 jt, u8 jf, u32 k, native endianness).
func bpfConstants(prog []byte) map[uint32]bool {
	ks := map[uint32]bool{}
	for i := 0; i+8 <= len(prog); i += 8 {
		ks[binary.NativeEndian.Uint32(prog[i+4:])] = true
	}
	return ks
}

// TestIoctlMasks checks the allowed ioctl matches as data: every 32-bit command but the
// denied ones matches exactly one, a denied one none, whatever the upper 32 bits hold.
func TestIoctlMasks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		denied  []uint32
		samples []uint64
	}{
		{"ioctl", deniedIoctls, []uint64{0, 0x5401, 0x5413, 0x541B, 0x541D, 0xffffffff, 0x80045430, uint64(unix.TIOCSTI) | 1<<32}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			masks := complementMasks(tc.denied)
			matches := func(x uint64) int { return maskMatches(t, masks, x) }
			r := rand.New(rand.NewPCG(1, 2))
			for _, d := range tc.denied {
				for i := 0; i < 100; i++ {
					x := r.Uint64()&^0xffffffff | uint64(d)
					if n := matches(x); n != 0 {
						t.Fatalf("denied %s %#x allowed by %d matches", tc.name, x, n)
					}
				}
			}
			samples := tc.samples
			for i := 0; i < 100000; i++ {
				samples = append(samples, r.Uint64())
			}
			for _, x := range samples {
				want := 1
				for _, d := range tc.denied {
					if uint32(x) == d {
						want = 0
					}
				}
				if n := matches(x); n != want {
					t.Fatalf("%s %#x matched %d times, want %d", tc.name, x, n, want)
				}
			}
			t.Logf("%d masked matches allow every %s command but %d", len(masks), tc.name, len(tc.denied))
		})
	}
}

// maskMatches counts the masked values x matches, as the filter's argument rules compare
// (the kernel passes the lower 32 bits only, so a mask may not look above them).
func maskMatches(t *testing.T, masks []maskedValue, x uint64) int {
	t.Helper()
	n := 0
	for _, m := range masks {
		if m.mask>>32 != 0 {
			t.Fatalf("mask %#x looks at the upper half, which the kernel ignores", m.mask)
		}
		if x&m.mask == m.value {
			n++
		}
	}
	return n
}

// TestFcntlMasks: every fcntl command of Linux 6.18 but F_NOTIFY and F_SETLEASE is
// allowed, by exactly one match, whatever the upper 32 bits hold; the denied ones and
// the commands Linux does not have match none.
func TestFcntlMasks(t *testing.T) {
	known := []uint32{unix.F_DUPFD, unix.F_GETFD, unix.F_SETFD, unix.F_GETFL, unix.F_SETFL, unix.F_GETLK, unix.F_SETLK,
		unix.F_SETLKW, unix.F_SETOWN, unix.F_GETOWN, unix.F_SETSIG, unix.F_GETSIG, unix.F_SETOWN_EX, unix.F_GETOWN_EX,
		17 /* F_GETOWNER_UIDS */, unix.F_OFD_GETLK, unix.F_OFD_SETLK, unix.F_OFD_SETLKW,
		unix.F_GETLEASE, 1027 /* F_DUPFD_QUERY */, 1028 /* F_CREATED_QUERY */, 1029 /* F_CANCELLK */, unix.F_DUPFD_CLOEXEC,
		unix.F_SETPIPE_SZ, unix.F_GETPIPE_SZ, unix.F_ADD_SEALS, unix.F_GET_SEALS,
		unix.F_GET_RW_HINT, unix.F_SET_RW_HINT, unix.F_GET_FILE_RW_HINT, unix.F_SET_FILE_RW_HINT}
	matches := func(x uint64) int { return maskMatches(t, allowedFcntls, x) }
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range known {
		for i := 0; i < 100; i++ {
			if x := r.Uint64()&^0xffffffff | uint64(c); matches(x) != 1 {
				t.Errorf("fcntl %#x (%d) matched %d times, want 1", x, c, matches(x))
			}
		}
	}
	for _, c := range append(slices.Clone(deniedFcntls), 1039, 1040, 64, 0xffffffff) {
		for i := 0; i < 100; i++ {
			if x := r.Uint64()&^0xffffffff | uint64(c); matches(x) != 0 {
				t.Errorf("fcntl %#x (%d) allowed", x, c)
			}
		}
	}
}

// TestPrctlMasks: every prctl option x/sys names but PR_FUTEX_HASH is allowed, by
// exactly one match, whatever the upper 32 bits hold; PR_FUTEX_HASH and an option Linux
// does not have match none.
func TestPrctlMasks(t *testing.T) {
	known := []uint32{unix.PR_SET_PDEATHSIG, unix.PR_GET_DUMPABLE, unix.PR_SET_NAME, unix.PR_SET_NO_NEW_PRIVS,
		unix.PR_SET_CHILD_SUBREAPER, unix.PR_SET_THP_DISABLE, unix.PR_CAP_AMBIENT, unix.PR_SET_SPECULATION_CTRL,
		unix.PR_SET_SYSCALL_USER_DISPATCH, unix.PR_SCHED_CORE, unix.PR_SET_MDWE, unix.PR_GET_MEMORY_MERGE,
		unix.PR_RISCV_SET_ICACHE_FLUSH_CTX, 72, 73, unix.PR_GET_SHADOW_STACK_STATUS, unix.PR_LOCK_SHADOW_STACK_STATUS,
		unix.PR_TIMER_CREATE_RESTORE_IDS, unix.PR_RSEQ_SLICE_EXTENSION, unix.PR_GET_CFI, unix.PR_SET_CFI,
		unix.PR_GET_AUXV, unix.PR_SET_VMA, unix.PR_SET_PTRACER}
	for i := uint32(0); i < 64; i++ {
		known = append(known, i)
	}
	matches := func(x uint64) int { return maskMatches(t, allowedPrctls, x) }
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range known {
		for i := 0; i < 100; i++ {
			if x := r.Uint64()&^0xffffffff | uint64(c); matches(x) != 1 {
				t.Errorf("prctl %#x (%d) matched %d times, want 1", x, c, matches(x))
			}
		}
	}
	for _, c := range []uint32{unix.PR_FUTEX_HASH, 82, 128, 0xffffffff, unix.PR_SET_PTRACER + 1} {
		for i := 0; i < 100; i++ {
			if x := r.Uint64()&^0xffffffff | uint64(c); matches(x) != 0 {
				t.Errorf("prctl %#x (%d) allowed", x, c)
			}
		}
	}
}

// The backend refuses a spec with a zero limit instead of filling it: policy fills
// every limit, and a second set of defaults here could drift from policy's.
func TestValidateRefusesZeroLimits(t *testing.T) {
	spec := withDefaults(sandbox.Spec{Argv: []string{"/bin/true"}})
	if err := validate(spec); err != nil {
		t.Fatalf("a filled spec: %v", err)
	}
	spec.Limits.Workspace = 0
	if err := validate(spec); !errors.Is(err, sandbox.ErrInvalidSpec) || !strings.Contains(err.Error(), "workspace") {
		t.Fatalf("a zero workspace: %v, want ErrInvalidSpec naming it", err)
	}
}

// An output directory with a zero artifact cap is refused the same way: the C walker
// never sees a zero cap (it would have no default of its own to fall back on).
func TestValidateRefusesZeroArtifactCaps(t *testing.T) {
	spec := withDefaults(sandbox.Spec{Argv: []string{"/bin/true"}, OutDir: "out",
		Artifacts: sandbox.ArtifactLimits{MaxFiles: 4, MaxFileBytes: 1 << 10, MaxTotal: 4 << 10}})
	if err := validate(spec); err != nil {
		t.Fatalf("positive caps: %v", err)
	}
	spec.Artifacts.MaxTotal = 0
	if err := validate(spec); !errors.Is(err, sandbox.ErrInvalidSpec) || !strings.Contains(err.Error(), "max_total") {
		t.Fatalf("a zero max_total: %v, want ErrInvalidSpec naming it", err)
	}
	spec.OutDir = "" // no output directory: the caps are not used
	if err := validate(spec); err != nil {
		t.Fatalf("no output directory: %v", err)
	}
}

// The plan tells the init which /proc masks are directories, so it binds each without an
// lstat first. A wrong kind still gets its mask (the init tries the other kind after the
// kernel's ENOTDIR), but costs an RCU grace period: this host's /proc must agree with
// procMaskDirs wherever it has the path.
func TestProcMaskKinds(t *testing.T) {
	for _, p := range procMasks {
		st, err := os.Lstat("/proc/" + p)
		if err != nil {
			continue // not on this kernel
		}
		if st.IsDir() != procMaskDirs[p] {
			t.Errorf("/proc/%s: a directory %v, procMaskDirs says %v", p, st.IsDir(), procMaskDirs[p])
		}
	}
	for p := range procMaskDirs {
		if !slices.Contains(procMasks, p) {
			t.Errorf("procMaskDirs names %s, which is no mask", p)
		}
	}
}
