package linux

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// newRoot is where the init builds the sandbox's root before pivot_root. It is a tmpfs
// mounted over /tmp inside the sandbox's private mount namespace; the host's /tmp is
// neither changed nor visible afterwards.
const newRoot = "/tmp"

// systemDirs are the host directories interpreters need, bound read-only. On merged-/usr
// hosts most of them are symlinks into /usr and are recreated as the same symlinks.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcCopies are host /etc files copied into the sandbox's own /etc. Nothing else of /etc
// is visible: no shadow, no host passwd, no machine secrets.
var etcCopies = []string{"ld.so.cache", "nsswitch.conf", "protocols", "services"}

// etcBinds are host /etc directories bound read-only because programs resolve through
// them: Debian's alternatives (awk, editor, …) and public CA certificates.
var etcBinds = []string{"alternatives", "ssl", "ca-certificates"}

// devNodes are the host device nodes bound into the minimal /dev.
var devNodes = []string{"null", "zero", "full", "random", "urandom"}

// Sizes of the small tmpfs mounts besides the workspace.
const (
	rootSize   = 1 << 20  // the root skeleton: mount points, /etc files
	devSize    = 64 << 10 // /dev: nodes are bind mounts, only symlinks live here
	tmpSize    = 16 << 20 // /tmp
	shmSize    = 16 << 20 // /dev/shm, for POSIX semaphores (python multiprocessing)
	rootInodes = 4096
	wsInodes   = 65536
)

// faultWorkspaceMount makes the workspace tmpfs mount fail. Only this package's tests
// set it (in the re-executed test binary, before the init runs); nothing else can.
var faultWorkspaceMount bool

// mountKind says what one step of the root plan does.
type mountKind int

const (
	opDir     mountKind = iota // mkdir Target
	opSymlink                  // symlink Link -> Target
	opBindRO                   // bind Source read-only at Target (a dir or file mount point)
	opTmpfs                    // tmpfs at Target with Data options
	opProc                     // fresh proc at Target
	opCopy                     // copy host file Source to Target (or write Content)
	opBindDev                  // bind a host device node at Target, usable (not nodev, not read-only)
)

// mountOp is one step of the root plan. Targets are absolute paths inside the sandbox.
type mountOp struct {
	Kind    mountKind
	Source  string
	Target  string
	Link    string
	Data    string
	Flags   uintptr
	Content []byte
	IsFile  bool // opBindRO onto a file mount point
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
	var plan []mountOp
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
	plan = append(plan,
		mountOp{Kind: opCopy, Target: "/etc/passwd", Content: []byte(passwd)},
		mountOp{Kind: opCopy, Target: "/etc/group", Content: []byte(group)},
		mountOp{Kind: opCopy, Target: "/etc/hosts", Content: []byte(hosts)},
		mountOp{Kind: opCopy, Target: "/etc/hostname", Content: []byte(hostname + "\n")},
	)
	if cfg.Network == "host" {
		plan = append(plan, mountOp{Kind: opCopy, Source: "/etc/resolv.conf", Target: "/etc/resolv.conf"})
	} else {
		plan = append(plan, mountOp{Kind: opCopy, Target: "/etc/resolv.conf", Content: nil})
	}

	const nosuidNodev = unix.MS_NOSUID | unix.MS_NODEV
	plan = append(plan,
		mountOp{Kind: opProc, Target: "/proc"},
		mountOp{Kind: opTmpfs, Target: "/dev", Flags: nosuidNodev | unix.MS_NOEXEC,
			Data: "mode=0755,size=" + strconv.Itoa(devSize)},
	)
	for _, n := range devNodes {
		plan = append(plan, mountOp{Kind: opBindDev, Source: "/dev/" + n, Target: "/dev/" + n, IsFile: true})
	}
	plan = append(plan,
		mountOp{Kind: opSymlink, Target: "/dev/fd", Link: "/proc/self/fd"},
		mountOp{Kind: opSymlink, Target: "/dev/stdin", Link: "/proc/self/fd/0"},
		mountOp{Kind: opSymlink, Target: "/dev/stdout", Link: "/proc/self/fd/1"},
		mountOp{Kind: opSymlink, Target: "/dev/stderr", Link: "/proc/self/fd/2"},
		mountOp{Kind: opTmpfs, Target: "/dev/shm", Flags: nosuidNodev | unix.MS_NOEXEC,
			Data: fmt.Sprintf("mode=1777,size=%d,nr_inodes=1024", shmSize)},
		mountOp{Kind: opTmpfs, Target: "/tmp", Flags: nosuidNodev,
			Data: fmt.Sprintf("mode=1777,size=%d,nr_inodes=4096", tmpSize)},
		mountOp{Kind: opTmpfs, Target: "/workspace", Flags: nosuidNodev,
			Data: fmt.Sprintf("mode=0755,size=%d,nr_inodes=%d,uid=%d,gid=%d",
				workspaceSize(cfg.Limits.Workspace), wsInodes, sandboxUID, sandboxGID)},
	)
	return plan
}

func workspaceSize(n int64) int64 {
	if n <= 0 {
		return 64 << 20
	}
	return n
}

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

// buildRoot mounts a tmpfs at newRoot and applies the plan inside it. It runs in the
// init, in the sandbox's own mount namespace, before pivot_root.
func buildRoot(plan []mountOp) error {
	// Private, so nothing we mount propagates to the host and nothing the host mounts
	// later appears in the sandbox.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return stageError("mount: make / private", err)
	}
	data := fmt.Sprintf("mode=0755,size=%d,nr_inodes=%d", rootSize, rootInodes)
	if err := unix.Mount("airlock", newRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		return stageError("mount: root tmpfs", err)
	}
	for _, op := range plan {
		if err := applyOp(op); err != nil {
			return err
		}
	}
	return nil
}

func applyOp(op mountOp) error {
	dst := filepath.Join(newRoot, op.Target)
	stage := "mount " + op.Target
	switch op.Kind {
	case opDir:
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return stageError(stage, err)
		}
	case opSymlink:
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return stageError(stage, err)
		}
		if err := os.Symlink(op.Link, dst); err != nil {
			return stageError(stage, err)
		}
	case opCopy:
		content := op.Content
		if op.Source != "" {
			b, err := os.ReadFile(op.Source)
			if err != nil {
				if os.IsNotExist(err) {
					b = nil
				} else {
					return stageError(stage, err)
				}
			}
			content = b
		}
		if err := os.WriteFile(dst, content, 0o644); err != nil {
			return stageError(stage, err)
		}
	case opBindRO:
		if err := mountPoint(dst, op.IsFile); err != nil {
			return stageError(stage, err)
		}
		if err := bindReadOnly(op.Source, dst); err != nil {
			return stageError(stage, err)
		}
	case opBindDev:
		// A read-only or nodev mount would make the node unusable (writing to
		// /dev/null must work); nosuid and noexec cost nothing.
		if err := mountPoint(dst, true); err != nil {
			return stageError(stage, err)
		}
		if err := unix.Mount(op.Source, dst, "", unix.MS_BIND, ""); err != nil {
			return stageError(stage, err)
		}
		var st unix.Statfs_t
		if err := unix.Statfs(dst, &st); err != nil {
			return stageError(stage, err)
		}
		flags := uintptr(st.Flags)&lockedFlags | unix.MS_BIND | unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NOEXEC
		if err := unix.Mount("", dst, "", flags, ""); err != nil {
			return stageError(stage, err)
		}
	case opTmpfs:
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return stageError(stage, err)
		}
		data := op.Data
		if faultWorkspaceMount && op.Target == "/workspace" {
			data = "size=not-a-size" // the kernel refuses it, as it would a real failure
		}
		if err := unix.Mount("airlock", dst, "tmpfs", op.Flags, data); err != nil {
			return stageError(stage, err)
		}
	case opProc:
		if err := os.MkdirAll(dst, 0o555); err != nil {
			return stageError(stage, err)
		}
		const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
		if err := unix.Mount("proc", dst, "proc", flags, ""); err != nil {
			return stageError(stage, err)
		}
	}
	return nil
}

func mountPoint(dst string, isFile bool) error {
	if !isFile {
		return os.MkdirAll(dst, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// lockedFlags are the per-mount flags the kernel locks on mounts inherited from a more
// privileged user namespace: a remount that drops one of them fails with EPERM, so they
// are carried over from the source.
const lockedFlags = unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC |
	unix.MS_NOATIME | unix.MS_NODIRATIME | unix.MS_RELATIME

// bindReadOnly binds src at dst and remounts it read-only, nosuid and nodev. The bind is
// not recursive: submounts of src stay hidden.
func bindReadOnly(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dst, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", dst, err)
	}
	flags := uintptr(st.Flags)&lockedFlags | unix.MS_BIND | unix.MS_REMOUNT |
		unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV
	if err := unix.Mount("", dst, "", flags, ""); err != nil {
		return fmt.Errorf("remount %s read-only: %w", dst, err)
	}
	return nil
}

// pivot makes newRoot the root and detaches the host's root, so no path leads back.
func pivot() error {
	if err := unix.Chdir(newRoot); err != nil {
		return stageError("pivot_root: chdir", err)
	}
	// pivot_root(".", ".") stacks the old root on top of the new one; detaching "."
	// then removes the old root without needing a put_old directory.
	if err := unix.PivotRoot(".", "."); err != nil {
		return stageError("pivot_root", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return stageError("pivot_root: detach old root", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return stageError("pivot_root: chdir /", err)
	}
	return nil
}

// sealRoot makes the root skeleton, /dev and /proc read-only once they are complete.
func sealRoot() error {
	for _, p := range []string{"/", "/dev", "/proc"} {
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err != nil {
			return stageError("remount "+p+" read-only", err)
		}
		flags := uintptr(st.Flags)&lockedFlags | unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY
		if err := unix.Mount("", p, "", flags, ""); err != nil {
			return stageError("remount "+p+" read-only", err)
		}
	}
	return nil
}
