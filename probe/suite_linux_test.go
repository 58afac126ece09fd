package probe

import (
	"context"
	"net"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/internal/sandboxtest"
	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/runner"
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/sandbox/host"
	"github.com/airlock-mcp/airlock/sandbox/linux"
)

// The test binary is its own sandbox spawner and init: re-executed with the init's
// argv[0], its C constructor (sandbox/linux/zygote_linux.c) runs them before the Go runtime
// starts, so the tests never run there. sandbox.Init dispatches the roles other backends
// register.
func TestMain(m *testing.M) {
	if sandbox.Init() {
		return
	}
	os.Exit(m.Run())
}

var (
	sbOnce sync.Once
	sbInst sandbox.Sandbox
	sbErr  error
)

// realSandbox is one backend for the whole test process, as in the server. It skips
// loudly only when the kernel cannot build a sandbox, and fails instead under
// AIRLOCK_REQUIRE_SANDBOX=1.
func realSandbox(t *testing.T) sandbox.Sandbox {
	t.Helper()
	sbOnce.Do(func() { sbInst, sbErr = host.New(sandbox.Options{}) })
	sandboxtest.Require(t, sbErr)
	return sbInst
}

// newRunner is a runner as the server builds it: the real language registry, the
// default bounds, the strict import preset (which the suite must set aside) and a code
// cap smaller than the probe programs (which the suite must raise).
func newRunner(t *testing.T, sb sandbox.Sandbox, enabled ...string) *runner.Runner {
	t.Helper()
	if len(enabled) == 0 {
		enabled = []string{"python"}
	}
	reg, err := policy.Detect(enabled)
	if err != nil {
		t.Fatalf("detect languages: %v", err)
	}
	return &runner.Runner{
		Sandbox: sb, Languages: reg, Bounds: policy.DefaultBounds(), Imports: policy.StrictImports(),
		Network: sandbox.NetworkNone, MaxCodeBytes: 4 << 10, MaxStdinBytes: 1 << 20,
		Limiter: runner.NewLimiter(4, 64, time.Minute),
	}
}

func run(t *testing.T, s *Suite, f Filter) Report {
	t.Helper()
	rep, err := s.Run(context.Background(), f)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return rep
}

// TestRealSandboxPassesEveryProbe: against the real sandbox every probe is blocked.
func TestRealSandboxPassesEveryProbe(t *testing.T) {
	s := NewSuite(newRunner(t, realSandbox(t)))
	rep := run(t, s, Filter{})
	if len(rep.Probes) != len(catalogue) {
		t.Fatalf("ran %d probes, the catalogue has %d", len(rep.Probes), len(catalogue))
	}
	perCat := map[string]int64{}
	for _, r := range rep.Probes {
		perCat[r.Category] += r.DurationMs
		t.Logf("%-24s %-14s %5d ms  %s", r.Name, r.Status, r.DurationMs, r.Detail)
		want := Passed
		if !slices.Contains(syscallArches, s.env.goarch) && r.Category == "kernel" && r.Name != "seccomp-mode" {
			want = NotApplicable
		}
		if r.Status != want {
			t.Errorf("%s: %s, want %s: %s", r.Name, r.Status, want, r.Detail)
		}
	}
	t.Logf("whole run %d ms (%d probes, %d at a time); summed probe time per category: %v", rep.DurationMs, len(rep.Probes), parallel, perCat)
	if rep.Verdict == Unsafe {
		t.Errorf("verdict %s, fixes %q", rep.Verdict, rep.Fixes)
	}
	if rep.Platform != "linux" || len(rep.Layers) == 0 {
		t.Errorf("report lacks the sandbox's layers: %+v", rep)
	}
	if !slices.ContainsFunc(rep.Notes, func(n string) bool { return contains(n, "import guard") }) {
		t.Errorf("notes %q do not say the import guard was set aside", rep.Notes)
	}
	if rep.DurationMs > 10_000 && !raceEnabled {
		t.Errorf("the whole catalogue took %d ms; it must take a few seconds at most", rep.DurationMs)
	}
}

// TestCategoryDurations measures each category run on its own.
func TestCategoryDurations(t *testing.T) {
	s := NewSuite(newRunner(t, realSandbox(t)))
	for _, c := range Categories() {
		rep := run(t, s, Filter{Categories: []string{c}})
		t.Logf("category %-10s %2d probes %5d ms, verdict-relevant totals %+v", c, len(rep.Probes), rep.DurationMs, rep.Totals)
		if rep.Totals.Failed > 0 || rep.Totals.Errored > 0 {
			t.Errorf("category %s: %+v", c, rep.Totals)
		}
	}
}

func TestQuick(t *testing.T) {
	s := NewSuite(newRunner(t, realSandbox(t)))
	rep, err := s.Quick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("quick: %d probes in %d ms, totals %+v", len(rep.Probes), rep.DurationMs, rep.Totals)
	if len(rep.Probes) != len(QuickFilter.Probes) || rep.Totals.Passed != len(rep.Probes) {
		t.Errorf("quick: %+v", rep.Probes)
	}
	if rep.DurationMs > 1500 && !raceEnabled {
		t.Errorf("quick took %d ms; it runs at every server start", rep.DurationMs)
	}
}

// TestProbeLanguageNotEnabled: with python not enabled for run_code the probes still run
// it, and the report says so.
func TestProbeLanguageNotEnabled(t *testing.T) {
	s := NewSuite(newRunner(t, realSandbox(t), "sh"))
	rep := run(t, s, Filter{Probes: []string{"read-shadow"}})
	if rep.Probes[0].Status != Passed {
		t.Errorf("read-shadow: %+v", rep.Probes[0])
	}
	if !slices.ContainsFunc(rep.Notes, func(n string) bool { return contains(n, "python is not enabled") }) {
		t.Errorf("notes %q do not say the probe language differs", rep.Notes)
	}
}

// mustFail lists, per probe, why it cannot fail against the unsandboxed double here, or ""
// when it must. Each exception is covered by another weakening below.
func mustFail(t *testing.T) map[string]string {
	root := os.Geteuid() == 0
	out := map[string]string{}
	for _, p := range catalogue {
		out[p.name] = ""
	}
	// The double honours the wall timeout, so a spin is stopped there as in the sandbox:
	// covered by TestNoWallTimeout.
	out["cpu-timeout"] = "the double kills at the wall timeout"
	// A root caller gains nothing from a setuid-root binary: covered by TestSetuidWithoutNNP.
	if root {
		out["setuid"] = "the test runs as root"
	}
	if !root {
		// Only root reads /etc/shadow, opens raw sockets, makes device nodes or reaches
		// kexec's argument checks; the root case is what the double demonstrates.
		for _, n := range []string{"read-shadow", "raw-socket", "mknod", "kexec-load", "uid", "link-escape"} {
			out[n] = "the test does not run as root"
		}
	}
	if !dnsAnswers() {
		out["dns"] = "no resolver answers this host"
	}
	return out
}

// TestUnsandboxedFailsEveryProbe: run on the host without a sandbox, every probe that
// can be expressed there reports failed.
func TestUnsandboxedFailsEveryProbe(t *testing.T) {
	s := NewSuite(newRunner(t, unsandboxed{}))
	rep := run(t, s, Filter{})
	exempt := mustFail(t)
	for _, r := range rep.Probes {
		t.Logf("%-24s %-14s %5d ms  %s", r.Name, r.Status, r.DurationMs, r.Detail)
		if r.Name == "kexec-load" && strings.Contains(r.Detail, "ENOSYS") {
			// A kernel built without kexec answers ENOSYS on the host too: there is no
			// surface to reach, so nothing can fail. The weakened real sandbox below
			// covers the probe's mechanics through its siblings.
			t.Logf("  (not required to fail here: this kernel has no kexec_load)")
			continue
		}
		if why := exempt[r.Name]; why != "" {
			t.Logf("  (not required to fail here: %s)", why)
			continue
		}
		if r.Status != Failed {
			t.Errorf("%s: %s against the unsandboxed double, want failed: %s", r.Name, r.Status, r.Detail)
		}
		if r.Fix == "" {
			t.Errorf("%s failed without a fix", r.Name)
		}
	}
	if rep.Verdict != Unsafe {
		t.Errorf("verdict %s, want unsafe", rep.Verdict)
	}
	if len(rep.Fixes) == 0 {
		t.Errorf("no fixes for an unsafe report")
	}
}

// TestEnvLeakedAtStartIsCaught: the engine's processes that start programs (the zygote)
// start once, with the server, so a leak of the server's environment passes on what it
// held then, not a secret planted at the probe's time. env-secret must still fail: it
// judges the program's environment against the server's own, on the host.
func TestEnvLeakedAtStartIsCaught(t *testing.T) {
	t.Setenv("AIRLOCK_TEST_SERVER_SECRET", "s3cret-"+randHex(8))
	s := NewSuite(newRunner(t, unsandboxed{startEnv: os.Environ()}))
	r := run(t, s, Filter{Probes: []string{"env-secret"}}).Probes[0]
	if r.Status != Failed {
		t.Fatalf("env-secret: %s against a backend that passes on the server's start environment, want failed: %s", r.Status, r.Detail)
	}
	if !strings.Contains(r.Detail, "AIRLOCK_TEST_SERVER_SECRET") || strings.Contains(r.Detail, "s3cret-") {
		t.Errorf("the detail must name the leaked variables, never their values: %s", r.Detail)
	}
}

func TestNoWallTimeout(t *testing.T) {
	s := NewSuite(newRunner(t, unsandboxed{noWall: true}))
	for _, r := range run(t, s, Filter{Probes: []string{"cpu-timeout"}}).Probes {
		if r.Status != Failed {
			t.Errorf("%s: %s without a wall timeout, want failed: %s", r.Name, r.Status, r.Detail)
		}
	}
}

// TestSetuidWithoutNNP: a non-root caller without no_new_privs gains root through a
// setuid binary, and the probe says so.
func TestSetuidWithoutNNP(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start the double as another user; the unsandboxed test covers a non-root caller")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("lookup nobody: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	s := NewSuite(newRunner(t, unsandboxed{cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}))
	r := run(t, s, Filter{Probes: []string{"setuid"}}).Probes[0]
	if r.Status != Failed {
		t.Errorf("setuid as nobody without no_new_privs: %s, want failed: %s", r.Status, r.Detail)
	}
}

// TestWithoutSeccomp weakens the real sandbox by loading no seccomp filter: every
// kernel-surface probe must then fail.
func TestWithoutSeccomp(t *testing.T) {
	lx, ok := realSandbox(t).(*linux.Sandbox)
	if !ok {
		t.Fatalf("host.New returned %T, not the linux backend", realSandbox(t))
	}
	s := NewSuite(newRunner(t, lx.WithoutSeccomp()))
	rep := run(t, s, Filter{Categories: []string{"kernel"}, Probes: []string{"ptrace", "netlink-socket"}})
	for _, r := range rep.Probes {
		t.Logf("%-16s %-8s %s", r.Name, r.Status, r.Detail)
		// kexec_load checks CAP_SYS_BOOT before its arguments, so without capabilities it
		// answers EPERM with or without the filter; the unsandboxed root double shows the
		// probe failing.
		if r.Name == "kexec-load" {
			continue
		}
		if r.Status != Failed {
			t.Errorf("%s: %s without seccomp, want failed: %s", r.Name, r.Status, r.Detail)
		}
	}
}

func TestSelect(t *testing.T) {
	if _, err := Select(Filter{Probes: []string{"read-shadow", "nope"}}); err == nil || !contains(err.Error(), `"nope"`) || !contains(err.Error(), "fork-bomb") {
		t.Errorf("unknown probe: err = %v, want it named with the valid list", err)
	}
	if _, err := Select(Filter{Categories: []string{"kernal"}}); err == nil || !contains(err.Error(), "kernel") {
		t.Errorf("unknown category: err = %v", err)
	}
	got, err := Select(Filter{Categories: []string{"network"}, Probes: []string{"uid"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 9 || got[len(got)-1] != "uid" {
		t.Errorf("network + uid = %v", got)
	}
	if _, err := Select(QuickFilter); err != nil {
		t.Errorf("QuickFilter: %v", err)
	}
	all, _ := Select(Filter{})
	if len(all) != len(catalogue) {
		t.Errorf("empty filter selects %d of %d", len(all), len(catalogue))
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// dnsAnswers reports whether any of the host's resolvers answers a query, which is what
// the dns probe needs to be able to fail.
func dnsAnswers() bool {
	a := &attempt{args: map[string]any{}}
	dnsServers(a)
	q := []byte{0x42, 0x42, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0, 0, 1, 0, 1}
	for _, s := range a.args["servers"].([]string) {
		c, err := net.DialTimeout("udp", net.JoinHostPort(s, "53"), 300*time.Millisecond)
		if err != nil {
			continue
		}
		c.SetDeadline(time.Now().Add(300 * time.Millisecond))
		buf := make([]byte, 512)
		_, werr := c.Write(q)
		n, rerr := c.Read(buf)
		c.Close()
		if werr == nil && rerr == nil && n >= 2 {
			return true
		}
	}
	return false
}

// TestAllowlistNetworkProbes: under network "allowlist" every network probe still
// passes, and the egress-bridge probe finds the proxy on the bridge and nothing else.
func TestAllowlistNetworkProbes(t *testing.T) {
	r := newRunner(t, realSandbox(t))
	r.Network = sandbox.NetworkAllowlist
	r.Egress = &sandbox.Egress{Domains: []string{"pypi.org"}, Ports: []int{443, 80}, MaxBytes: 1 << 20, MaxConnections: 8}
	rep := run(t, NewSuite(r), Filter{Categories: []string{"network"}})
	for _, p := range rep.Probes {
		t.Logf("%-16s %-8s %s", p.Name, p.Status, p.Detail)
		if p.Status != Passed {
			t.Errorf("%s: %s: %s", p.Name, p.Status, p.Detail)
		}
		if p.Name == "egress-bridge" && !strings.Contains(p.Detail, "403") {
			t.Errorf("egress-bridge did not meet the proxy: %s", p.Detail)
		}
	}
}

// TestLandlockTierVerdicts runs the whole catalogue in the Landlock tier: every probe it
// covers passes, the ones it cannot cover are not_applicable with the reason, and the
// verdict is degraded, with the weaker layers listed.
func TestLandlockTierVerdicts(t *testing.T) {
	sb, err := host.New(sandbox.Options{Isolation: sandbox.IsolationLandlock})
	sandboxtest.Require(t, err)
	defer sb.(sandbox.Warmer).Close()
	rep := run(t, NewSuite(newRunner(t, sb)), Filter{})
	if rep.Isolation != sandbox.IsolationLandlock || rep.Backend != "linux-landlock" {
		t.Errorf("report says isolation %q, backend %q", rep.Isolation, rep.Backend)
	}
	// The workspace is size-capped where the server can mount a tmpfs (root).
	ws, _ := sandbox.Report{Layers: rep.Layers}.Layer("workspace-size")
	notCovered := map[string]bool{"host-pids": true, "disk-fill": !ws.Active}
	for _, r := range rep.Probes {
		switch {
		case notCovered[r.Name]:
			if r.Status != NotApplicable || !strings.HasPrefix(r.Detail, "the Landlock tier: ") {
				t.Errorf("%s: %s (%s), want not_applicable with the tier's reason", r.Name, r.Status, r.Detail)
			}
		case r.Status == NotApplicable:
			if strings.Contains(r.Detail, "Landlock") {
				t.Errorf("%s: not applicable for the tier, unexpectedly: %s", r.Name, r.Detail)
			}
		case r.Status != Passed:
			t.Errorf("%s: %s: %s", r.Name, r.Status, r.Detail)
		}
	}
	if rep.Verdict != Degraded {
		t.Errorf("verdict %s, want degraded", rep.Verdict)
	}
	for _, name := range []string{"pid-namespace", "mount-namespace", "uts-namespace", "ipc-namespace", "network-namespace", "private-tmp", "workspace-size"} {
		l, ok := sandbox.Report{Layers: rep.Layers}.Layer(name)
		if name == "workspace-size" && l.Active {
			if os.Geteuid() != 0 || l.Detail == "" {
				t.Errorf("workspace-size active: %+v, want it only for a root server, with how", l)
			}
			continue
		}
		if !ok || l.Active || l.Fix == "" || l.Detail == "" {
			t.Errorf("weaker layer %s: %+v, want listed inactive with what is weaker and a fix", name, l)
		}
	}
	for _, name := range []string{"landlock-fs", "landlock-net", "landlock-scope", "seccomp", "no-new-privs", "process-tree"} {
		if l, ok := (sandbox.Report{Layers: rep.Layers}).Layer(name); !ok || !l.Active || !l.Required {
			t.Errorf("layer %s: %+v, want active and required", name, l)
		}
	}
}

// TestDNSProbeHidesTheHostsResolvers: probe_sandbox's report goes to any client; the
// dns probe's detail names the host's resolvers by their place, not their addresses (the
// host's network, which the sandbox is there to hide).
func TestDNSProbeHidesTheHostsResolvers(t *testing.T) {
	a := &attempt{args: map[string]any{}}
	if err := dnsServers(a); err != nil {
		t.Fatal(err)
	}
	servers := a.args["servers"].([]string)
	if len(servers) <= 2 {
		t.Log("no nameserver in /etc/resolv.conf: only the public ones are tried")
	}
	r := run(t, NewSuite(newRunner(t, realSandbox(t))), Filter{Probes: []string{"dns"}}).Probes[0]
	if r.Status != Passed {
		t.Fatalf("dns: %s: %s", r.Status, r.Detail)
	}
	for _, s := range servers[:len(servers)-2] {
		if strings.Contains(r.Detail, s) {
			t.Errorf("the detail shows the host's resolver %s: %s", s, r.Detail)
		}
	}
	if len(servers) > 2 && !strings.Contains(r.Detail, "host resolver 1") {
		t.Errorf("the detail does not account for the host's resolvers: %s", r.Detail)
	}
}
