package probe

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

// probeDef is one escape attempt: a program run in a fresh sandbox, with optional host
// work before (setup), during (during) and after the run (judge). The verdict is the
// host's wherever the host can see the effect (files, listeners, survivors, credentials);
// the program's own word is used only for what exists only inside.
// syscallArches are the GOARCH values kernel.py has syscall numbers for.
var syscallArches = []string{"amd64", "arm64"}

type probeDef struct {
	name, category, program string
	timeout                 time.Duration
	limits                  sandbox.Limits // tighter limits that keep the probe fast
	// only lists the GOOS values the probe means something on; why says why not elsewhere.
	only []string
	why  string
	// landlock says why the probe does not apply in the Landlock tier (what it tests is
	// a namespace that tier does not have, listed as a weaker layer); empty: it applies.
	landlock string
	// landlockUnless is a layer whose being active there makes the probe apply after all.
	landlockUnless string
	// sysnr marks probes that call syscalls by number: kernel.py knows x86_64's and
	// aarch64's (syscallArches).
	sysnr bool
	setup func(a *attempt) error
	// during starts host work for the length of the run; the returned func stops it.
	during func(ctx context.Context, a *attempt) func()
	judge  func(a *attempt, res sandbox.Result, rep *programReport) (Status, string)
	fix    string
}

func (p *probeDef) skip(h hostEnv) string {
	if len(p.only) > 0 && !slices.Contains(p.only, h.goos) {
		return p.why
	}
	if p.sysnr && !slices.Contains(syscallArches, h.goarch) {
		return "calls syscalls by number; kernel.py has no table for " + h.goarch
	}
	return ""
}

// attempt is the host-side state of one probe run.
type attempt struct {
	args     map[string]any
	limits   sandbox.Limits // what the runner gives this run
	network  sandbox.Network
	env      hostEnv
	cleanups []func()

	mu       sync.Mutex
	marker   string
	secret   string
	hits     []string // connections the host's listeners accepted
	files    map[string]string
	hostCred string // Uid: line of the sandboxed process, read on the host
	// sandboxEnv are the NAME=value pairs the sandbox gives every program itself (the
	// language's and the egress proxy's), which may equal the server's by chance.
	sandboxEnv map[string]bool
}

func (a *attempt) onCleanup(f func()) { a.cleanups = append(a.cleanups, f) }

func (a *attempt) cleanup() {
	for i := len(a.cleanups) - 1; i >= 0; i-- {
		a.cleanups[i]()
	}
}

func (a *attempt) hit(what string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hits = append(a.hits, what)
}

func (a *attempt) hitList() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.hits)
}

func (a *attempt) argJSON() (string, error) {
	b, err := json.Marshal(a.args)
	if err != nil {
		return "", fmt.Errorf("probe arguments: %w", err)
	}
	return string(b), nil
}

// newMarker is unique to one run and carried on the program's command line or set as
// its process name (15 bytes at most), so the host can find that run's processes in its
// own /proc.
func (a *attempt) newMarker() string {
	a.marker = "ap-" + randHex(6)
	a.args["marker"] = a.marker
	return a.marker
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}

// programReport is the line a probe program prints.
type programReport struct {
	Blocked bool   `json:"blocked"`
	NA      string `json:"na"`
	Detail  string `json:"detail"`
	Error   bool   `json:"error"`
	Found   []struct {
		Path string `json:"path"`
		Data string `json:"data"`
	} `json:"found"`
	Started bool `json:"started"`
}

const reportPrefix = "AIRLOCK-PROBE "

func parseReport(res sandbox.Result) *programReport {
	out := res.Stdout.Bytes()
	i := bytes.LastIndex(out, []byte("\n"+reportPrefix))
	if i < 0 {
		return nil
	}
	line, _, _ := bytes.Cut(out[i+1+len(reportPrefix):], []byte("\n"))
	var rep programReport
	if json.Unmarshal(line, &rep) != nil {
		return nil
	}
	return &rep
}

// byProgram is the default verdict: the program's own finding.
func byProgram(_ *attempt, res sandbox.Result, rep *programReport) (Status, string) {
	switch {
	case rep == nil:
		return Errored, noReport(res)
	case rep.NA != "":
		return NotApplicable, rep.NA
	case rep.Error:
		return Errored, rep.Detail
	case rep.Blocked:
		return Passed, rep.Detail
	}
	return Failed, rep.Detail
}

func noReport(res sandbox.Result) string {
	tail := strings.TrimSpace(string(res.Stderr.Bytes()))
	if len(tail) > 300 {
		tail = "…" + tail[len(tail)-300:]
	}
	d := fmt.Sprintf("probe program ended %s (exit %d%s) without a report", res.Status, res.ExitCode, signalText(res.Signal))
	if res.Detail != "" {
		d += ": " + res.Detail
	}
	if tail != "" {
		d += "; stderr: " + tail
	}
	return d
}

func signalText(s string) string {
	if s == "" {
		return ""
	}
	return ", " + s
}

const (
	fsFix      = "the sandbox shows host files: user and mount namespaces must work (see the user-namespace layer's fix; on Ubuntu 23.10+ install examples/apparmor/airlock), and a root server must map sandboxes to an unprivileged sandbox.host_user"
	pidFix     = "the pid namespace is not in effect: allow user namespaces (sysctl -w user.max_user_namespaces=15000; on Ubuntu 23.10+ install examples/apparmor/airlock)"
	egressFix  = "network = \"allowlist\" must leave the sandbox loopback only, with the egress proxy as its one way out: an airlock engine defect if the proxy did not answer or something else did; report it, and use network = \"none\" meanwhile"
	netFix     = "keep sandbox.network = none (host networking exposes every loopback service), and allow user namespaces so the sandbox gets its own network namespace"
	seccompFix = "the seccomp filter is not in effect: install libseccomp2, use a kernel with CONFIG_SECCOMP_FILTER, and inside a container allow nested filters (docker --security-opt seccomp=unconfined lets airlock load its own)"
	userFix    = "run airlock as an unprivileged user, or as root with sandbox.host_user set to an unprivileged account (default nobody), never as a user mapped to root"
	cgroupFix  = "let airlock use cgroups: run as root (cgroup v1/v2) or under a delegated cgroup v2 subtree (systemd-run --user --scope -p Delegate=yes airlock serve)"
	engineFix  = "the sandbox engine leaks server state into the program: this is an airlock defect; report it and do not serve until it is fixed"
	linuxOnly  = "checked through /proc on the host; there is no pid namespace or /proc on this platform"
)

var onLinux = []string{"linux"}

var catalogue = []probeDef{
	// filesystem
	{name: "read-shadow", category: "filesystem", program: "filesystem", judge: byProgram, fix: fsFix},
	{name: "read-host-secret", category: "filesystem", program: "filesystem", setup: hostSecret, judge: judgeSecret, fix: fsFix},
	{name: "write-outside-workspace", category: "filesystem", program: "filesystem", setup: hostTargets, judge: judgeWrites, fix: fsFix},
	{name: "mknod", category: "filesystem", program: "filesystem", judge: byProgram,
		fix: "device nodes must be refused: the program must run without CAP_MKNOD in a user namespace (see the capabilities layer)"},
	{name: "link-escape", category: "filesystem", program: "filesystem", judge: byProgram, fix: fsFix},
	{name: "setuid", category: "filesystem", program: "filesystem", judge: byProgram,
		fix: "no_new_privs must be set before exec so setuid bits are inert; " + userFix},

	// processes
	{name: "host-pids", category: "processes", program: "processes", only: onLinux, why: linuxOnly, setup: hostSleeper, judge: byProgram, fix: pidFix,
		landlock: "no pid namespace: host processes are listable (layer pid-namespace); their memory, environment and signals stay closed (Landlock ptrace rule, scoping, per-run uid)"},
	{name: "fork-bomb", category: "processes", program: "processes", limits: sandbox.Limits{Pids: 32},
		setup: func(a *attempt) error { a.args["pids"] = a.limits.Pids; return nil }, judge: byProgram, fix: cgroupFix},
	{name: "detached-survivor", category: "processes", program: "processes", timeout: time.Second, only: onLinux, why: linuxOnly,
		setup: func(a *attempt) error { a.newMarker(); a.args["sleep"] = 30; return nil }, judge: judgeSurvivors, fix: pidFix},
	{name: "ptrace", category: "processes", program: "processes", judge: byProgram, fix: seccompFix},

	// resources
	{name: "memory-bomb", category: "resources", program: "resources", limits: sandbox.Limits{Memory: 64 << 20},
		setup: func(a *attempt) error { a.args["memory"] = a.limits.Memory; return nil }, judge: judgeMemory, fix: cgroupFix},
	{name: "cpu-timeout", category: "resources", program: "resources", timeout: time.Second,
		setup: func(a *attempt) error { a.args["spin"] = 3 * a.limits.Wall.Seconds(); return nil }, judge: judgeTimeout,
		fix: "the wall-clock limit did not stop the program: " + pidFix},
	{name: "disk-fill", category: "resources", program: "resources", limits: sandbox.Limits{Workspace: 16 << 20},
		setup: func(a *attempt) error { a.args["workspace"] = a.limits.Workspace; return nil }, judge: byProgram,
		landlock:       "the workspace is a host directory, not a size-capped tmpfs (layer workspace-size): files are capped by RLIMIT_FSIZE only",
		landlockUnless: "workspace-size",
		fix:            "the workspace must be a size-capped tmpfs (mount namespace) with RLIMIT_FSIZE; " + fsFix},
	{name: "open-files", category: "resources", program: "resources", limits: sandbox.Limits{OpenFiles: 64},
		setup: func(a *attempt) error { a.args["open_files"] = a.limits.OpenFiles; return nil }, judge: byProgram,
		fix: "RLIMIT_NOFILE was not applied to the program: an airlock engine defect; report it"},
	{name: "output-flood", category: "resources", program: "resources", limits: sandbox.Limits{Output: 64 << 10},
		setup: func(a *attempt) error { a.args["bytes"] = 8 * a.limits.Output; return nil }, judge: judgeFlood,
		fix: "output must be captured into size-capped buffers: an airlock engine defect; report it"},

	// network
	{name: "tcp-loopback", category: "network", program: "network", setup: listenTCP("tcp4", "127.0.0.1:0"), judge: judgeListener, fix: netFix},
	{name: "udp-loopback", category: "network", program: "network", setup: listenUDP, judge: judgeListener, fix: netFix},
	{name: "dns", category: "network", program: "network", setup: dnsServers, judge: byProgram, fix: netFix},
	{name: "ipv6-loopback", category: "network", program: "network", setup: listenTCP("tcp6", "[::1]:0"), judge: judgeListener, fix: netFix},
	{name: "raw-socket", category: "network", program: "network", judge: byProgram, fix: netFix + "; " + seccompFix},
	{name: "netlink-socket", category: "network", program: "network", only: onLinux, why: "netlink exists only on linux", judge: byProgram, fix: seccompFix},
	{name: "abstract-unix", category: "network", program: "network", only: onLinux, why: "abstract unix sockets exist only on linux",
		setup: listenAbstract, judge: judgeListener, fix: netFix},
	// The bridge to the egress proxy is the only way out: under "allowlist" it answers as
	// the proxy and refuses what is not listed; under "none" nothing answers at all.
	{name: "egress-bridge", category: "network", program: "network", setup: bridgeArgs, judge: judgeListener, fix: egressFix},

	// kernel surface: seccomp, checked try-syscall style
	{name: "seccomp-mode", category: "kernel", program: "kernel", only: onLinux, why: "seccomp is linux's; the darwin backend confines with Seatbelt", judge: byProgram, fix: seccompFix},
	{name: "mount-syscall", category: "kernel", program: "kernel", only: onLinux, why: "probes linux syscalls", sysnr: true, judge: byProgram, fix: seccompFix},
	{name: "namespaces", category: "kernel", program: "kernel", only: onLinux, why: "probes linux syscalls", sysnr: true, judge: byProgram, fix: seccompFix},
	{name: "keyctl", category: "kernel", program: "kernel", only: onLinux, why: "probes linux syscalls", sysnr: true, judge: byProgram, fix: seccompFix},
	{name: "bpf", category: "kernel", program: "kernel", only: onLinux, why: "probes linux syscalls", sysnr: true, judge: byProgram, fix: seccompFix},
	{name: "perf-event-open", category: "kernel", program: "kernel", only: onLinux, why: "probes linux syscalls", sysnr: true, judge: byProgram, fix: seccompFix},
	{name: "userfaultfd", category: "kernel", program: "kernel", only: onLinux, why: "probes linux syscalls", sysnr: true, judge: byProgram, fix: seccompFix},
	{name: "io-uring", category: "kernel", program: "kernel", only: onLinux, why: "probes linux syscalls", sysnr: true, judge: byProgram, fix: seccompFix},
	{name: "kexec-load", category: "kernel", program: "kernel", only: onLinux, why: "probes linux syscalls", sysnr: true, judge: byProgram, fix: seccompFix},
	{name: "tiocsti", category: "kernel", program: "kernel", only: onLinux, why: "probes linux syscalls", sysnr: true, judge: byProgram, fix: seccompFix},
	{name: "inotify", category: "kernel", program: "kernel", only: onLinux, why: "probes linux syscalls", sysnr: true, judge: byProgram, fix: seccompFix},

	// identity and secrets
	{name: "uid", category: "identity", program: "identity", setup: func(a *attempt) error {
		a.newMarker()
		a.args["wait"] = a.env.goos == "linux"
		return nil
	}, during: watchCredentials, judge: judgeUID, fix: userFix},
	{name: "capabilities", category: "identity", program: "identity", only: onLinux, why: "capability sets are linux's", judge: byProgram, fix: userFix},
	{name: "no-new-privs", category: "identity", program: "identity", only: onLinux, why: "no_new_privs is linux's", judge: byProgram,
		fix: "no_new_privs must be set before exec: an airlock engine defect; report it"},
	{name: "env-secret", category: "identity", program: "identity", setup: envSecret, judge: judgeEnv, fix: engineFix},
	{name: "fd-leak", category: "identity", program: "identity", setup: leakFD, judge: byProgram, fix: engineFix},
}
