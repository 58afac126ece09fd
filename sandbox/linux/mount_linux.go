package linux

// #include "protocol_linux.h"
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/sandbox"
)

// systemDirs are the host directories interpreters need, bound read-only. On merged-/usr
// hosts most of them are symlinks into /usr and are recreated as the same symlinks.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcCopies are host /etc files copied into the sandbox's own /etc. Nothing else of /etc
// is visible: no shadow, no host passwd, no machine secrets. Debian's matplotlib reads
// its defaults from /etc/matplotlibrc only, and refuses to import without it.
var etcCopies = []string{"ld.so.cache", "nsswitch.conf", "protocols", "services", "matplotlibrc"}

// etcBinds are host /etc directories bound read-only because programs resolve through
// them: Debian's alternatives (awk, editor, …), public CA certificates, and fontconfig's
// configuration (matplotlib lists the system fonts with fc-list, which fails without it).
var etcBinds = []string{"alternatives", "ssl", "ca-certificates", "fonts"}

// devNodes are the host device nodes bound into the minimal /dev.
var devNodes = []string{"null", "zero", "full", "random", "urandom"}

// procMasks are the files and directories of the sandbox's /proc that are hidden (a file
// reads empty, a directory is empty; both are read-only). The first group tells the
// program about the host: its boot arguments (listen addresses, ports), its kernel build,
// its boot, its hardware and modules. The second is what runc and Docker mask: kernel
// memory, the kernel's keys and timers, per-CPU scheduler state. The third are host-wide
// counters of other tenants' activity that no interpreter reads: interrupts per CPU and
// device, disk I/O, swap devices, pressure stall times, and locks: the kernel lists every
// open file description lock of the host there whatever the pid namespace (an OFD lock
// has no pid to hide it by), so a run read the server's host-id locks, one per live
// sandbox of every server with its host uid as the offset, and any range another run in
// flight locked on its own file, a channel from tenant to tenant that needs no shared
// file (TestHostLocksInvisible). Host-wide counters that programs
// do read stay (docs/containers.md, "/proc"): stat (CPU count and times: node's
// os.cpus()), cpuinfo, meminfo, loadavg (os.getloadavg), uptime, vmstat.
var procMasks = []string{
	"cmdline", "config.gz", "sys/kernel/random/boot_id", "version_signature", "bootconfig",
	"kallsyms", "modules", "iomem", "ioports", "devices", "misc", "mtrr", "consoles",
	"kcore", "keys", "key-users", "timer_list", "timer_stats", "sched_debug", "latency_stats",
	"sysrq-trigger", "acpi", "asound", "scsi", "driver", "dynamic_debug",
	"interrupts", "softirqs", "diskstats", "partitions", "swaps", "pressure", "locks",
}

// procMaskDirs are the procMasks that are directories where the kernel has them. The
// init binds each mask as what the plan says it is, without an lstat first; a wrong
// kind costs it a second bind, never the mask.
var procMaskDirs = map[string]bool{
	"acpi": true, "asound": true, "scsi": true, "driver": true, "dynamic_debug": true, "pressure": true,
}

// Sizes of the root tmpfs, which holds the skeleton, /dev and the scratch directories
// /tmp and /dev/shm (opScratch), and of the workspace. /tmp and /dev/shm share one
// budget: together they hold what each held alone before (16 MiB apiece).
const (
	rootSize   = 1 << 20  // the root skeleton: mount points, /etc files, /dev's symlinks
	tmpSize    = 16 << 20 // /tmp
	shmSize    = 16 << 20 // /dev/shm, for POSIX semaphores (python multiprocessing)
	rootInodes = 4096
	tmpInodes  = 4096
	shmInodes  = 1024
	wsInodes   = 65536
)

// mountKind says what one step of the root plan does: OP_* in protocol_linux.h.
type mountKind int

const (
	opDir     mountKind = C.OP_DIR      // mkdir Target
	opSymlink mountKind = C.OP_SYMLINK  // symlink Link -> Target
	opBindRO  mountKind = C.OP_BIND_RO  // bind Source read-only at Target (a dir or file mount point)
	opTmpfs   mountKind = C.OP_TMPFS    // tmpfs at Target with Data options
	opProc    mountKind = C.OP_PROC     // fresh proc at Target
	opCopy    mountKind = C.OP_COPY     // copy host file Source to Target (or write Content), before pivot_root
	opBindDev mountKind = C.OP_BIND_DEV // bind a host device node at Target, usable (not nodev) and read-only
	opMask    mountKind = C.OP_MASK     // hide an existing Target: Source (/dev/null) over a file, an empty read-only tmpfs over a directory
	opScratch mountKind = C.OP_SCRATCH  // a directory of the root tmpfs at Source (mode 1777), bound writable at Target with Flags
)

// mountOp is one step of the root plan. Targets are absolute paths inside the sandbox.
// The init (root_linux.c) executes the plan: the first step is the root tmpfs, which it
// mounts over /tmp of its private mount namespace before pivot_root (the host's /tmp is
// neither changed nor visible afterwards).
type mountOp struct {
	Kind    mountKind
	Source  string
	Target  string
	Link    string
	Data    string
	Flags   uintptr
	Content []byte
	IsFile  bool // opBindRO onto a file mount point; opMask of a file (else a directory)
}

// hostFS is what the plan needs to know about the host; tests substitute a fake.
type hostFS interface {
	Lstat(name string) (os.FileInfo, error)
	Readlink(name string) (string, error)
}

type realFS struct{}

func (realFS) Lstat(name string) (os.FileInfo, error) { return os.Lstat(name) }
func (realFS) Readlink(name string) (string, error)   { return os.Readlink(name) }

// rootPlan is the sandbox's whole filesystem as data, in the order it is built.
func rootPlan(cfg *initConfig, host hostFS) []mountOp {
	plan := make([]mountOp, 0, 96) // ≈ 75 steps on a Debian host: one allocation
	plan = append(plan, mountOp{Kind: opTmpfs, Target: "/", Flags: unix.MS_NOSUID | unix.MS_NODEV,
		Data: rootData})
	bound := map[string]bool{}
	for _, d := range systemDirs {
		fi, err := host.Lstat(d)
		switch {
		case err != nil:
			continue
		case fi.Mode()&os.ModeSymlink != 0:
			if link, err := host.Readlink(d); err == nil {
				plan = append(plan, mountOp{Kind: opSymlink, Target: d, Link: link})
			}
		case fi.IsDir():
			plan = append(plan, mountOp{Kind: opBindRO, Source: d, Target: d})
			bound[d] = true
		}
	}
	// Interpreter prefixes outside the system dirs (e.g. /opt/python3.12).
	for _, m := range cfg.Mounts {
		m = filepath.Clean(m)
		if !filepath.IsAbs(m) || m == "/" || coveredBy(m, bound) {
			continue
		}
		fi, err := host.Lstat(m)
		if err != nil || !fi.IsDir() {
			continue
		}
		plan = append(plan, mountOp{Kind: opBindRO, Source: m, Target: m})
		bound[m] = true
	}
	// The environment, at its fixed path whatever its host path; read-only like the
	// system dirs, so every run sees it as the operator built it.
	if env := filepath.Clean(cfg.Environment); cfg.Environment != "" && filepath.IsAbs(env) && env != "/" {
		plan = append(plan, mountOp{Kind: opBindRO, Source: env, Target: sandbox.EnvironmentDir})
	}

	plan = append(plan, mountOp{Kind: opDir, Target: "/etc"})
	for _, f := range etcCopies {
		src := "/etc/" + f
		if fi, err := host.Lstat(src); err == nil && fi.Mode().IsRegular() {
			plan = append(plan, mountOp{Kind: opCopy, Source: src, Target: src})
		}
	}
	if link, err := host.Readlink("/etc/localtime"); err == nil {
		plan = append(plan, mountOp{Kind: opSymlink, Target: "/etc/localtime", Link: link})
	}
	for _, d := range etcBinds {
		src := "/etc/" + d
		if fi, err := host.Lstat(src); err == nil && fi.IsDir() {
			plan = append(plan, mountOp{Kind: opBindRO, Source: src, Target: src})
		}
	}
	plan = append(plan, etcFiles...)
	if cfg.Network == "host" {
		plan = append(plan, mountOp{Kind: opCopy, Source: "/etc/resolv.conf", Target: "/etc/resolv.conf"})
	} else {
		plan = append(plan, mountOp{Kind: opCopy, Target: "/etc/resolv.conf", Content: nil})
	}

	// /dev first: its scratch directories' paths lie under /proc, which covers them.
	plan = append(plan, devSteps...)
	const nosuidNodev = unix.MS_NOSUID | unix.MS_NODEV
	if cfg.NoProc {
		// A container that masks paths of its own /proc keeps the kernel from mounting a
		// fresh one in a user namespace ("too revealing"), and its own /proc shows the
		// container's processes: the sandbox gets an empty /proc instead (probe: proc).
		plan = append(plan, mountOp{Kind: opTmpfs, Target: "/proc", Flags: nosuidNodev | unix.MS_NOEXEC,
			Data: "mode=0555,size=4k,nr_inodes=1"})
	} else {
		plan = append(plan, procSteps...)
	}
	plan = append(plan,
		mountOp{Kind: opTmpfs, Target: "/workspace", Flags: nosuidNodev,
			Data: fmt.Sprintf("mode=0755,size=%d,nr_inodes=%d,uid=%d,gid=%d",
				cfg.Limits.Workspace, wsInodes, sandboxUID, sandboxGID)},
	)
	if cfg.faultWorkspaceMount {
		plan[len(plan)-1].Data = "size=not-a-size" // the kernel refuses it, as it would a real failure
	}
	for i := range plan {
		if cfg.faultMaskSource && plan[i].Kind == opMask {
			plan[i].Source = "/nonexistent/airlock-null"
		}
	}
	return plan
}

// The plan's steps that depend on neither the host nor the call, made once.
var (
	rootData = fmt.Sprintf("mode=0755,size=%d,nr_inodes=%d", rootSize+tmpSize+shmSize, rootInodes+tmpInodes+shmInodes)
	// etcFiles are the sandbox's own /etc files, written by the init.
	etcFiles = []mountOp{
		{Kind: opCopy, Target: "/etc/passwd", Content: []byte(passwd)},
		{Kind: opCopy, Target: "/etc/group", Content: []byte(group)},
		{Kind: opCopy, Target: "/etc/hosts", Content: []byte(hosts)},
		{Kind: opCopy, Target: "/etc/hostname", Content: []byte(hostname + "\n")},
	}
	// procSteps are a fresh /proc with its masks.
	procSteps = func() []mountOp {
		steps := []mountOp{{Kind: opProc, Target: "/proc"}}
		for _, p := range procMasks {
			steps = append(steps, mountOp{Kind: opMask, Source: "/dev/null", Target: "/proc/" + p, IsFile: !procMaskDirs[p]})
		}
		return steps
	}()
	// devSteps are the minimal /dev, /dev/shm and /tmp. /dev is a directory of the root
	// (read-only with it), /tmp and /dev/shm are directories of the root's superblock:
	// one tmpfs per run instead of four, each of which cost ~35 µs to mount and as much
	// to tear down. Their own paths in the root lie under /proc, which the next steps
	// mount over, so a bind is the only way to them; a bind reaches nothing outside its
	// own directory, and link and rename across mounts fail (EXDEV).
	devSteps = func() []mountOp {
		const nosuidNodev = unix.MS_NOSUID | unix.MS_NODEV
		steps := []mountOp{{Kind: opDir, Target: "/dev"}}
		for _, n := range devNodes {
			steps = append(steps, mountOp{Kind: opBindDev, Source: "/dev/" + n, Target: "/dev/" + n, IsFile: true})
		}
		return append(steps,
			mountOp{Kind: opSymlink, Target: "/dev/fd", Link: "/proc/self/fd"},
			mountOp{Kind: opSymlink, Target: "/dev/stdin", Link: "/proc/self/fd/0"},
			mountOp{Kind: opSymlink, Target: "/dev/stdout", Link: "/proc/self/fd/1"},
			mountOp{Kind: opSymlink, Target: "/dev/stderr", Link: "/proc/self/fd/2"},
			mountOp{Kind: opScratch, Source: "/proc/shm", Target: "/dev/shm", Flags: nosuidNodev | unix.MS_NOEXEC},
			mountOp{Kind: opScratch, Source: "/proc/tmp", Target: "/tmp", Flags: nosuidNodev},
		)
	}()
)

func coveredBy(p string, bound map[string]bool) bool {
	for b := range bound {
		if p == b || strings.HasPrefix(p, b+"/") {
			return true
		}
	}
	return false
}

const hostname = "sandbox"

const passwd = `root:x:0:0:root:/root:/usr/sbin/nologin
sandbox:x:1000:1000:sandbox:/workspace:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
`

const group = `root:x:0:
sandbox:x:1000:
nogroup:x:65534:
`

const hosts = `127.0.0.1	localhost sandbox
::1	localhost ip6-localhost ip6-loopback
`
