package linux

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock-mcp/airlock/internal/sandboxtest"
	"github.com/airlock-mcp/airlock/sandbox"
)

func TestAdaptationsAfter(t *testing.T) {
	setup := func(stage string, errno syscall.Errno) error {
		return fmt.Errorf("sandbox unavailable: %w", &SetupError{Stage: stage, Errno: errno, Msg: "x"})
	}
	cases := []struct {
		name string
		from adaptations
		err  error
		want adaptations
		ok   bool
	}{
		{"masked proc", adaptations{}, setup("mount /proc", syscall.EPERM), adaptations{noProc: true}, true},
		{"masked proc, EACCES", adaptations{}, setup("mount /proc", syscall.EACCES), adaptations{noProc: true}, true},
		{"proc already substituted", adaptations{noProc: true}, setup("mount /proc", syscall.EPERM), adaptations{noProc: true}, false},
		{"proc fails otherwise", adaptations{}, setup("mount /proc", syscall.ENOMEM), adaptations{}, false},
		{"hostname refused", adaptations{noProc: true}, setup("sethostname", syscall.EPERM), adaptations{noProc: true, keepHostname: true}, true},
		{"hostname twice", adaptations{keepHostname: true}, setup("sethostname", syscall.EPERM), adaptations{keepHostname: true}, false},
		{"other stage", adaptations{}, setup("mount /usr", syscall.EPERM), adaptations{}, false},
		{"seccomp never", adaptations{}, setup("seccomp", syscall.EPERM), adaptations{}, false},
		{"not a setup error", adaptations{}, errors.New("clone: operation not permitted"), adaptations{}, false},
	}
	for _, c := range cases {
		got, what, ok := c.from.after(c.err)
		if got != c.want || ok != c.ok || ok != (what != "") {
			t.Errorf("%s: got %+v %v %q, want %+v %v", c.name, got, ok, what, c.want, c.ok)
		}
	}
}

func TestPlanWithoutProc(t *testing.T) {
	plan := rootPlan(&initConfig{NoProc: true}, mergedUsr)
	var proc []mountOp
	for _, op := range plan {
		if op.Kind == opProc || op.Kind == opMask {
			t.Errorf("a plan without /proc has %+v", op)
		}
		if op.Target == "/proc" {
			proc = append(proc, op)
		}
	}
	if len(proc) != 1 || proc[0].Kind != opTmpfs || !strings.Contains(proc[0].Data, "nr_inodes=1") {
		t.Fatalf("/proc: %+v, want one empty tmpfs", proc)
	}
	full := rootPlan(&initConfig{}, mergedUsr)
	masks := map[string]bool{}
	for i, op := range full {
		if op.Kind == opMask {
			if full[i-1].Kind != opProc && full[i-1].Kind != opMask || op.Source != "/dev/null" {
				t.Errorf("mask %+v is not right after the proc mount", op)
			}
			masks[op.Target] = true
		}
	}
	for _, p := range []string{"/proc/cmdline", "/proc/config.gz", "/proc/sys/kernel/random/boot_id", "/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/acpi", "/proc/scsi"} {
		if !masks[p] {
			t.Errorf("%s is not masked", p)
		}
	}
}

func TestOwnCgroupDirs(t *testing.T) {
	host := `25 1 0:22 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:9 - cgroup cgroup rw,memory
26 1 0:23 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids
27 1 0:24 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
`
	// podman --privileged on a v1 host: no cgroup namespace, each controller's mount
	// root is the container's own cgroup, and /proc/self/cgroup repeats it.
	container := `800 790 0:22 /libpod_parent/libpod-abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
801 790 0:23 /libpod_parent/libpod-abc /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
802 790 0:24 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
`
	own := map[string]string{"memory": "/libpod_parent/libpod-abc", "pids": "/libpod_parent/libpod-abc", "": "/libpod_parent/libpod-abc"}
	cases := []struct {
		name, info string
		own        map[string]string
		want       map[string]string
	}{
		{"host", host, map[string]string{"memory": "/user.slice", "pids": "/user.slice", "": "/user.slice"},
			map[string]string{"memory": "/sys/fs/cgroup/memory/user.slice", "pids": "/sys/fs/cgroup/pids/user.slice", "": "/sys/fs/cgroup/unified/user.slice"}},
		{"container without cgroup ns", container, own,
			map[string]string{"memory": "/sys/fs/cgroup/memory", "pids": "/sys/fs/cgroup/pids", "": "/sys/fs/cgroup/unified/libpod_parent/libpod-abc"}},
		{"namespaced v2", "30 20 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", map[string]string{"": "/"},
			map[string]string{"": "/sys/fs/cgroup"}},
		{"own cgroup outside the mount", "30 20 0:26 /a /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", map[string]string{"": "/b"},
			map[string]string{}},
	}
	for _, c := range cases {
		got := ownCgroupDirs(parseCgroupMounts(c.info), c.own)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

func TestDiagnoses(t *testing.T) {
	for _, c := range []struct {
		release string
		want    bool
	}{{"6.18.0-1-amd64", true}, {"5.3.0", true}, {"5.2.21", false}, {"4.4.0", false}, {"weird", true}} {
		if got := kernelAtLeast(c.release, 5, 3); got != c.want {
			t.Errorf("kernelAtLeast(%q, 5, 3) = %v", c.release, got)
		}
	}
	groups := stageHint(&SetupError{Stage: "drop supplementary groups", Errno: syscall.EPERM})
	if !strings.Contains(groups, "/etc/subuid") || !strings.Contains(groups, "newuidmap") {
		t.Errorf("setgroups hint: %q", groups)
	}
	// This host has clone3: ENOSYS from it is a seccomp profile's doing, and the
	// message names every engine's setting.
	msg := clone3Error()
	if seccompMode() != "0" {
		for _, w := range []string{"seccomp=unconfined", "podman", "kubernetes", "Unconfined"} {
			if !strings.Contains(msg, w) {
				t.Errorf("clone3 diagnosis lacks %q: %s", w, msg)
			}
		}
	} else if strings.Contains(msg, "5.3 or later") {
		t.Errorf("clone3 diagnosis blames a %s kernel: %s", kernelRelease(), msg)
	}
}

// Out of descriptors at spawn names the open-file limit, never the namespaces.
func TestDescriptorExhaustionHint(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE} {
		msg := (&Sandbox{}).startError(fmt.Errorf("fork a spawner: %w", errno)).Error()
		if !strings.Contains(msg, "ulimit -n") || !strings.Contains(msg, "LimitNOFILE") || strings.Contains(msg, "namespace") {
			t.Errorf("%v: %s", errno, msg)
		}
	}
}

// The AppArmor hint names the binary actually being run, and the fix for its path.
func TestAppArmorHintNamesTheBinary(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if p, err := filepath.EvalSymlinks(exe); err == nil {
		exe = p
	}
	h := apparmorHint()
	if !strings.Contains(h, exe) || !strings.Contains(h, "make install") {
		t.Fatalf("hint %q does not name %s and the install", h, exe)
	}
}

// TestSingleUIDNamespace is rootless podman's case, for real: the server is root of a user
// namespace that maps one uid (unshare -r as nobody), where setgroups is denied. It must
// refuse naming /etc/subuid and newuidmap, not only the errno.
func TestSingleUIDNamespace(t *testing.T) {
	if os.Getenv("AIRLOCK_SINGLE_UID_CHILD") == "1" {
		_, err := New(sandbox.Options{Cgroups: "off"})
		fmt.Printf("\nSINGLE-UID-RESULT %v\n", err)
		return
	}
	if !isRoot() {
		t.Skip("needs root to become nobody first; the root run covers it")
	}
	setpriv, err1 := exec.LookPath("setpriv")
	unshare, err2 := exec.LookPath("unshare")
	if err1 != nil || err2 != nil {
		t.Fatalf("setpriv and unshare (util-linux) are needed: %v %v", err1, err2)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "single-uid-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "linux.test")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups",
		unshare, "--user", "--map-root-user", bin, "-test.run=^TestSingleUIDNamespace$", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = []string{"AIRLOCK_SINGLE_UID_CHILD=1", "HOME=" + dir, "PATH=/usr/bin:/bin"}
	out, _ := cmd.CombinedOutput()
	_, result, ok := strings.Cut(string(out), "SINGLE-UID-RESULT ")
	if !ok {
		sandboxtest.Require(t, fmt.Errorf("%w: no single-uid user namespace here: %s", sandbox.ErrUnavailable, out))
	}
	result, _, _ = strings.Cut(result, "\n")
	for _, w := range []string{"setgroups", "/etc/subuid", "newuidmap"} {
		if !strings.Contains(result, w) {
			t.Errorf("the refusal lacks %q: %s", w, result)
		}
	}
	t.Logf("refusal: %s", result)
}

// TestCgroupsOffFixNamesTheSetting: with sandbox.cgroups = "off" the cgroups layer's fix
// is the setting, not the host's cgroup advice (which, in a container, blamed a
// read-only cgroup file system that may well be writable).
func TestCgroupsOffFixNamesTheSetting(t *testing.T) {
	s, err := New(sandbox.Options{Cgroups: "off"})
	sandboxtest.Require(t, err)
	defer s.Close()
	rep, err := s.Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cg, ok := rep.Layer("cgroups")
	if !ok || cg.Active {
		t.Fatalf("cgroups layer %+v (found %t), want inactive", cg, ok)
	}
	if !strings.Contains(cg.Fix, `sandbox.cgroups = "auto"`) || strings.Contains(cg.Fix, "read-only") {
		t.Errorf("the fix does not name the setting that turned cgroups off: %q", cg.Fix)
	}
}
