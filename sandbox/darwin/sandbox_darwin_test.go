package darwin

import (
	"context"
	"debug/macho"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/sandbox"
)

// The test binary is its own sandbox init (sandbox.Init) and its own hostile program: with
// AIRLOCK_TEST_ROLE set it runs one escape attempt inside the sandbox and exits.
func TestMain(m *testing.M) {
	if sandbox.Init() {
		return
	}
	if role := os.Getenv("AIRLOCK_TEST_ROLE"); role != "" {
		os.Exit(hostile(role, os.Getenv("AIRLOCK_TEST_ARG")))
	}
	os.Exit(m.Run())
}

// hostile prints "ESCAPED" when the attempt worked and "blocked: …" otherwise.
func hostile(role, arg string) int {
	report := func(err error) int {
		if err == nil {
			fmt.Println("ESCAPED")
			return 0
		}
		fmt.Println("blocked:", err)
		return 1
	}
	switch role {
	case "read":
		_, err := os.ReadFile(arg)
		return report(err)
	case "readdir":
		_, err := os.ReadDir(arg)
		return report(err)
	case "write":
		return report(os.WriteFile(arg, []byte("x"), 0o644))
	case "connect":
		c, err := net.DialTimeout("tcp", arg, 2*time.Second)
		if err == nil {
			c.Close()
		}
		return report(err)
	case "env":
		fmt.Println(strings.Join(os.Environ(), "\n"))
		return 0
	case "flood":
		b := []byte(strings.Repeat("y", 64<<10))
		for {
			if _, err := os.Stdout.Write(b); err != nil {
				return 1
			}
		}
	case "spawn":
		n, _ := strconv.Atoi(arg)
		for i := range n {
			if _, err := syscall.ForkExec(os.Args[0], []string{os.Args[0]}, &syscall.ProcAttr{Env: []string{"AIRLOCK_TEST_ROLE=sleep"}}); err != nil {
				fmt.Printf("blocked after %d: %v\n", i, err)
				return 1
			}
		}
		fmt.Println("ESCAPED")
		return 0
	case "sleep":
		time.Sleep(time.Hour)
		return 0
	case "detach":
		// Double fork with setsid: the middle process exits at once, so the grandchild is
		// re-parented to launchd and outside our process group.
		attr := &syscall.ProcAttr{Env: []string{"AIRLOCK_TEST_ROLE=detach-middle"}, Files: []uintptr{0, 1, 2}, Sys: &syscall.SysProcAttr{Setsid: true}}
		if _, err := syscall.ForkExec(os.Args[0], []string{os.Args[0]}, attr); err != nil {
			return report(err)
		}
		time.Sleep(time.Hour)
		return 0
	case "detach-middle":
		attr := &syscall.ProcAttr{Env: []string{"AIRLOCK_TEST_ROLE=detach-leaf"}, Files: []uintptr{0, 1, 2}, Sys: &syscall.SysProcAttr{Setsid: true}}
		pid, err := syscall.ForkExec(os.Args[0], []string{os.Args[0]}, attr)
		if err != nil {
			return report(err)
		}
		fmt.Printf("leaf=%d\n", pid)
		return 0
	case "detach-leaf":
		_, _ = syscall.Setsid()
		for {
			time.Sleep(10 * time.Millisecond)
		}
	case "tree":
		// Every process prints its pid, leaves the session and keeps forking setsid
		// children, so the tree is still growing when the kill comes.
		fmt.Printf("pid=%d\n", os.Getpid())
		_, _ = syscall.Setsid()
		attr := &syscall.ProcAttr{Env: []string{"AIRLOCK_TEST_ROLE=tree"}, Files: []uintptr{0, 1, 2}}
		for range 3 {
			_, _ = syscall.ForkExec(os.Args[0], []string{os.Args[0]}, attr)
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(time.Hour)
		return 0
	case "rlimits":
		for _, r := range []struct {
			name string
			res  int
		}{{"as", unix.RLIMIT_AS}, {"data", unix.RLIMIT_DATA}, {"nproc", unix.RLIMIT_NPROC}} {
			var l unix.Rlimit
			if err := unix.Getrlimit(r.res, &l); err != nil {
				fmt.Printf("%s=error\n", r.name)
				continue
			}
			fmt.Printf("%s=%d\n", r.name, l.Cur)
		}
		return 0
	case "alloc":
		// Map and touch far more than the limit; under RLIMIT_AS the mmap fails.
		n, _ := strconv.Atoi(arg)
		b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err == nil {
			for i := 0; i < len(b); i += 1 << 14 {
				b[i] = 1
			}
		}
		return report(err)
	case "kern-proc-pid":
		// What a process lister does: kern.proc.pid.<n> for every n.
		found := 0
		for pid := 1; pid < 2000; pid++ {
			if _, err := unix.SysctlKinfoProc("kern.proc.pid", pid); err == nil {
				found++
			}
		}
		if found > 1 {
			fmt.Printf("ESCAPED: %d processes listed\n", found)
			return 0
		}
		fmt.Println("blocked: kern.proc.pid listed", found)
		return 1
	case "interfaces":
		// getifaddrs: the host's interfaces, addresses and MACs (sysctl net.routetable.*).
		addrs, err := net.InterfaceAddrs()
		if err == nil && len(addrs) == 0 {
			err = errors.New("no interface listed")
		}
		return report(err)
	case "sysctl":
		_, err := unix.SysctlRaw(arg)
		return report(err)
	case "exec":
		_, err := syscall.ForkExec(arg, []string{arg}, &syscall.ProcAttr{})
		return report(err)
	case "link":
		// A hard link to a host file would make it readable through the workspace.
		return report(os.Link(arg, filepath.Join(os.Getenv("HOME"), "linked")))
	case "unix-socket":
		// multiprocessing's Manager: listen on a socket in TMPDIR and connect to it.
		path := filepath.Join(os.Getenv("TMPDIR"), "m.sock")
		l, err := net.Listen("unix", path)
		if err != nil {
			fmt.Println("failed: listen:", err)
			return 1
		}
		defer l.Close()
		c, err := net.Dial("unix", path)
		if err != nil {
			fmt.Println("failed: dial:", err)
			return 1
		}
		c.Close()
		fmt.Println("ok")
		return 0
	case "listen-loopback":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Println("failed:", err)
			return 1
		}
		l.Close()
		fmt.Println("ok")
		return 0
	case "dns-udp":
		// Go's own resolver over UDP, the way c-ares asks: the answer is a datagram in.
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "udp", arg)
		}}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		addrs, err := r.LookupHost(ctx, "example.com")
		if err != nil {
			fmt.Println("failed:", err)
			return 1
		}
		fmt.Println("ok", addrs)
		return 0
	}
	return 2
}

func newTestSandbox(t *testing.T) *Sandbox {
	t.Helper()
	s, err := New(sandbox.Options{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func run(t *testing.T, s *Sandbox, role, arg string, lim sandbox.Limits) sandbox.Result {
	t.Helper()
	return runNet(t, s, role, arg, lim, sandbox.NetworkNone)
}

func runNet(t *testing.T, s *Sandbox, role, arg string, lim sandbox.Limits, network sandbox.Network) sandbox.Result {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if lim.Wall == 0 {
		lim.Wall = 10 * time.Second
	}
	res, err := s.Run(context.Background(), sandbox.Spec{
		Language: "test", Argv: []string{self},
		Env:     []string{"AIRLOCK_TEST_ROLE=" + role, "AIRLOCK_TEST_ARG=" + arg},
		Limits:  filled(lim),
		Network: network,
	})
	if err != nil {
		t.Fatalf("Run(%s): %v", role, err)
	}
	return res
}

// filled gives each zero limit of a test the self-test's value (the floors these tests
// were written against): the backend refuses a zero limit.
func filled(l sandbox.Limits) sandbox.Limits {
	d := sandbox.SelfTestLimits()
	for _, f := range []struct{ v, d *int64 }{
		{(*int64)(&l.Wall), (*int64)(&d.Wall)}, {(*int64)(&l.CPU), (*int64)(&d.CPU)},
		{&l.Memory, &d.Memory}, {&l.FileSize, &d.FileSize}, {&l.Workspace, &d.Workspace}, {&l.Output, &d.Output},
	} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	if l.Pids <= 0 {
		l.Pids = d.Pids
	}
	if l.OpenFiles <= 0 {
		l.OpenFiles = d.OpenFiles
	}
	return l
}

func requireBlocked(t *testing.T, res sandbox.Result) {
	t.Helper()
	out := string(res.Stdout.Bytes())
	if strings.Contains(out, "ESCAPED") || !strings.Contains(out, "blocked") {
		t.Fatalf("escape attempt not blocked: status %s, stdout %q, stderr %q", res.Status, out, res.Stderr.Bytes())
	}
}

func TestSecretReadDenied(t *testing.T) {
	s := newTestSandbox(t)
	secret := filepath.Join(t.TempDir(), "id_rsa") // a sibling of the workspace, like ~/.ssh
	if err := os.WriteFile(secret, []byte("PRIVATE KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	requireBlocked(t, run(t, s, "read", secret, sandbox.Limits{}))
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	requireBlocked(t, run(t, s, "readdir", home, sandbox.Limits{}))
	requireBlocked(t, run(t, s, "readdir", filepath.Join(home, ".ssh"), sandbox.Limits{}))
}

// An operator's read root inside the home directory (~/Library for a user site, a node
// prefix under ~/.nvm) exposes what lies beside the interpreter; the credential stores in
// it stay denied. The neighbouring files are read as a control: the read roots work.
func TestSecretsUnderReadRootDenied(t *testing.T) {
	home, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(home, ".nvm", "versions", "node", "v20")
	files := map[string]bool{ // path → readable
		filepath.Join(home, "Library", "Cookies", "Cookies.binarycookies"): false,
		filepath.Join(home, "Library", "Keychains", "login.keychain-db"):   false,
		filepath.Join(home, "Library", "Python", "3.12", "ok.py"):          true,
		filepath.Join(prefix, "etc", "npmrc"):                              false,
		filepath.Join(prefix, "lib", "ok.js"):                              true,
	}
	for f := range files {
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("//registry.npmjs.org/:_authToken=secret"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := newTestSandbox(t)
	s.home = home
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for f, readable := range files {
		res, err := s.Run(context.Background(), sandbox.Spec{Language: "test", Argv: []string{self},
			Env: []string{"AIRLOCK_TEST_ROLE=read", "AIRLOCK_TEST_ARG=" + f}, Mounts: []string{filepath.Join(home, "Library"), prefix},
			Limits: filled(sandbox.Limits{Wall: 10 * time.Second})})
		if err != nil {
			t.Fatal(err)
		}
		if readable && !strings.Contains(string(res.Stdout.Bytes()), "ESCAPED") {
			t.Fatalf("control %s is not readable through its read root: %q %q", f, res.Stdout.Bytes(), res.Stderr.Bytes())
		}
		if !readable {
			requireBlocked(t, res)
		}
	}
}

// Without the network the host's interfaces, routes and sockets are not readable; with it
// the interface list is (getaddrinfo needs it), the socket tables still are not.
func TestNetworkSysctlsDenied(t *testing.T) {
	s := newTestSandbox(t)
	requireBlocked(t, run(t, s, "interfaces", "", sandbox.Limits{}))
	for _, network := range []sandbox.Network{sandbox.NetworkNone, sandbox.NetworkHost} {
		requireBlocked(t, runNet(t, s, "sysctl", "net.inet.tcp.pcblist_n", sandbox.Limits{}, network))
		requireBlocked(t, runNet(t, s, "sysctl", "net.local.stream.pcblist_n", sandbox.Limits{}, network))
	}
	if res := runNet(t, s, "interfaces", "", sandbox.Limits{}, sandbox.NetworkHost); !strings.Contains(string(res.Stdout.Bytes()), "ESCAPED") {
		t.Fatalf("network host: the interface list is unreadable: %q %q", res.Stdout.Bytes(), res.Stderr.Bytes())
	}
}

func TestWriteOutsideWorkspaceDenied(t *testing.T) {
	s := newTestSandbox(t)
	target := filepath.Join(t.TempDir(), "planted")
	requireBlocked(t, run(t, s, "write", target, sandbox.Limits{}))
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file outside the workspace was created: %v", err)
	}
}

func TestNetworkDenied(t *testing.T) {
	s := newTestSandbox(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	requireBlocked(t, run(t, s, "connect", ln.Addr().String(), sandbox.Limits{}))
}

func TestEnvSecretAbsent(t *testing.T) {
	t.Setenv("AIRLOCK_TEST_SECRET", "hunter2")
	res := run(t, newTestSandbox(t), "env", "", sandbox.Limits{})
	out := string(res.Stdout.Bytes())
	if res.Status != sandbox.StatusOK || !strings.Contains(out, "PATH=/usr/bin:/bin") {
		t.Fatalf("env role did not run: %s %q %q", res.Status, out, res.Stderr.Bytes())
	}
	if strings.Contains(out, "hunter2") {
		t.Fatal("the server's environment leaked into the sandbox")
	}
}

func TestForkBombContained(t *testing.T) {
	res := run(t, newTestSandbox(t), "spawn", "200", sandbox.Limits{Pids: 8, Wall: 10 * time.Second})
	requireBlocked(t, res)
}

func TestOutputFloodCapped(t *testing.T) {
	res := run(t, newTestSandbox(t), "flood", "", sandbox.Limits{Output: 64 << 10})
	if res.Status != sandbox.StatusOutputLimit {
		t.Fatalf("status %s, want output_limit (%s)", res.Status, res.Detail)
	}
	if kept := len(res.Stdout.Head) + len(res.Stdout.Tail); kept > 64<<10 {
		t.Fatalf("kept %d bytes, cap 64 KiB", kept)
	}
}

func TestTimeoutKillsDetachedGrandchild(t *testing.T) {
	start := time.Now()
	res := run(t, newTestSandbox(t), "detach", "", sandbox.Limits{Wall: 2 * time.Second})
	if res.Status != sandbox.StatusTimeout {
		t.Fatalf("status %s, want timeout (%s)", res.Status, res.Detail)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Run took %v after a 2 s limit: a descendant held it", took)
	}
	_, leaf, ok := strings.Cut(string(res.Stdout.Bytes()), "leaf=")
	if !ok {
		t.Fatalf("grandchild did not report its pid: %q %q", res.Stdout.Bytes(), res.Stderr.Bytes())
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(leaf, "\n", 2)[0]))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("detached grandchild %d survived the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestProbe(t *testing.T) {
	r, err := newTestSandbox(t).Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := r.Layer("seatbelt"); !ok || !l.Active {
		t.Fatalf("seatbelt layer: %+v", l)
	}
	if l, ok := r.Layer("pid-namespace"); !ok || l.Active {
		t.Fatalf("pid-namespace must be reported inactive on macOS: %+v", l)
	}
	if len(r.Missing()) != 0 {
		t.Fatalf("required layers missing: %+v", r.Missing())
	}
}

// The kill-time race: a tree that keeps forking setsid children while it is killed. Each
// process prints its pid; none may outlive Run.
func TestTimeoutKillsForkingTree(t *testing.T) {
	res := run(t, newTestSandbox(t), "tree", "", sandbox.Limits{Wall: 2 * time.Second, Pids: 64})
	if res.Status != sandbox.StatusTimeout {
		t.Fatalf("status %s, want timeout (%s)", res.Status, res.Detail)
	}
	var pids []int
	for _, line := range strings.Split(string(res.Stdout.Bytes()), "\n") {
		if v, ok := strings.CutPrefix(line, "pid="); ok {
			if pid, err := strconv.Atoi(v); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	if len(pids) < 4 {
		t.Fatalf("the tree did not grow (%d pids): %q %q", len(pids), res.Stdout.Bytes(), res.Stderr.Bytes())
	}
	requireGone(t, pids)
}

func requireGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				for _, p := range pids {
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
				t.Fatalf("process %d of the run survived it (of %v)", pid, pids)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Memory rlimits: what the probe reports is what the program sees, and an allocation
// past the limit fails when the layer is active.
func TestMemoryLimit(t *testing.T) {
	s := newTestSandbox(t)
	layer := s.memoryLayer()
	t.Logf("memory-limit active=%v: %s", layer.Active, layer.Detail)
	const limit = 1 << 30
	res := run(t, s, "rlimits", "", sandbox.Limits{Memory: limit})
	out := string(res.Stdout.Bytes())
	if res.Status != sandbox.StatusOK {
		t.Fatalf("rlimits role: %s %s %q", res.Status, res.Detail, res.Stderr.Bytes())
	}
	if !strings.Contains(out, "nproc=") {
		t.Fatalf("no rlimits printed: %q", out)
	}
	holds := strings.Contains(out, fmt.Sprintf("as=%d\n", limit)) && strings.Contains(out, fmt.Sprintf("data=%d\n", limit))
	if holds != layer.Active {
		t.Fatalf("probe says memory-limit active=%v, the program sees %q", layer.Active, out)
	}
	if !layer.Active {
		if !strings.Contains(layer.Detail, "not in effect:") {
			t.Fatalf("an inactive memory layer must say why: %q", layer.Detail)
		}
		return
	}
	requireBlocked(t, run(t, s, "alloc", strconv.Itoa(4<<30), sandbox.Limits{Memory: limit}))
}

func TestProcessListingDenied(t *testing.T) {
	requireBlocked(t, run(t, newTestSandbox(t), "kern-proc-pid", "", sandbox.Limits{}))
}

func TestExecOutsideListDenied(t *testing.T) {
	requireBlocked(t, run(t, newTestSandbox(t), "exec", "/bin/ls", sandbox.Limits{}))
}

func TestHardLinkFromOutsideDenied(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("PRIVATE"), 0o644); err != nil {
		t.Fatal(err)
	}
	requireBlocked(t, run(t, newTestSandbox(t), "link", secret, sandbox.Limits{}))
}

// /opt/homebrew is a read root for Homebrew's python; its var/ (database data) is not.
func TestPackageManagerDataDenied(t *testing.T) {
	found := false
	for _, dir := range []string{"/opt/homebrew/var", "/usr/local/var"} {
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		found = true
		s := newTestSandbox(t)
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Run(context.Background(), sandbox.Spec{Language: "test", Argv: []string{self},
			Env: []string{"AIRLOCK_TEST_ROLE=readdir", "AIRLOCK_TEST_ARG=" + dir}, Mounts: []string{filepath.Dir(dir)},
			Limits: filled(sandbox.Limits{Wall: 10 * time.Second})})
		if err != nil {
			t.Fatal(err)
		}
		requireBlocked(t, res)
	}
	if !found {
		requireFeature(t, "no /opt/homebrew/var or /usr/local/var on this Mac")
	}
}

func TestUnixSocketInWorkspace(t *testing.T) {
	for _, network := range []sandbox.Network{sandbox.NetworkNone, sandbox.NetworkHost} {
		res := runNet(t, newTestSandbox(t), "unix-socket", "", sandbox.Limits{}, network)
		if res.Status != sandbox.StatusOK {
			t.Errorf("network=%s: unix socket in TMPDIR: %s %q %q", network, res.Status, res.Stdout.Bytes(), res.Stderr.Bytes())
		}
	}
}

// With network on, loopback stays out of reach: airlock's own HTTP port and every other
// local service listen there. 0.0.0.0 connects to loopback on macOS too.
func TestNetworkHostLoopbackDenied(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	s := newTestSandbox(t)
	for _, addr := range []string{"127.0.0.1:" + port, "localhost:" + port, "0.0.0.0:" + port} {
		requireBlocked(t, runNet(t, s, "connect", addr, sandbox.Limits{}, sandbox.NetworkHost))
	}
	res := runNet(t, s, "listen-loopback", "", sandbox.Limits{}, sandbox.NetworkHost)
	if res.Status != sandbox.StatusOK {
		t.Errorf("a loopback listener of the program's own: %s %q", res.Status, res.Stdout.Bytes())
	}
}

// DNS answers arrive as inbound UDP (c-ares, Go's resolver, QUIC).
func TestNetworkHostUDPReplies(t *testing.T) {
	c, err := net.DialTimeout("udp", "1.1.1.1:53", 2*time.Second)
	if err != nil {
		requireFeature(t, "no route to 1.1.1.1 from this host: "+err.Error())
	}
	c.Close()
	res := runNet(t, newTestSandbox(t), "dns-udp", "1.1.1.1:53", sandbox.Limits{}, sandbox.NetworkHost)
	if res.Status != sandbox.StatusOK {
		t.Fatalf("DNS over UDP with network=host: %s %q %q", res.Status, res.Stdout.Bytes(), res.Stderr.Bytes())
	}
}

// The self-test starts every interpreter it is given: one that cannot start (not a
// binary the kernel can exec) makes New fail closed.
func TestSelfTestStartsInterpreters(t *testing.T) {
	script := filepath.Join(t.TempDir(), "interp")
	if err := os.WriteFile(script, []byte("\x00\x01 not an executable\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := New(sandbox.Options{SelfTest: []sandbox.Spec{{Language: "bad", Argv: []string{script}}}}); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("New with an interpreter that cannot start: err = %v, want ErrUnavailable", err)
	}
	// The languages as policy detects them on this Mac, with their argv, env and mounts.
	reg, err := policy.DetectWith(policy.Config{Enabled: []string{"python", "javascript", "sh"}})
	if err != nil {
		t.Fatal(err)
	}
	var good []sandbox.Spec
	for _, l := range reg.Languages() {
		if l.Enabled && l.Installed {
			good = append(good, l.Spec(nil, nil, sandbox.Limits{}, policy.BoundByRlimit))
		}
	}
	if _, err := New(sandbox.Options{SelfTest: good}); err != nil {
		t.Fatalf("New with %d languages: %v", len(good), err)
	}
}

// Apple's /usr/bin/python3 runs the Command Line Tools' (or Xcode's) python3 through
// xcode-select; installed on GitHub's macOS runners.
func TestAppleStubPython(t *testing.T) {
	link, _ := os.Readlink(xcodeSelectLink)
	tool, _, ok := developerTool("/usr/bin/python3", link, func(p string) bool { _, err := os.Stat(p); return err == nil })
	if !ok {
		requireFeature(t, "no Command Line Tools or Xcode python3 on this Mac")
	}
	res, err := newTestSandbox(t).Run(context.Background(), sandbox.Spec{Language: "python", Argv: []string{"/usr/bin/python3", "-c", "import ssl, sqlite3; print(6*7)"},
		Limits: filled(sandbox.Limits{Wall: 30 * time.Second, AddressSpace: 2 << 30})})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != sandbox.StatusOK || strings.TrimSpace(string(res.Stdout.Bytes())) != "42" {
		t.Fatalf("/usr/bin/python3 (%s): %s %s %q", tool, res.Status, res.Detail, res.Stderr.Bytes())
	}
}

// An x86_64-only interpreter runs through Rosetta on Apple Silicon.
func TestRosettaInterpreter(t *testing.T) {
	if runtime.GOARCH != "arm64" {
		requireFeature(t, "not Apple Silicon")
	}
	var interp string
	for _, p := range []string{"/usr/local/bin/python3", "/usr/local/bin/node"} {
		if f, err := macho.Open(p); err == nil {
			if f.Cpu == macho.CpuAmd64 {
				interp = p
			}
			f.Close()
		}
	}
	if interp == "" {
		requireFeature(t, "no x86_64-only python3 or node under /usr/local (Intel Homebrew)")
	}
	res, err := newTestSandbox(t).Run(context.Background(), sandbox.Spec{Language: "x86", Argv: []string{interp, "--version"},
		Limits: filled(sandbox.Limits{Wall: 60 * time.Second, AddressSpace: 4 << 30})})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != sandbox.StatusOK {
		t.Fatalf("%s under Rosetta: %s %s %q", interp, res.Status, res.Detail, res.Stderr.Bytes())
	}
}

// requireFeature skips loudly when the Mac lacks the software a test needs (Intel
// Homebrew, the Command Line Tools, a route out); the sandbox itself never skips.
func requireFeature(t *testing.T, why string) {
	t.Helper()
	t.Skipf("SKIP (loud): %s", why)
}
