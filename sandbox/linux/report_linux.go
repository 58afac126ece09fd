package linux

import (
	"context"
	"fmt"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/sandbox"
)

// Probe builds a complete sandbox now (without running a program) and reports each
// isolation layer it really put in place. A layer is Active only if this host just
// proved it; the required ones are what Run will not do without. With a stamp store
// (a one-shot command) the self-check New passed or reused stands for that proof.
func (s *Sandbox) Probe(ctx context.Context) (sandbox.Report, error) {
	rep := sandbox.Report{Platform: "linux", Backend: "linux-namespaces", Isolation: s.isolation()}
	var rules int
	var err error
	if s.opts.Stamps != nil && s.checked != nil {
		rules = s.checked.Rules
	} else {
		rules, err = s.selfTest(ctx, nil)
		// A host uid found busy is another server's (in another container, sharing
		// the host's uids but not its lock): the check is made again with another, as
		// New does.
		for busy := 1; uidBusy(err) && busy < busyTries; busy++ {
			rules, err = s.selfTest(ctx, nil)
		}
	}
	ok := err == nil
	fail := ""
	if err != nil {
		fail = err.Error()
	}
	if s.ll != nil {
		rep.Backend = "linux-landlock"
		rep.Layers = s.landlockLayers(ok, fail, rules)
		return rep, nil
	}
	layer := func(name string, required bool, detail, fix string) {
		l := sandbox.Layer{Name: name, Active: ok, Required: required, Detail: detail}
		if !ok {
			l.Detail = fail
			l.Fix = fix
		}
		rep.Layers = append(rep.Layers, l)
	}
	userFix := "allow user namespaces: sysctl -w user.max_user_namespaces=15000; on Ubuntu 23.10+ install examples/apparmor/airlock"
	layer("user-namespace", true, fmt.Sprintf("uid/gid %d inside, mapped to one unprivileged host id (%s scheme, see host-uids)", sandboxUID, s.ids.scheme), userFix)
	// Optional: without it the sandboxes still hold against the host, but concurrent
	// runs share the per-user kernel budgets (uids_linux.go).
	uids := sandbox.Layer{Name: "host-uids", Active: ok && s.ids.isolated(), Detail: s.ids.describe()}
	if !s.ids.isolated() {
		uids.Fix = s.ids.fix()
	}
	rep.Layers = append(rep.Layers, uids)
	layer("pid-namespace", true, "the program's tree is killed with the sandbox's init", userFix)
	layer("mount-namespace", true, "tmpfs root, read-only binds of "+strings.Join(systemDirs, " ")+", pivot_root, old root detached", userFix)
	layer("network-namespace", true, "own namespace without interfaces unless the operator enables host network (allowlist: loopback and the egress bridge only)", userFix)
	layer("ipc-namespace", true, "", userFix)
	if s.adapt.keepHostname {
		layer("uts-namespace", true, "own namespace; the hostname stays the container's: its seccomp profile refuses sethostname", userFix)
	} else {
		layer("uts-namespace", true, "hostname "+hostname, userFix)
	}
	layer("cgroup-namespace", true, "", userFix)
	layer("seccomp", true, fmt.Sprintf("filter mode, allowlist modelled on Docker's default profile, %d rules, default ENOSYS, %s", rules, s.filters[sandbox.NetworkNone].badArch),
		"install libseccomp (apt-get install libseccomp2) and use a kernel with CONFIG_SECCOMP_FILTER")
	layer("no-new-privs", true, "set before the filter; setuid binaries and file capabilities are inert", "")
	layer("capabilities", true, "bounding and ambient sets emptied; the program runs with no capabilities", "")
	ro := "root (with /dev) and /proc remounted read-only; writable: /workspace, /tmp, /dev/shm (tmpfs, size-capped, nosuid, nodev)"
	// Landlock would add nothing: the sandbox's root holds only read-only system dirs
	// and its own tmpfs. Say whether it exists so a reader need not wonder.
	if abi := landlockABI(); abi > 0 {
		ro += fmt.Sprintf("; Landlock ABI %d available, not needed", abi)
	}
	layer("readonly-root", true, ro, "")
	// /proc is optional: programs run without it, and an empty one leaks nothing.
	proc := sandbox.Layer{Name: "proc", Active: ok && !s.adapt.noProc}
	switch {
	case !ok:
		proc.Detail = fail
	case s.adapt.noProc:
		proc.Detail = "no /proc in the sandbox (an empty directory): this container masks paths of its own /proc, so the kernel refuses a fresh one in a user namespace; python runs, node's os.cpus() is empty"
		proc.Fix = unmaskSettings
	default:
		proc.Detail = "the sandbox's own proc (its pid namespace only), host fingerprints masked: " + strings.Join(procMasks, " ")
	}
	rep.Layers = append(rep.Layers, proc)
	layer("rlimits", true, fmt.Sprintf("cpu, fsize, nofile, nproc, core=0, memlock, msgqueue=0, sigpending=%d set on the program before its first instruction; as when no memory cgroup", sigPendingLimit), "")

	cg := sandbox.Layer{Name: "cgroups", Required: s.opts.Cgroups == "require"}
	switch s.cg.version {
	case 0:
		cg.Detail = s.cg.reason
		cg.Fix = cgroupFix(s.root, container()) + "; until then memory is bounded by RLIMIT_AS and processes by RLIMIT_NPROC"
		if s.opts.Cgroups == "off" {
			// The host's cgroups may be fine: the operator turned them off, and the fix
			// for the host's would send them after a cause that is not there.
			cg.Fix = `set sandbox.cgroups = "auto" (or "require"); until then memory is bounded by RLIMIT_AS and processes by RLIMIT_NPROC`
		}
	case 1:
		cg.Active = ok
		cg.Detail = "cgroup v1, controllers " + strings.Join(s.cg.ctrls, ",") + ": memory (no swap), pids, cpu quota 1 CPU, peak memory and OOM kills" + v1CPUTime(s.cg.acct)
	case 2:
		cg.Active = ok
		cg.Detail = "cgroup v2 at " + s.cg.v2 + ", controllers " + strings.Join(s.cg.ctrls, ",") + ": memory (swap 0, oom.group), pids, cpu quota 1 CPU, the run's CPU time"
	}
	rep.Layers = append(rep.Layers, cg)
	mem := sandbox.Layer{Name: "memory-limit", Active: ok, Required: true}
	if s.cg.version > 0 {
		mem.Detail = "enforced by the memory cgroup"
	} else {
		mem.Detail = "enforced by RLIMIT_AS (address space, weaker than a cgroup)"
	}
	rep.Layers = append(rep.Layers, mem)

	return rep, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// landlockABI asks the kernel for its Landlock ABI version (0: none).
func landlockABI() int {
	const createRulesetVersion = 1
	r, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(nil)), 0, createRulesetVersion)
	if errno != 0 {
		return 0
	}
	return int(r)
}

// v1CPUTime is what the cgroup v1 layer's detail says of the run's CPU time: counted
// by cpuacct, or, without it, only per process.
func v1CPUTime(acct string) string {
	if acct != "" {
		return ", the run's CPU time (cpuacct)"
	}
	return "; no cpuacct controller: the CPU-time limit holds per process, and the CPU time reported misses children reaped unwaited-for"
}
