//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/airlock-mcp/airlock/internal/soak"
)

// faultServer starts the built airlock serve with a private environment; the pool is off
// unless extra turns it on, so that every call builds its sandbox from scratch.
func faultServer(t *testing.T, extra ...string) (*soak.Server, string) {
	t.Helper()
	return faultServerOf(t, needSandbox(t), extra...)
}

// faultServerOf is faultServer with bin started in place of the built airlock.
func faultServerOf(t *testing.T, bin string, extra ...string) (*soak.Server, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: fault tests read other processes' /proc entries and mount tmpfs: need root")
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := soak.ServerEnv(dir, append([]string{"AIRLOCK_POOL_SIZE=0", "AIRLOCK_AUDIT=" + filepath.Join(dir, "audit.jsonl")}, extra...)...)
	srv, err := soak.StartServer(context.Background(), bin, env, filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-srv.Exited():
		default:
			srv.Kill()
		}
	})
	return srv, dir
}

func marker(t *testing.T) string {
	return fmt.Sprintf("airlock-fault-%d-%s-%d", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano())
}

// sleeper is a program that leaves a detached grandchild with the marker in its argv,
// then sleeps itself: two processes to find from the host.
const sleeper = "import os, sys, time\n" +
	"if os.fork() == 0:\n" +
	"    os.setsid()\n" +
	"    os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(300)', sys.argv[1]])\n" +
	"time.sleep(300)\n"

func runCall(code, mark string, timeout float64) mcp.CallToolRequest {
	args := map[string]any{"code": code, "args": []string{mark}}
	if timeout > 0 {
		args["timeout_seconds"] = timeout
	}
	return callReq("run_code", args, nil)
}

// waitProcs waits until the number of processes with mark in their argv satisfies ok.
func waitProcs(t *testing.T, mark string, within time.Duration, ok func(int) bool) (int, time.Duration) {
	t.Helper()
	t0 := time.Now()
	for {
		marked, _ := soak.Procs(mark, 0)
		if ok(len(marked)) || time.Since(t0) > within {
			return len(marked), time.Since(t0)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startSleeper sends the sleeper and waits until both its processes are visible.
func startSleeper(t *testing.T, c *client.Client, mark string) (context.CancelFunc, <-chan *mcp.CallToolResult) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, _ := c.CallTool(ctx, runCall(sleeper, mark, 60))
		done <- r
	}()
	if n, _ := waitProcs(t, mark, 20*time.Second, func(n int) bool { return n >= 2 }); n < 2 {
		cancel()
		t.Fatalf("the sleeper's processes never showed up (%d found)", n)
	}
	return cancel, done
}

// kill -9 of the server: every sandbox process dies at once (Pdeathsig on the init, and
// the pid namespace dies with it), and the next start removes the dead server's cgroups
// and logs it.
func TestFaultKill9KillsSandboxesAndNextStartCleansCgroups(t *testing.T) {
	// The next start must find the dead server's cgroups itself, before any other
	// airlock on the host (other test packages) cleans them.
	restore, err := soak.PrivateCgroup(fmt.Sprintf("airlock-fault-%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := restore(); err != nil {
			t.Error(err)
		}
	})
	srv, dir := faultServer(t)
	mark := marker(t)
	pid := srv.PID()
	bases := soak.CgroupBases(pid)
	_, _ = startSleeper(t, srv.Client, mark)
	srv.Kill()
	n, took := waitProcs(t, mark, 2*time.Second, func(n int) bool { return n == 0 })
	t.Logf("kill -9: marked processes gone in %s", took.Round(time.Millisecond))
	if n != 0 {
		t.Fatalf("%d sandbox processes outlived the killed server by %s", n, took)
	}
	if _, inits := soak.Procs("", pid); len(inits) != 0 {
		t.Fatalf("sandbox inits of the dead server: %v", inits)
	}
	stale := soak.AllCgroups(bases, pid)
	t.Logf("cgroups left by the dead server: %d, under %v", len(stale), bases)
	if len(bases) > 0 && len(stale) == 0 {
		t.Fatal("the killed server left no cgroup behind, so the next start's cleanup is not tested")
	}
	next, _ := faultServer(t)
	defer next.CloseStdin(10 * time.Second)
	if left := soak.AllCgroups(bases, pid); len(left) != 0 {
		t.Fatalf("the next start left the dead server's cgroups: %v", left)
	}
	if len(stale) > 0 {
		log := next.Log()
		if !strings.Contains(log, "removed stale sandbox cgroups") || !strings.Contains(log, fmt.Sprintf("/%d-", pid)) {
			t.Fatalf("the next start removed %d stale cgroups without logging them:\n%s", len(stale), log)
		}
	}
	_ = dir
}

// SIGTERM: the in-flight call is answered "cancelled", its sandbox dies, its audit line
// is on disk, and the server exits 0 in bounded time.
func TestFaultSigtermCancelsAuditsAndExitsZero(t *testing.T) {
	srv, dir := faultServer(t)
	mark := marker(t)
	_, done := startSleeper(t, srv.Client, mark)
	code, took, err := srv.Signal(syscall.SIGTERM, 10*time.Second)
	t.Logf("SIGTERM: exit %d after %s", code, took.Round(time.Millisecond))
	if err != nil || code != 0 || took > 6*time.Second {
		t.Fatalf("exit %d after %s: %v", code, took, err)
	}
	var r *mcp.CallToolResult
	select {
	case r = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the in-flight call got no answer")
	}
	if r == nil {
		t.Fatal("the in-flight call got an error instead of a result")
	}
	a := soak.AnswerOf(r)
	if a.Status != "cancelled" || !a.IsError {
		t.Fatalf("in-flight call: status %q isError %v: %s", a.Status, a.IsError, a.Text)
	}
	if n, _ := waitProcs(t, mark, time.Second, func(n int) bool { return n == 0 }); n != 0 {
		t.Fatalf("%d sandbox processes survived SIGTERM", n)
	}
	audit, _ := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	if !strings.Contains(string(audit), `"id":"`+a.ID+`"`) || !strings.Contains(string(audit), `"status":"cancelled"`) {
		t.Fatalf("no audit line for the cancelled call %s:\n%s", a.ID, audit)
	}
}

// Closing stdin (the client went away) kills the running sandbox within a second.
func TestFaultStdinEOFKillsSandbox(t *testing.T) {
	srv, _ := faultServer(t)
	mark := marker(t)
	_, _ = startSleeper(t, srv.Client, mark)
	code, took, err := srv.CloseStdin(10 * time.Second)
	if err != nil || code != 0 {
		t.Fatalf("exit %d after %s: %v", code, took, err)
	}
	n, gone := waitProcs(t, mark, time.Second, func(n int) bool { return n == 0 })
	t.Logf("stdin EOF: server exited in %s, marked processes gone %s later", took.Round(time.Millisecond), gone.Round(time.Millisecond))
	if n != 0 {
		t.Fatalf("%d sandbox processes still running 1 s after stdin closed", n)
	}
}

// An HTTP client that drops the connection mid-call cancels that call: its sandbox is
// gone within a second, and the server keeps serving.
func TestFaultHTTPDisconnectKillsSandbox(t *testing.T) {
	bin := needSandbox(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "serve", "--http", addr)
	cmd.Env = soak.ServerEnv(dir, "AIRLOCK_POOL_SIZE=0", "AIRLOCK_AUDIT=off")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "serving MCP over HTTP") {
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("HTTP server did not start")
	}
	c, err := client.NewStreamableHttpClient("http://" + addr + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	mark := marker(t)
	cancel, done := startSleeper(t, c, mark)
	cancel() // the client gives up: the request's connection closes
	<-done
	n, took := waitProcs(t, mark, time.Second, func(n int) bool { return n == 0 })
	t.Logf("HTTP disconnect: marked processes gone in %s", took.Round(time.Millisecond))
	if n != 0 {
		t.Fatalf("%d sandbox processes still running 1 s after the client disconnected", n)
	}
	r, err := c.CallTool(ctx, runCall("print('still serving')", mark+"-after", 10))
	if err != nil || r.IsError {
		t.Fatalf("server not serving after the disconnect: %v %v", err, r)
	}
}

// Host-side failures after startup are a clean sandbox_error result, and the server
// keeps serving and recovers when the fault goes away.
func TestFaultInterpreterVanishes(t *testing.T) {
	// The server's PATH (soak.ServerEnv), not ours: ours may hold a pyenv shim.
	var real string
	for _, d := range []string{"/usr/local/bin", "/usr/bin", "/bin"} {
		if p, err := filepath.EvalSymlinks(filepath.Join(d, "python3")); err == nil {
			real = p
			break
		}
	}
	if real == "" {
		t.Skip("SKIPPING: no python3 on the server's PATH")
	}
	// Under /usr, which the sandbox binds read-only: it shows neither the host's /tmp nor /var.
	dir, err := os.MkdirTemp("/usr/local", "airlock-fault-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // the sandbox runs as an unprivileged user
		t.Fatal(err)
	}
	interp := filepath.Join(dir, "bin", filepath.Base(real))
	copyFile(t, real, interp)
	cfg := filepath.Join(dir, "airlock.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("[languages.interpreters]\npython = %q\n", interp)), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, _ := faultServer(t, "AIRLOCK_CONFIG="+cfg)
	call := func(code string) soak.Answer {
		t.Helper()
		r, err := srv.Client.CallTool(context.Background(), runCall(code, marker(t), 10))
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		return soak.AnswerOf(r)
	}
	if a := call("print(1)"); a.Status != "ok" {
		t.Fatalf("before the fault: %+v", a)
	}
	if err := os.Remove(interp); err != nil {
		t.Fatal(err)
	}
	a := call("print(1)")
	t.Logf("interpreter gone: status %s, text %.200q", a.Status, a.Text)
	if a.Status != "sandbox_error" || !a.IsError {
		t.Errorf("interpreter gone: status %q isError %v, want a sandbox_error result: %s", a.Status, a.IsError, a.Text)
	}
	copyFile(t, real, interp)
	if a := call("print(1)"); a.Status != "ok" {
		t.Fatalf("after the interpreter is back: %+v", a)
	}
}

// A full disk under the audit log fails the call with sandbox_error and withholds its
// output (nothing unaudited is reported as a success); the server keeps serving and
// recovers once there is space.
func TestFaultAuditDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: mounting a tmpfs needs root")
	}
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("SKIPPING: cannot mount a tmpfs: %v", err)
	}
	defer syscall.Unmount(mnt, syscall.MNT_DETACH)
	srv, _ := faultServer(t, "AIRLOCK_AUDIT="+filepath.Join(mnt, "audit.jsonl"))
	mark := marker(t)
	call := func() soak.Answer {
		t.Helper()
		r, err := srv.Client.CallTool(context.Background(), runCall("import sys\nprint('out', sys.argv[1])", mark, 10))
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		return soak.AnswerOf(r)
	}
	if a := call(); a.Status != "ok" {
		t.Fatalf("before the disk fills: %+v", a)
	}
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := f.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	f.Close()
	// tmpfs allocates whole pages: the log's last page still has room. Fill it with
	// newlines, which leave every record intact.
	if af, err := os.OpenFile(filepath.Join(mnt, "audit.jsonl"), os.O_WRONLY|os.O_APPEND, 0); err == nil {
		for i := 0; i < 1<<16; i++ {
			if _, err := af.Write([]byte{'\n'}); err != nil {
				break
			}
		}
		af.Close()
	}
	a := call()
	t.Logf("audit disk full: status %s, detail %.160q", a.Status, a.Detail)
	if a.Status != "sandbox_error" || !a.IsError || strings.Contains(a.Stdout, mark) || !strings.Contains(a.Detail, "audit") {
		t.Fatalf("disk full: %+v, want sandbox_error naming the audit log and no output", a)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if a := call(); a.Status != "ok" {
		t.Fatalf("after space is freed: %+v", a)
	}
	b, _ := os.ReadFile(filepath.Join(mnt, "audit.jsonl"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var last struct{ Status string }
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.Status != "ok" {
		t.Fatalf("last audit line after recovery is not a whole record: %v %q", err, lines[len(lines)-1])
	}
}

// cgroupJoiner becomes the server after joining the cgroups whose cgroup.procs files
// FAULT_CGROUP_PROCS lists, so the server creates its sandbox cgroups under private
// parents from its first instruction on, and nothing else shares them.
const cgroupJoiner = "#!/bin/sh\n" +
	"for f in $FAULT_CGROUP_PROCS; do echo $$ > \"$f\" || exit 97; done\n" +
	"exec \"$FAULT_BIN\" \"$@\"\n"

// removeCgroup removes an empty cgroup dir whose last processes may still be exiting.
func removeCgroup(t *testing.T, d string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := os.Remove(d)
		if err == nil || os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("remove cgroup %s: %v", d, err)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A server's cgroup dir that vanished (a host's cleanup, or its base removed by another
// airlock process's exit) is made again for the next run. A per-run cgroup that cannot be created at all (a
// read-only file system over the base) is a structured sandbox_error naming the
// cgroup, never a run without limits; the server keeps serving and recovers once the
// cgroup can be made.
func TestFaultCgroupCreationFails(t *testing.T) {
	bin := needSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: cgroup v1 controllers need root")
	}
	// Our own cgroups, where every airlock started by this test binary makes its base.
	ours := soak.CgroupParents(os.Getpid())
	if len(ours) == 0 {
		t.Skip("SKIPPING: no cgroup v1 hierarchy airlock uses is mounted here")
	}
	name := fmt.Sprintf("airlock-fault-%d-%d", os.Getpid(), time.Now().UnixNano())
	var procs, private []string
	for _, parent := range ours {
		d := filepath.Join(parent, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		private = append(private, d)
		procs = append(procs, filepath.Join(d, "cgroup.procs"))
	}
	// Registered first, so it runs after faultServerOf's cleanup has killed the server.
	t.Cleanup(func() {
		for _, d := range private {
			// The killed server may leave run cgroups behind (their removal runs after
			// the result is sent); a later server's start would clean them as stale.
			base := filepath.Join(d, "airlock")
			// Each server's own dir holds its run cgroups.
			owns, _ := os.ReadDir(base)
			for _, o := range owns {
				if !o.IsDir() {
					continue
				}
				runs, _ := os.ReadDir(filepath.Join(base, o.Name()))
				for _, r := range runs {
					if r.IsDir() {
						removeCgroup(t, filepath.Join(base, o.Name(), r.Name()))
					}
				}
				removeCgroup(t, filepath.Join(base, o.Name()))
			}
			removeCgroup(t, base)
			if err := os.Remove(d); err != nil {
				t.Errorf("remove the private cgroup: %v", err)
			}
		}
	})
	joiner := filepath.Join(t.TempDir(), "join-cgroups")
	if err := os.WriteFile(joiner, []byte(cgroupJoiner), 0o755); err != nil {
		t.Fatal(err)
	}
	srv, _ := faultServerOf(t, joiner, "FAULT_BIN="+bin, "FAULT_CGROUP_PROCS="+strings.Join(procs, " "))
	pid := srv.PID()
	bases := soak.CgroupBases(pid)
	// The server may use fewer controllers than have an airlock base on this host (a
	// base left by an older version stays): memory and pids at least.
	if len(bases) < 2 || len(bases) > len(private) {
		t.Fatalf("server bases %v, want one under each of some of %v", bases, private)
	}
	for _, b := range bases {
		if !strings.Contains(b, "/"+name+"/") {
			t.Fatalf("server base %s is not in the private cgroup %s: the fault would hit other servers", b, name)
		}
	}
	call := func() soak.Answer {
		t.Helper()
		r, err := srv.Client.CallTool(context.Background(), runCall("print('ran', 6*7)", marker(t), 10))
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		return soak.AnswerOf(r)
	}
	if a := call(); a.Status != "ok" || !strings.Contains(a.Stdout, "ran 42") {
		t.Fatalf("before the fault: %+v", a)
	}
	// The pids base goes away, as another airlock's exit may remove it: the next run
	// makes it again. The previous run's cgroup may still be on its way out. Its
	// spares (empty cgroups made ahead of the calls) go first, as a host's cleanup of
	// empty cgroups would remove them: the next call makes its own.
	var gone string
	for _, b := range bases {
		if strings.Contains(b, "/pids/") {
			gone = b
		}
	}
	if gone == "" {
		t.Skip("SKIPPING: the server uses no pids cgroup")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, d := range soak.AllCgroups([]string{gone}, pid) {
			_ = os.Remove(d)
		}
		err := os.Remove(gone)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("remove the server's base %s: %v", gone, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if a := call(); a.Status != "ok" || !strings.Contains(a.Stdout, "ran 42") {
		t.Fatalf("after the base vanished: %+v", a)
	}
	if _, err := os.Stat(gone); err != nil {
		t.Fatalf("the vanished base was not made again: %v", err)
	}
	// A read-only file system over the base: every new run cgroup under it fails. The
	// previous run's cgroups go first (their removal follows its answer).
	for deadline := time.Now().Add(5 * time.Second); len(soak.Cgroups(bases, pid)) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the previous run's cgroups stay: %v", soak.Cgroups(bases, pid))
		}
	}
	if err := syscall.Mount("none", gone, "tmpfs", syscall.MS_RDONLY, "size=4k"); err != nil {
		t.Fatalf("mount a read-only tmpfs over %s: %v", gone, err)
	}
	mounted := true
	t.Cleanup(func() {
		if mounted {
			_ = syscall.Unmount(gone, syscall.MNT_DETACH)
		}
	})
	a := call()
	t.Logf("cgroup creation fails: status %s, detail %.200q", a.Status, a.Detail)
	if a.Status != "sandbox_error" || !a.IsError || strings.Contains(a.Stdout, "ran 42") || !strings.Contains(a.Detail, gone+"/") {
		t.Errorf("cgroup creation fails: %+v, want a sandbox_error naming a cgroup under %s, and no output", a, gone)
	}
	if left := soak.Cgroups(bases, pid); len(left) != 0 {
		t.Errorf("the failed run left its other cgroups behind: %v", left)
	}
	if err := syscall.Unmount(gone, 0); err != nil {
		t.Fatal(err)
	}
	mounted = false
	if a := call(); a.Status != "ok" || !strings.Contains(a.Stdout, "ran 42") {
		t.Fatalf("after the base is back: %+v", a)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// kill -9 of a server in the Landlock tier, which has no pid namespace to die with the
// init: the spawner takes the zygote's death as the server's SIGTERM and sweeps the tree,
// the sleeper's setsid grandchild included, at once.
func TestFaultKill9LandlockKillsSandboxTree(t *testing.T) {
	restore, err := soak.PrivateCgroup(fmt.Sprintf("airlock-fault-ll-%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := restore(); err != nil {
			t.Error(err)
		}
	})
	srv, _ := faultServer(t, "AIRLOCK_ISOLATION=landlock")
	mark := marker(t)
	_, _ = startSleeper(t, srv.Client, mark)
	srv.Kill()
	n, took := waitProcs(t, mark, 2*time.Second, func(n int) bool { return n == 0 })
	t.Logf("kill -9: marked processes left: %d after %s", n, took.Round(time.Millisecond))
	if n != 0 {
		t.Fatalf("%d sandbox processes outlived the killed server by %s", n, took)
	}
	// The next start removes the dead server's cgroups (before the private one goes).
	next, _ := faultServer(t, "AIRLOCK_ISOLATION=landlock")
	next.CloseStdin(10 * time.Second)
}

// On the legacy SSE transport every answer travels on the client's event stream, and
// mcp-go runs each posted call detached from its POST: a client that closed its stream
// (or was cut off) left its calls running to their time limit, unseen and unanswerable,
// where Streamable HTTP and stdio kill them at once. The stream's end kills its calls.
func TestFaultSSEStreamCloseKillsSandbox(t *testing.T) {
	bin := needSandbox(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "serve", "--sse", addr)
	cmd.Env = soak.ServerEnv(t.TempDir(), "AIRLOCK_POOL_SIZE=0", "AIRLOCK_AUDIT=off")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	url := loggedEndpoint(t, stderr, nil)
	open := func() *client.Client {
		c, err := client.NewSSEMCPClient(url)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := open()
	mark := marker(t)
	_, done := startSleeper(t, c, mark)
	c.Close() // the stream closes with the call in flight
	<-done
	n, took := waitProcs(t, mark, 2*time.Second, func(n int) bool { return n == 0 })
	t.Logf("SSE stream closed: marked processes gone in %s", took.Round(time.Millisecond))
	if n != 0 {
		t.Fatalf("%d sandbox processes still running 2 s after the client closed its SSE stream", n)
	}
	c = open()
	defer c.Close()
	r, err := c.CallTool(context.Background(), runCall("print('still serving')", mark+"-after", 10))
	if err != nil || r.IsError {
		t.Fatalf("server not serving after the stream closed: %v %v", err, r)
	}
}
