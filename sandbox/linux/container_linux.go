package linux

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Containers take pieces of the namespace tier away (docs/containers.md):
//
//	piece                 what takes it                            what airlock does
//	a fresh /proc         masked paths of the container's /proc    empty /proc (adaptations)
//	sethostname           podman's seccomp profile (no SYS_ADMIN)  keeps the inherited name
//	clone3, user ns       Docker's seccomp profile                 refuses: settings per engine
//	kill-process action   gVisor                                   kills the thread (seccomp)
//	setgroups             a user namespace with one id mapped      refuses: /etc/subuid
//	a /usr bind           a file bound under /usr (locked mounts)  binds the tree (root_linux.c)
//
// Each substitute is found by the startup self-test, logged, and reported by probe.

// adaptations are the substitutes the self-test found necessary on this host.
type adaptations struct {
	noProc       bool // the sandbox's /proc is an empty tmpfs
	keepHostname bool // the UTS namespace keeps the name it inherited
}

// after returns the adaptations that get past the self-test's failure err, and what
// changed; ok is false when no substitute applies (or it is already in use), and the
// failure stands. A substitute is chosen only for the exact refusal a container gives:
// EPERM or EACCES at that stage.
func (a adaptations) after(err error) (next adaptations, what string, ok bool) {
	var se *SetupError
	if !errors.As(err, &se) || (se.Errno != syscall.EPERM && se.Errno != syscall.EACCES) {
		return a, "", false
	}
	switch {
	case se.Stage == "mount /proc" && !a.noProc:
		a.noProc = true
		return a, "the sandbox gets an empty /proc: this container masks paths of its own, so the kernel refuses a fresh one in a user namespace", true
	case se.Stage == "sethostname" && !a.keepHostname:
		a.keepHostname = true
		return a, "the sandbox keeps the container's hostname: the container's seccomp profile refuses sethostname", true
	}
	return a, "", false
}

// container names the container engine or runtime airlock runs under, for hints ("" on a
// plain host).
func container() string {
	var is []string
	if _, err := os.Stat("/run/.containerenv"); err == nil {
		is = append(is, "podman")
	} else if _, err := os.Stat("/.dockerenv"); err == nil {
		is = append(is, "docker")
	}
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		is = append(is, "kubernetes")
	}
	if gvisor() {
		is = append(is, "gvisor")
	}
	return strings.Join(is, "+")
}

// gvisor reports whether the kernel is gVisor's Sentry, which presents itself as Linux
// 4.4.0 built on one fixed date.
func gvisor() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	return strings.Contains(unix.ByteSliceToString(u.Version[:]), "Sun Jan 10 15:06:54 PST 2016")
}

// userNSSettings are the settings that let a container create user namespaces, per
// engine: what a refusal names.
const userNSSettings = "docker: run with --security-opt seccomp=unconfined --security-opt apparmor=unconfined; " +
	"podman: its default profile allows it (or --security-opt seccomp=unconfined); " +
	"kubernetes: securityContext seccompProfile {type: Unconfined} and appArmorProfile {type: Unconfined} " +
	"(docs/containers.md)"

// singleIDFix gives a user namespace that maps a single id (rootless podman without
// subordinate ids, unshare -r) the ids sandboxes need.
const singleIDFix = "give the user a range in /etc/subuid and /etc/subgid " +
	"(usermod --add-subuids 100000-165535 --add-subgids 100000-165535 USER) and install newuidmap (apt-get install uidmap), " +
	"then restart the container engine (podman system migrate)"

// unmaskSettings let a container mount a fresh /proc for its sandboxes.
const unmaskSettings = "podman: --security-opt unmask=/proc/*; docker: --security-opt systempaths=unconfined; " +
	"kubernetes: securityContext.procMount: Unmasked with hostUsers: false (docs/containers.md)"

// clone3Error explains ENOSYS from clone3 on a kernel that has it (5.3+): a seccomp
// profile answered, as Docker's default does, and that profile also refuses user
// namespaces to a container without CAP_SYS_ADMIN.
func clone3Error() string {
	release := kernelRelease()
	if gvisor() {
		return "this gVisor kernel does not implement clone3, with which airlock starts every sandbox (CLONE_PIDFD, CLONE_INTO_CGROUP); " +
			"gVisor is a sandbox of its own: run airlock outside it, or use a runsc release that has clone3"
	}
	if !kernelAtLeast(release, 5, 3) {
		return fmt.Sprintf("airlock needs Linux 5.3 or later, for clone3 and pidfds; this is %s", release)
	}
	if seccompMode() == "0" {
		return fmt.Sprintf("clone3 is missing although Linux %s has it", release)
	}
	return fmt.Sprintf("Linux %s has clone3, so this process's seccomp profile refused it (Docker's default profile does, "+
		"and refuses user namespaces without CAP_SYS_ADMIN as well); %s", release, userNSSettings)
}

func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// kernelAtLeast compares a release such as "6.18.0-1-amd64" with major.minor.
func kernelAtLeast(release string, major, minor int) bool {
	var ma, mi int
	if n, _ := fmt.Sscanf(release, "%d.%d", &ma, &mi); n < 2 {
		return true // unknown: do not blame the kernel
	}
	return ma > major || (ma == major && mi >= minor)
}

// boundingHas reports whether capability c is in this process's bounding set, the most
// any program it runs (a setuid one included) can have.
func boundingHas(c int) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			set, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err != nil || set&(1<<uint(c)) != 0
		}
	}
	return true
}

// seccompMode is the Seccomp field of /proc/self/status: "0" none, "2" a filter.
func seccompMode() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// cgroupFix is how this server can get cgroups: not "run as root" for a root server, which a
// container's read-only cgroup file system stops.
func cgroupFix(root bool, container string) string {
	switch {
	case container != "" && root:
		return "the container's cgroup file system is read-only: give it a writable cgroup (podman or docker --privileged; a cgroup v2 host: a delegated, writable cgroup for the container)"
	case container != "":
		return "run the container's airlock as root with a writable cgroup (podman or docker --privileged), or under a delegated cgroup v2 subtree"
	case root:
		return "mount the cgroup v1 memory and pids controllers, or a cgroup v2 hierarchy with them enabled"
	}
	return "run as root (cgroup v1), or under a delegated cgroup v2 subtree: systemd-run --user --scope -p Delegate=yes airlock serve"
}

// stageHint is the fix for a setup stage's failure that has one cause worth naming.
func stageHint(err error) string {
	var se *SetupError
	if !errors.As(err, &se) {
		return ""
	}
	switch {
	case se.Stage == "drop supplementary groups" && se.Errno == syscall.EPERM:
		// Rootless podman (or unshare -r) with one id mapped writes "deny" to setgroups.
		return "this user namespace maps a single uid, so its groups cannot be dropped; " + singleIDFix
	case se.Stage == "write the id maps" && strings.Contains(se.Msg, "newuidmap") && !boundingHas(unix.CAP_SYS_ADMIN):
		// The kernel asks CAP_SYS_ADMIN over the namespace of whoever writes a map for a
		// namespace another user owns, and newuidmap runs as root, not as that owner.
		return "newuidmap cannot map subordinate ids here: this container's capability bounding set lacks CAP_SYS_ADMIN, which the kernel requires of it; " +
			"podman or docker: --cap-add SYS_ADMIN; or remove the server user's ranges from /etc/subuid and /etc/subgid, and its sandboxes share its own uid (probe: host-uids)"
	case se.Stage == "mount /proc":
		return "a fresh /proc cannot be mounted under this container's masked one; " + unmaskSettings
	case se.Stage == "sethostname":
		return "this container's seccomp profile refuses sethostname"
	case strings.HasPrefix(se.Stage, "mount /") && strings.Contains(se.Msg, "mount_setattr"):
		return "a file or directory is mounted below " + strings.TrimPrefix(se.Stage, "mount ") + " and this kernel lacks mount_setattr (Linux 5.12); mount it elsewhere (e.g. /opt/airlock)"
	}
	return ""
}

// apparmorHint names the fix when AppArmor restricts unprivileged user namespaces (Ubuntu
// 23.10+): a profile that attaches to the binary actually being run.
func apparmorHint() string {
	exe, err := os.Executable()
	if err == nil {
		if p, err := filepath.EvalSymlinks(exe); err == nil {
			exe = p
		}
	} else {
		exe = "airlock"
	}
	if exe == "/usr/local/bin/airlock" {
		return "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10+) and no profile grants them to " + exe +
			"; fix: sudo make install (installs examples/apparmor/airlock and loads it), or sudo apparmor_parser -r examples/apparmor/airlock"
	}
	return "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10+), and examples/apparmor/airlock attaches to /usr/local/bin/airlock, not to " + exe +
		"; fix: sudo make install and run /usr/local/bin/airlock, or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
}
