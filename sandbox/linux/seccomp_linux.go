package linux

import (
	"fmt"
	"io"
	"os"
	"slices"

	seccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// The filter is an allowlist modelled on Docker's default profile, minus everything
// Docker only grants with extra capabilities, minus io_uring (a rich kernel attack
// surface Docker also dropped in 2023), and with argument filters on clone, socket,
// ioctl, fcntl, prctl, personality, preadv2, fadvise64 and ptrace. An allowlist is stricter than a
// denylist: a syscall added by a future kernel is refused until someone decides it is
// safe.
//
// Refused syscalls fail with an errno instead of killing the process, so interpreters
// can report a clean Python/JS error. Unknown syscalls get ENOSYS, so libc falls back to
// older calls (clone3 → clone, as glibc does); the named dangerous ones get EPERM.

// allowedSyscalls need no argument checks. Names libseccomp does not know (older
// library, other arch) are skipped.
var allowedSyscalls = []string{
	"accept", "accept4", "access", "alarm", "arch_prctl", "bind", "brk",
	"capget", "capset", "chdir", "chmod", "chown", "clock_getres", "clock_gettime",
	"clock_nanosleep", "close", "close_range", "connect", "copy_file_range", "creat",
	"dup", "dup2", "dup3", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_pwait",
	"epoll_pwait2", "epoll_wait", "eventfd", "eventfd2", "execve", "execveat", "exit",
	"exit_group", "faccessat", "faccessat2", "fallocate", "fchdir", "fchmod",
	"fchmodat", "fchmodat2", "fchown", "fchownat", "fdatasync", "fgetxattr",
	"flistxattr", "flock", "fork", "fremovexattr", "fsetxattr", "fstat", "fstatfs", "fsync",
	"ftruncate", "futex", "futex_requeue", "futex_wait", "futex_waitv", "futex_wake",
	"futimesat", "getcpu", "getcwd", "getdents", "getdents64", "getegid", "geteuid",
	"getgid", "getgroups", "getitimer", "getpeername", "getpgid", "getpgrp", "getpid",
	"getppid", "getpriority", "getrandom", "getresgid", "getresuid", "getrlimit",
	"get_robust_list", "getrusage", "getsid", "getsockname", "getsockopt", "gettid",
	"gettimeofday", "getuid", "getxattr", "kill", "landlock_add_rule",
	"landlock_create_ruleset", "landlock_restrict_self", "lchown", "lgetxattr", "link",
	"linkat", "listen", "listxattr", "llistxattr", "lremovexattr", "lseek", "lsetxattr",
	"lstat", "madvise", "map_shadow_stack", "membarrier", "memfd_create", "mincore",
	"mkdir", "mkdirat", "mknod", "mknodat", "mlock", "mlock2", "mlockall", "mmap",
	"mprotect", "mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive",
	"mq_timedsend", "mq_unlink", "mremap", "mseal", "msgctl", "msgget", "msgrcv", "msgsnd",
	"msync", "munlock", "munlockall", "munmap", "nanosleep", "newfstatat", "open",
	"openat", "openat2", "pause", "pidfd_open", "pidfd_send_signal", "pipe", "pipe2",
	"poll", "ppoll", "pread64", "preadv", "prlimit64", "pselect6",
	"pwrite64", "pwritev", "pwritev2", "read", "readahead", "readlink", "readlinkat",
	"readv", "recvfrom", "recvmmsg", "recvmsg", "remap_file_pages", "removexattr",
	"rename", "renameat", "renameat2", "restart_syscall", "rmdir", "rseq",
	"rt_sigaction", "rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo",
	"rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait", "rt_tgsigqueueinfo",
	"sched_getaffinity", "sched_getattr", "sched_getparam", "sched_get_priority_max",
	"sched_get_priority_min", "sched_getscheduler", "sched_rr_get_interval",
	"sched_setaffinity", "sched_setattr", "sched_setparam", "sched_setscheduler",
	"sched_yield", "seccomp", "select", "semctl", "semget", "semop", "semtimedop",
	"sendfile", "sendmmsg", "sendmsg", "sendto", "setfsgid", "setfsuid", "setgid",
	"setgroups", "setitimer", "setpgid", "setpriority", "setregid", "setresgid",
	"setresuid", "setreuid", "setrlimit", "set_robust_list", "setsid", "setsockopt",
	"set_tid_address", "setuid", "setxattr", "shmat", "shmctl", "shmdt", "shmget",
	"shutdown", "sigaltstack", "signalfd", "signalfd4", "splice", "stat", "statfs",
	"statx", "symlink", "symlinkat", "sync", "sync_file_range", "syncfs", "sysinfo",
	"tee", "tgkill", "time", "timer_create", "timer_delete", "timer_getoverrun",
	"timer_gettime", "timer_settime", "timerfd_create", "timerfd_gettime",
	"timerfd_settime", "times", "tkill", "truncate", "umask", "uname", "unlink",
	"unlinkat", "utime", "utimensat", "utimes", "vfork", "vmsplice", "wait4", "waitid",
	"write", "writev",
}

// cachestat is left to the default, ENOSYS, the answer of a kernel without it: before
// Linux 6.14 it told any caller which pages of any file it can open are in the page cache,
// the host's read-only system files' included, so which of them another run in flight had
// read (TestPageCacheUnobservable; preadv2 below).

// deniedSyscalls fail with EPERM. None of them is in the allowlist; they are named so
// the refusal is explicit and the probe report can count them.
var deniedSyscalls = []string{
	// Namespaces and mounts: the escape toolkit.
	"mount", "umount", "umount2", "pivot_root", "chroot", "setns", "unshare",
	"fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
	// Reading or writing other processes.
	"process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp", "process_madvise",
	// Watching files: the read-only system files are the host's own, so a watch on
	// /usr/bin/git would see the host (and every other run) use it.
	"inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
	// Kernel keyring, BPF, perf, userfaultfd, io_uring.
	"keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	// Old async I/O: rarely needed, frequently buggy.
	"io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
	// The kernel itself and the machine.
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"create_module", "swapon", "swapoff", "reboot", "syslog", "acct", "quotactl",
	"quotactl_fd", "lookup_dcookie", "uselib", "ustat", "sysfs", "_sysctl", "vhangup",
	"iopl", "ioperm", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"open_by_handle_at", "name_to_handle_at", "nfsservctl", "get_kernel_syms",
	"query_module", "fanotify_init", "fanotify_mark", "mbind", "set_mempolicy",
	"get_mempolicy", "migrate_pages", "move_pages", "memfd_secret",
	"sethostname", "setdomainname",
}

// ipcSyscalls are System V IPC and POSIX message queues: a namespace's own, or refused
// where there is none (filterPlan.landlock).
var ipcSyscalls = []string{
	"msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop", "semtimedop", "semctl",
	"shmget", "shmat", "shmdt", "shmctl", "mq_open", "mq_unlink", "mq_timedsend",
	"mq_timedreceive", "mq_notify", "mq_getsetattr",
}

// refusedCloneFlags are the clone flags a program may not use: those that create
// namespaces, and CLONE_PARENT, which makes the new process a child of the caller's
// parent. No program needs that one (libc, Go, node and python never pass it), and it is
// the one way for code to put a process beside the one its parent spares: a session's
// sweep after a call the server stopped spares the supervisor's child, the worker, so a
// sibling the worker cloned outlived that call
// (TestSessionStoppedCallLeavesNoSiblingOfTheWorker).
var refusedCloneFlags = []uint64{
	unix.CLONE_NEWUSER, unix.CLONE_NEWNS, unix.CLONE_NEWPID, unix.CLONE_NEWNET,
	unix.CLONE_NEWIPC, unix.CLONE_NEWUTS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWTIME,
	unix.CLONE_PARENT,
}

// personality values Docker allows: the default, and the flags some runtimes set.
var personalities = []uint64{0x0, 0x0008, 0x20000, 0x20008, 0xffffffff}

// filterPlan is the seccomp policy as data, so tests can check it without loading it.
type filterPlan struct {
	network bool // host network: AF_INET, AF_INET6 and AF_NETLINK sockets allowed
	// loopback (network "allowlist"): AF_INET and AF_INET6, to reach the proxy on the
	// namespace's loopback, its only interface. Netlink stays refused.
	loopback bool
	// landlock is the Landlock tier, which has no IPC or network namespace. System V
	// IPC and POSIX message queues would be the host's, shared with every other run:
	// refused with EPERM. So is connect, and sendto with an address: the only sockets
	// are AF_UNIX, and Landlock before ABI 9 cannot restrict pathname sockets, so the
	// host's world-writable ones (/run/dbus/system_bus_socket, /dev/log) would be
	// reachable. sendmsg's address sits in memory seccomp cannot read, so AF_UNIX
	// sockets are of the connection-oriented types only (unixConnectedOnly). And bind
	// and listen: Landlock's scoping keeps the program from connecting out to an
	// abstract socket, not the host's processes from connecting in, so a run could
	// listen at any abstract name a host service uses (@/tmp/.X11-unix/X0, say), take
	// its clients' connections and data, or hold the name so the service cannot bind it
	// (TestNetworkDenied). With connect refused, no process of the run could reach its
	// own listener anyway.
	landlock bool
	// arch is the architecture the filter is for; zero (ArchInvalid) is the native one.
	// Rules name syscalls, and libseccomp numbers them for the architecture, so tests
	// build the arm64 filter on amd64 and the other way round.
	arch seccomp.ScmpArch
}

func (p filterPlan) socketFamilies() []uint64 {
	switch {
	case p.network:
		return []uint64{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}
	case p.loopback:
		return []uint64{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6}
	}
	return []uint64{unix.AF_UNIX}
}

// bpf is a compiled seccomp program, built once per network mode by the server and
// loaded by each sandbox's init. Compiling with libseccomp costs milliseconds; loading
// the finished BPF costs microseconds.
type bpf struct {
	prog    []byte // struct sock_filter array, native endianness
	rules   int
	badArch string // what happens to a syscall of a foreign architecture, for probe
}

// compileFilter turns the policy into BPF without loading it anywhere.
func compileFilter(p filterPlan) (*bpf, error) {
	filter, err := seccomp.NewFilter(seccomp.ActErrno.SetReturnCode(int16(unix.ENOSYS)))
	if err != nil {
		return nil, fmt.Errorf("seccomp: new filter: %w", err)
	}
	defer filter.Release()
	if native, _ := seccomp.GetNativeArch(); p.arch != seccomp.ArchInvalid && p.arch != seccomp.ArchNative && p.arch != native {
		if err := filter.AddArch(p.arch); err != nil {
			return nil, fmt.Errorf("seccomp: add arch %s: %w", p.arch, err)
		}
		if err := filter.RemoveArch(seccomp.ArchNative); err != nil {
			return nil, fmt.Errorf("seccomp: remove the native arch: %w", err)
		}
	}
	// Only the native ABI: i386 and x32 entry points would bypass every rule. gVisor
	// knows no SECCOMP_RET_KILL_PROCESS (libseccomp asks the kernel and gets EINVAL):
	// there the calling thread is killed instead, and probe says so.
	badArch := "foreign architectures killed"
	if err := filter.SetBadArchAction(seccomp.ActKillProcess); err != nil {
		if err2 := filter.SetBadArchAction(seccomp.ActKillThread); err2 != nil {
			return nil, fmt.Errorf("seccomp: bad arch action: %w", err)
		}
		badArch = "a syscall of a foreign architecture kills its thread (this kernel has no kill-process action: gVisor)"
	}
	// A binary tree of syscall numbers rather than a linear list: the kernel runs the
	// filter once per syscall number and architecture when it loads it (to fill its
	// action cache), and that load went from ~0.6 ms to ~0.25 ms here.
	if err := filter.SetOptimize(2); err != nil {
		return nil, fmt.Errorf("seccomp: optimize: %w", err)
	}
	b := &builder{f: filter}
	eperm := seccomp.ActErrno.SetReturnCode(int16(unix.EPERM))

	for _, name := range allowedSyscalls {
		if p.landlock && (slices.Contains(ipcSyscalls, name) || slices.Contains([]string{"connect", "bind", "listen"}, name)) {
			b.rule(name, eperm)
			continue
		}
		if p.landlock && name == "sendto" {
			b.rule(name, seccomp.ActAllow, cond(4, seccomp.CompareEqual, 0))
			b.rule(name, eperm, cond(4, seccomp.CompareNotEqual, 0))
			continue
		}
		b.rule(name, seccomp.ActAllow)
	}
	for _, name := range deniedSyscalls {
		b.rule(name, eperm)
	}
	// clone3 passes its flags in memory, where seccomp cannot look. It is left to the
	// default action, ENOSYS, which makes libc fall back to clone, whose flags we check.
	// clone without namespace flags (or CLONE_PARENT) is how threads and processes are made.
	var refused uint64
	for _, f := range refusedCloneFlags {
		refused |= f
	}
	b.rule("clone", seccomp.ActAllow, cond(0, seccomp.CompareMaskedEqual, refused, 0))
	for _, f := range refusedCloneFlags {
		b.rule("clone", eperm, cond(0, seccomp.CompareMaskedEqual, f, f))
	}
	// Sockets: only the allowed families; everything else (raw, packet, netlink, vsock,
	// and AF_INET when the network is off) fails with EAFNOSUPPORT.
	noFamily := seccomp.ActErrno.SetReturnCode(int16(unix.EAFNOSUPPORT))
	allowed := map[uint64]bool{}
	for _, fam := range p.socketFamilies() {
		allowed[fam] = true
		if p.landlock && fam == unix.AF_UNIX {
			b.unixConnectedOnly(eperm)
			continue
		}
		b.rule("socket", seccomp.ActAllow, cond(0, seccomp.CompareEqual, fam))
		b.rule("socketpair", seccomp.ActAllow, cond(0, seccomp.CompareEqual, fam))
	}
	const maxFamily = unix.AF_MAX
	for fam := uint64(0); fam < maxFamily; fam++ {
		if !allowed[fam] {
			b.rule("socket", noFamily, cond(0, seccomp.CompareEqual, fam))
			b.rule("socketpair", noFamily, cond(0, seccomp.CompareEqual, fam))
		}
	}
	b.rule("socket", noFamily, cond(0, seccomp.CompareGreaterEqual, maxFamily))
	b.rule("socketpair", noFamily, cond(0, seccomp.CompareGreaterEqual, maxFamily))
	// ioctl: everything but terminal input injection (TIOCSTI) and TIOCLINUX. The command
	// is compared as 32 bits, as the kernel reads it, so garbage in the upper half of the
	// register cannot slip past (CVE-2019-10063). libseccomp lets an unconditional rule
	// override conditional ones, so "allow ioctl" cannot be written as such: the allowed
	// commands are spelled out as masked matches that together cover every other value.
	for _, m := range complementMasks(deniedIoctls) {
		b.rule("ioctl", seccomp.ActAllow, cond(1, seccomp.CompareMaskedEqual, m.mask, m.value))
	}
	for _, cmd := range deniedIoctls {
		b.rule("ioctl", eperm, cond(1, seccomp.CompareMaskedEqual, 0xffffffff, uint64(cmd)))
	}
	// fcntl: the commands Linux has, but F_NOTIFY and F_SETLEASE (cmd is an unsigned int
	// to the kernel: 32 bits compared). A command of a later kernel gets ENOSYS.
	for _, m := range allowedFcntls {
		b.rule("fcntl", seccomp.ActAllow, cond(1, seccomp.CompareMaskedEqual, m.mask, m.value))
	}
	for _, cmd := range deniedFcntls {
		b.rule("fcntl", eperm, cond(1, seccomp.CompareMaskedEqual, 0xffffffff, uint64(cmd)))
	}
	// prctl: the options Linux has, but PR_FUTEX_HASH (6.16), which sizes the process's
	// private futex hash as it asks: one call for 2^24 slots took 850 MB of kernel
	// memory, counted by no rlimit (only a memory cgroup charges it), and each of a run's
	// processes may have one. Without a memory cgroup (sandbox.cgroups = "off", a
	// container without writable cgroups) a run with a memory limit of 64 MiB held that
	// per process, 64 processes enough for the host's memory (TestFutexHashRefused). Its
	// answer is a kernel's without the option, EINVAL; the kernel sizes the hash itself.
	// The option is an int: 32 bits compared, as for fcntl, and an option of a later
	// kernel gets ENOSYS.
	for _, m := range allowedPrctls {
		b.rule("prctl", seccomp.ActAllow, cond(0, seccomp.CompareMaskedEqual, m.mask, m.value))
	}
	b.rule("prctl", seccomp.ActErrno.SetReturnCode(int16(unix.EINVAL)), cond(0, seccomp.CompareMaskedEqual, 0xffffffff, unix.PR_FUTEX_HASH))
	for _, v := range personalities {
		b.rule("personality", seccomp.ActAllow, cond(0, seccomp.CompareEqual, v))
	}
	// preadv2 without RWF_NOWAIT. A read that must not wait fails with EAGAIN exactly
	// when the page is not in the page cache, and the read-only system files' pages are
	// the host's, shared with every run: without a timing, one run would see which of
	// them another run in flight (or the host) read, which modules it imported, or take
	// a message from it, a bit per page (TestPageCacheUnobservable). The kernel's own
	// answer where a file cannot do it is EOPNOTSUPP, which callers already handle by
	// reading without the flag. rwf_t is an int: only its low 32 bits are compared.
	// fadvise64 but POSIX_FADV_DONTNEED, which succeeds without doing anything (the
	// answer tmpfs, the run's own files' file system, gives it anyway). The kernel drops
	// a file's clean pages from the page cache for whoever may read it, so a run evicted
	// the host's system files, the ones every run and the host share (all of the Python
	// stdlib in a walk): every other tenant's next start read them from disk, and a run
	// could flush a page before timing its reload, the page cache channel with its
	// timing made exact (TestHostPageCacheKept). The kernel itself keeps mincore (5.0)
	// and madvise(MADV_PAGEOUT) from files the caller cannot write; it does not keep
	// fadvise. The advice is an int: its low 32 bits are compared, as for fcntl, and the
	// others Linux has are two masked matches (NORMAL, RANDOM, SEQUENTIAL, WILLNEED = 0-3;
	// NOREUSE = 5); a value it has not is ENOSYS rather than EINVAL.
	b.rule("fadvise64", seccomp.ActAllow, cond(3, seccomp.CompareMaskedEqual, 0xfffffffc, 0))
	b.rule("fadvise64", seccomp.ActAllow, cond(3, seccomp.CompareMaskedEqual, 0xffffffff, unix.FADV_NOREUSE))
	b.rule("fadvise64", seccomp.ActErrno.SetReturnCode(0), cond(3, seccomp.CompareMaskedEqual, 0xffffffff, unix.FADV_DONTNEED))
	b.rule("preadv2", seccomp.ActAllow, cond(5, seccomp.CompareMaskedEqual, unix.RWF_NOWAIT, 0))
	b.rule("preadv2", seccomp.ActErrno.SetReturnCode(int16(unix.EOPNOTSUPP)), cond(5, seccomp.CompareMaskedEqual, unix.RWF_NOWAIT, unix.RWF_NOWAIT))

	if b.err != nil {
		return nil, b.err
	}
	prog, err := exportBPF(filter)
	if err != nil {
		return nil, fmt.Errorf("seccomp: export: %w", err)
	}
	return &bpf{prog: prog, rules: b.n, badArch: badArch}, nil
}

// exportBPF writes the program to a memfd and reads it back (libseccomp 2.5, as shipped
// by Debian 12 and Ubuntu 22.04, has no export to memory).
func exportBPF(f *seccomp.ScmpFilter) ([]byte, error) {
	fd, err := unix.MemfdCreate("airlock-seccomp", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	file := os.NewFile(uintptr(fd), "airlock-seccomp")
	defer file.Close()
	if err := f.ExportBPF(file); err != nil {
		return nil, err
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(file)
}

// allowedPrctls are the prctl options as masked ranges, as allowedFcntls are (a
// complement of PR_FUTEX_HASH alone would be 32 matches, a millisecond more of
// libseccomp's time at each compile): 1-77 and 79-81, and the three named by a magic
// number, PR_GET_AUXV, PR_SET_VMA and PR_SET_PTRACER.
var allowedPrctls = []maskedValue{
	{0xffffffc0, 0},  // 0-63
	{0xfffffff8, 64}, // 64-71
	{0xfffffffc, 72}, // 72-75
	{0xfffffffe, 76}, // 76-77
	{0xffffffff, 79}, // PR_RSEQ_SLICE_EXTENSION
	{0xfffffffe, 80}, // PR_GET_CFI, PR_SET_CFI
	{0xffffffff, unix.PR_GET_AUXV},
	{0xffffffff, unix.PR_SET_VMA},
	{0xffffffff, unix.PR_SET_PTRACER},
}

// deniedIoctls are the ioctl commands refused with EPERM.
var deniedIoctls = []uint32{unix.TIOCSTI, unix.TIOCLINUX}

// deniedFcntls are the fcntl commands refused with EPERM, for the reason inotify is:
// the read-only system files are the host's own, shared with every run.
//   - F_NOTIFY (dnotify) on a system directory signals each read of a file in it, the
//     host's and another run's in flight: which modules it imports, when the host runs
//     git (TestHostActivityInvisible).
//   - F_SETLEASE: a lease on a file the run's host uid owns (where the runs share the
//     server's uid, an interpreter's prefix or an environment the server's user built)
//     holds whoever opens it next for writing or truncating for lease-break-time (45 s),
//     and its break tells the run when that happened (TestInodeFlagsOutsideWorkspace).
var deniedFcntls = []uint32{unix.F_NOTIFY, unix.F_SETLEASE}

// allowedFcntls are the other commands of Linux 6.18, as a few masked ranges rather
// than the 61 matches of deniedFcntls' complement: the filter is compiled at each
// `airlock run`, and those cost about a millisecond of libseccomp's time more. 0-63
// are the POSIX ones and the OFD locks (F_OFD_* = 36-38); from F_LINUX_SPECIFIC_BASE
// (1024) F_GETLEASE, F_DUPFD_QUERY, F_CREATED_QUERY, F_CANCELLK, F_DUPFD_CLOEXEC, the
// pipe sizes, seals and write hints, up to F_SET_FILE_RW_HINT (1038). A later one (a
// delegation, like a lease) is refused until someone decides it is safe.
var allowedFcntls = []maskedValue{
	{0xffffffc0, 0},    // 0-63
	{0xffffffff, 1025}, // F_GETLEASE
	{0xffffffff, 1027}, // F_DUPFD_QUERY
	{0xfffffffc, 1028}, // 1028-1031
	{0xfffffffc, 1032}, // 1032-1035
	{0xfffffffe, 1036}, // 1036-1037
	{0xffffffff, 1038}, // F_SET_FILE_RW_HINT
}

// maskedValue matches a 32-bit argument x when x&mask == value.
type maskedValue struct{ mask, value uint64 }

// complementMasks returns masked matches that, together, match every 32-bit value except
// those in denied, and never one of those: a binary trie over the bits from the lowest
// up, with one match for each branch no denied value takes.
func complementMasks(denied []uint32) []maskedValue {
	var out []maskedValue
	var walk func(vals []uint32, bit uint, mask, value uint64)
	walk = func(vals []uint32, bit uint, mask, value uint64) {
		if bit == 32 {
			return // vals all equal this path: a denied value
		}
		for b := uint64(0); b <= 1; b++ {
			var sub []uint32
			for _, v := range vals {
				if uint64(v>>bit)&1 == b {
					sub = append(sub, v)
				}
			}
			m, val := mask|1<<bit, value|b<<bit
			if len(sub) == 0 {
				out = append(out, maskedValue{m, val})
			} else {
				walk(sub, bit+1, m, val)
			}
		}
	}
	walk(denied, 0, 0, 0)
	return out
}

type builder struct {
	f   *seccomp.ScmpFilter
	n   int
	err error
}

func (b *builder) rule(name string, act seccomp.ScmpAction, conds ...seccomp.ScmpCondition) {
	if b.err != nil {
		return
	}
	sc, err := seccomp.GetSyscallFromName(name)
	if err != nil {
		return // unknown to this libseccomp or arch
	}
	if len(conds) == 0 {
		err = b.f.AddRule(sc, act)
	} else {
		err = b.f.AddRuleConditional(sc, act, conds)
	}
	if err != nil {
		b.err = fmt.Errorf("seccomp: rule %s: %w", name, err)
		return
	}
	b.n++
}

// unixConnectedOnly allows AF_UNIX sockets of the connection-oriented types only, for
// the Landlock tier: a datagram socket (SOCK_RAW is one too for AF_UNIX), even one of a
// socketpair, reaches any host pathname datagram socket it can write (/dev/log: the
// host's journal) through sendmsg's msg_name, which seccomp cannot read. A stream or
// seqpacket socket reaches nothing without connect (refused): the kernel refuses or
// ignores a msg_name on those. The type's low four bits are the type; the rest are
// SOCK_NONBLOCK and SOCK_CLOEXEC.
func (b *builder) unixConnectedOnly(deny seccomp.ScmpAction) {
	for typ := uint64(0); typ <= 0xf; typ++ {
		act := deny
		if typ == unix.SOCK_STREAM || typ == unix.SOCK_SEQPACKET {
			act = seccomp.ActAllow
		}
		for _, name := range []string{"socket", "socketpair"} {
			b.rule(name, act, cond(0, seccomp.CompareEqual, unix.AF_UNIX), cond(1, seccomp.CompareMaskedEqual, 0xf, typ))
		}
	}
}

func cond(arg uint, op seccomp.ScmpCompareOp, values ...uint64) seccomp.ScmpCondition {
	c, err := seccomp.MakeCondition(arg, op, values...)
	if err != nil {
		// Only reachable with a malformed literal above; an empty condition would make
		// the rule unconditional, so refuse loudly through the builder instead.
		return seccomp.ScmpCondition{Argument: 99}
	}
	return c
}

// syscallNumber is name's number on the architecture this binary runs on, or false when
// the architecture has no such syscall (libseccomp answers those with a negative
// pseudo-number, which no kernel would accept).
func syscallNumber(name string) (int, bool) {
	sc, err := seccomp.GetSyscallFromName(name)
	if err != nil || sc < 0 {
		return 0, false
	}
	return int(sc), true
}

// The Landlock tier's program filter: a second seccomp program the program (and the
// preloaded interpreter) loads on top of the tier's filter between fork and exec, as its
// Landlock domain is nested in the init's (ll_nest). Some syscalls change another
// process's resource limits, niceness, scheduling policy or CPUs given its pid, and the
// kernel asks only that it have the caller's uid, which Landlock does not cover. In this
// tier an unprivileged server's runs all have its uid, and no pid namespace hides it: a
// run could set the server's RLIMIT_CPU (and so kill it) or RLIMIT_NOFILE, make it
// SCHED_IDLE, or do the same to another run in flight (TestLandlockTwoRunsInFlight). The
// program may aim them only at itself: pid 0, setpriority's "who" 0 for its own process
// or process group (never PRIO_USER: every process of the uid), prlimit64 at another pid
// only to read. The init itself keeps them, to lower a preloaded interpreter's limits at
// the call. Each pid is compared in all 64 bits: one the kernel reads as 0 from its low 32
// bits but with garbage above is refused, never let through.
//
// Landlock does not cover a file's metadata either: its mode, owner, times and extended
// attributes change wherever the kernel's owner check passes. With a uid of its own per
// run that is the run's own directories; with the server's uid (or one shared by every
// run: sharedUID) it is every file of that uid on the host, outside the granted paths
// too: the server's state directory, the user's home, another run's directory, which a
// run could make world-writable. There every syscall that changes metadata is refused,
// by path or by descriptor (a descriptor of a granted read-only file of that uid is
// enough for fchmod), and chmod, touch of an old file, and copying a mode with the file
// fail with EPERM (probe: file-metadata). Extended attributes are refused in every run of
// the tier (xattrSyscalls).
var metadataSyscalls = []string{
	"chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat",
	"utime", "utimes", "futimesat", "utimensat",
}

// xattrSyscalls change extended attributes: refused in this tier whatever the uids, as
// on a file system without them (EOPNOTSUPP: cp -a then keeps the mode with fchmod, where
// EPERM failed it, "preserving permissions"; shutil.copystat passes over it). A
// user xattr needs only write permission on the file, not its ownership, so with a uid
// of its own a run could still store data (64 KiB a name) in every host file and
// directory anyone may write, outside the granted paths (a 0666 file in /tmp or
// /dev/shm, a 0777 directory), for a later run of another tenant to read: the kernel
// checks no open for it, and Landlock covers opens (TestWorldWritableHostFiles).
// setxattrat and removexattrat (Linux 6.13) are not in the allowlist: ENOSYS.
var xattrSyscalls = []string{
	"setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
}

// xattrReadSyscalls read extended attributes: in this tier they fail as changes do, as on
// a file system without them.
// Reading opens nothing, so Landlock does not check it: a run read the user xattrs of a
// host file it may not open, outside the granted paths (a browser's
// user.xdg.origin.url on a download, the URL with its token), and under an unprivileged
// server those of every file of the server's user (TestHostXattrsUnreadable). The
// descriptor forms too: a newer kernel may take an O_PATH descriptor, which Landlock
// does not check either. getxattrat and listxattrat (Linux 6.13) are not in the
// allowlist: ENOSYS.
var xattrReadSyscalls = []string{
	"getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr",
}

// metadataIoctls change a file's inode flags (nodump: gone from backups; sync; noatime),
// extended flags and project, generation, fs-verity (which makes the file read-only for
// good) or encryption policy, given any descriptor of it, a read-only one included, where
// the kernel's owner check passes. Landlock checks the open only, so with a shared uid a
// run could do this to every file of that uid it may read: an interpreter's prefix in
// the server's user's home (TestInodeFlagsOutsideWorkspace). The 32-bit spellings too.
var metadataIoctls = []uint32{
	unix.FS_IOC_SETFLAGS, 0x40046602, // FS_IOC32_SETFLAGS
	0x401c5820,             // FS_IOC_FSSETXATTR
	0x40087602, 0x40047602, // FS_IOC_SETVERSION, FS_IOC32_SETVERSION
	unix.FS_IOC_ENABLE_VERITY, unix.FS_IOC_SET_ENCRYPTION_POLICY,
}

// pidfdGetInfo is PIDFD_GET_INFO (Linux 6.13), whatever the size of the struct in the
// command: the program filter answers it as a kernel without it does (ENOTTY). With no
// pid namespace a run may pidfd_open any process of the host, another run's among them,
// and the kernel asks nothing more for this: it told a run another run's uids and
// cgroup while it ran, and once it died, its exit status (PIDFD_INFO_EXIT, 6.15:
// TestLandlockPidfdInfoRefused). The namespace ioctls on a pidfd need ptrace access,
// which Landlock refuses across domains.
var pidfdGetInfo = maskedValue{0xc000ffff, 0xc000ff0b}

// compileProgramFilter is the program filter; arch as in filterPlan.
func compileProgramFilter(arch seccomp.ScmpArch, sharedUID bool) (*bpf, error) {
	filter, err := seccomp.NewFilter(seccomp.ActAllow)
	if err != nil {
		return nil, fmt.Errorf("seccomp: new program filter: %w", err)
	}
	defer filter.Release()
	if native, _ := seccomp.GetNativeArch(); arch != seccomp.ArchInvalid && arch != seccomp.ArchNative && arch != native {
		if err := filter.AddArch(arch); err != nil {
			return nil, fmt.Errorf("seccomp: add arch %s: %w", arch, err)
		}
		if err := filter.RemoveArch(seccomp.ArchNative); err != nil {
			return nil, fmt.Errorf("seccomp: remove the native arch: %w", err)
		}
	}
	b := &builder{f: filter}
	eperm := seccomp.ActErrno.SetReturnCode(int16(unix.EPERM))
	for _, name := range []string{"sched_setaffinity", "sched_setattr", "sched_setparam", "sched_setscheduler"} {
		b.rule(name, eperm, cond(0, seccomp.CompareNotEqual, 0))
	}
	b.rule("prlimit64", eperm, cond(0, seccomp.CompareNotEqual, 0), cond(2, seccomp.CompareNotEqual, 0))
	b.rule("setpriority", eperm, cond(1, seccomp.CompareNotEqual, 0))
	b.rule("setpriority", eperm, cond(0, seccomp.CompareGreater, unix.PRIO_PGRP))
	b.rule("ioctl", seccomp.ActErrno.SetReturnCode(int16(unix.ENOTTY)), cond(1, seccomp.CompareMaskedEqual, pidfdGetInfo.mask, pidfdGetInfo.value))
	noXattrs := seccomp.ActErrno.SetReturnCode(int16(unix.EOPNOTSUPP))
	for _, name := range append(slices.Clone(xattrSyscalls), xattrReadSyscalls...) {
		b.rule(name, noXattrs)
	}
	if sharedUID {
		for _, name := range metadataSyscalls {
			b.rule(name, eperm)
		}
		for _, cmd := range metadataIoctls {
			b.rule("ioctl", eperm, cond(1, seccomp.CompareMaskedEqual, 0xffffffff, uint64(cmd)))
		}
	}
	if b.err != nil {
		return nil, b.err
	}
	prog, err := exportBPF(filter)
	if err != nil {
		return nil, fmt.Errorf("seccomp: export: %w", err)
	}
	return &bpf{prog: prog, rules: b.n}, nil
}
