package probe

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/airlock-mcp/airlock/egress"
	"github.com/airlock-mcp/airlock/sandbox"
)

// Host-side halves of the probes: what the host plants before a run and what it checks
// after, so a verdict does not rest on the word of the program being tested.

// hostSecret plants a fresh secret in the server user's home and in the host's /tmp,
// world-readable, so only the sandbox's view of the filesystem stands between it and the
// program. The program is told the paths, never the content.
func hostSecret(a *attempt) error {
	a.secret = "airlock-probe-secret-" + randHex(16)
	var paths []string
	dirs := []string{os.TempDir(), "/tmp"}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append([]string{home}, dirs...)
	}
	for _, dir := range dirs {
		p := filepath.Join(dir, ".airlock-probe-secret-"+randHex(4))
		if err := os.WriteFile(p, []byte(a.secret+"\n"), 0o644); err != nil {
			continue // a read-only home is no reason to skip the others
		}
		a.onCleanup(func() { os.Remove(p) })
		paths = append(paths, p)
	}
	if len(paths) == 0 {
		return errors.New("could not write a secret file in the home directory or /tmp")
	}
	a.args["paths"] = paths
	return nil
}

func judgeSecret(a *attempt, res sandbox.Result, rep *programReport) (Status, string) {
	if rep == nil {
		return Errored, noReport(res)
	}
	for _, f := range rep.Found {
		if strings.Contains(f.Data, a.secret) {
			return Failed, "read the host secret through " + f.Path
		}
	}
	return Passed, rep.Detail
}

// hostTargets names files the program will try to create outside its workspace, and
// plants a world-writable host file in /tmp for it to overwrite.
func hostTargets(a *attempt) error {
	tag := "airlock-probe-" + randHex(6)
	existing := filepath.Join("/tmp", tag)
	orig := "original " + tag
	if err := os.WriteFile(existing, []byte(orig), 0o666); err != nil {
		return err
	}
	if err := os.Chmod(existing, 0o666); err != nil { // past the umask
		return err
	}
	create := []string{"/" + tag + "-new", "/usr/" + tag + "-new", "/etc/" + tag + "-new", "/tmp/" + tag + "-new"}
	a.files = map[string]string{existing: orig}
	for _, p := range create {
		a.files[p] = ""
	}
	a.onCleanup(func() {
		for p := range a.files {
			os.Remove(p)
		}
	})
	a.args["create"] = create
	a.args["existing"] = existing
	return nil
}

func judgeWrites(a *attempt, res sandbox.Result, rep *programReport) (Status, string) {
	var changed []string
	for p, want := range a.files {
		got, err := os.ReadFile(p)
		switch {
		case want == "" && err == nil:
			changed = append(changed, "created "+p)
		case want != "" && (err != nil || string(got) != want):
			changed = append(changed, "changed "+p)
		}
	}
	if len(changed) > 0 {
		return Failed, "host files touched: " + strings.Join(changed, ", ")
	}
	if rep == nil {
		return Errored, noReport(res)
	}
	return Passed, "host files untouched; " + rep.Detail
}

// hostSleeper starts a host process carrying a marker, for the program to look for.
func hostSleeper(a *attempt) error {
	marker := a.newMarker()
	cmd := exec.Command("/bin/sleep", "30")
	cmd.Args[0] = marker
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start a host sleeper: %w", err)
	}
	a.onCleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return nil
}

// procsWith lists host pids, other than this process, whose command line holds marker
// or whose name is marker.
func procsWith(marker string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if bytes.Contains(cmd, []byte(marker)) || string(bytes.TrimSpace(comm)) == marker {
			pids = append(pids, pid)
		}
	}
	return pids
}

// judgeSurvivors looks for the run's processes on the host once Run has returned, and
// kills any it finds.
func judgeSurvivors(a *attempt, res sandbox.Result, rep *programReport) (Status, string) {
	if pids := procsWith(a.marker); len(pids) > 0 {
		for _, pid := range pids {
			signalPid(pid, syscall.SIGKILL)
		}
		return Failed, fmt.Sprintf("%d process(es) of the run outlived it on the host (pids %v, killed by the probe)", len(pids), pids)
	}
	if rep == nil || !rep.Started {
		return Errored, "the detached grandchild did not start: " + noReport(res)
	}
	return Passed, fmt.Sprintf("run ended %s after %s; no process of it left on the host", res.Status, res.Wall.Round(time.Millisecond))
}

func judgeMemory(a *attempt, res sandbox.Result, rep *programReport) (Status, string) {
	if res.Status == sandbox.StatusMemoryLimit {
		return Passed, fmt.Sprintf("stopped with memory_limit at %d MiB (peak %d MiB): %s", a.limits.Memory>>20, res.PeakMemory>>20, res.Detail)
	}
	return byProgram(a, res, rep)
}

func judgeTimeout(a *attempt, res sandbox.Result, rep *programReport) (Status, string) {
	if res.Status == sandbox.StatusTimeout {
		return Passed, fmt.Sprintf("stopped with timeout after %s (limit %s)", res.Wall.Round(time.Millisecond), a.limits.Wall)
	}
	if rep == nil {
		return Errored, noReport(res)
	}
	return Failed, fmt.Sprintf("ended %s after %s, past the %s limit: %s", res.Status, res.Wall.Round(time.Millisecond), a.limits.Wall, rep.Detail)
}

func judgeFlood(a *attempt, res sandbox.Result, _ *programReport) (Status, string) {
	wrote := 8 * a.limits.Output
	kept := int64(len(res.Stdout.Head) + len(res.Stdout.Tail))
	switch {
	case res.Status == sandbox.StatusOutputLimit:
		return Passed, fmt.Sprintf("stopped with output_limit; kept %d bytes, counted %d", kept, res.Stdout.Total)
	case kept > 2*a.limits.Output:
		return Failed, fmt.Sprintf("kept %d bytes of stdout, the cap is %d", kept, a.limits.Output)
	case res.Stdout.Total < wrote:
		return Errored, fmt.Sprintf("the program wrote %d bytes but %d were counted (%s)", wrote, res.Stdout.Total, noReport(res))
	}
	return Passed, fmt.Sprintf("kept %d of %d bytes (cap %d), true size counted", kept, res.Stdout.Total, a.limits.Output)
}

// listenTCP opens a host listener the program will try to reach; any connection it
// accepts is an escape, whatever the program says.
func listenTCP(network, addr string) func(a *attempt) error {
	return func(a *attempt) error {
		l, err := net.Listen(network, addr)
		if err != nil {
			return fmt.Errorf("host listener %s %s (no such loopback here?): %w", network, addr, err)
		}
		a.args["port"] = l.Addr().(*net.TCPAddr).Port
		accept(a, l)
		return nil
	}
}

// bridgeArgs gives the egress probe a host listener to aim at, the bridge's port, and
// the mode it runs under.
func bridgeArgs(a *attempt) error {
	if err := listenTCP("tcp4", "127.0.0.1:0")(a); err != nil {
		return err
	}
	a.args["bridge"] = egress.ProxyPort
	a.args["allowlist"] = a.network == sandbox.NetworkAllowlist
	return nil
}

func listenAbstract(a *attempt) error {
	name := "airlock-probe-" + randHex(8)
	l, err := net.Listen("unix", "@"+name)
	if err != nil {
		return fmt.Errorf("host abstract socket: %w", err)
	}
	a.args["name"] = name
	accept(a, l)
	return nil
}

func accept(a *attempt, l net.Listener) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			a.hit("accepted a connection from " + c.RemoteAddr().String())
			c.Close()
		}
	}()
	a.onCleanup(func() { l.Close(); <-done })
}

func listenUDP(a *attempt) error {
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("host udp listener: %w", err)
	}
	a.args["port"] = c.LocalAddr().(*net.UDPAddr).Port
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64)
		for {
			_, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			a.hit("received a datagram from " + from.String())
		}
	}()
	a.onCleanup(func() { c.Close(); <-done })
	return nil
}

func judgeListener(a *attempt, res sandbox.Result, rep *programReport) (Status, string) {
	if hits := a.hitList(); len(hits) > 0 {
		return Failed, "the host listener " + strings.Join(hits, "; ")
	}
	return byProgram(a, res, rep)
}

// dnsServers hands the program the host's resolvers plus two public ones: an answer from
// any of them means the sandbox reaches the network. The host's are named by their place
// in resolv.conf in what the program reports (labels): the report goes to any client of
// probe_sandbox, and the addresses are the host's network, not the sandbox's.
func dnsServers(a *attempt) error {
	servers := []string{}
	if f, err := os.Open("/etc/resolv.conf"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == "nameserver" {
				servers = append(servers, strings.SplitN(fields[1], "%", 2)[0])
			}
		}
		f.Close()
	}
	labels := make([]string, len(servers))
	for i := range servers {
		labels[i] = fmt.Sprintf("host resolver %d", i+1)
	}
	a.args["servers"] = append(servers, "1.1.1.1", "8.8.8.8")
	a.args["labels"] = append(labels, "1.1.1.1", "8.8.8.8")
	return nil
}

// watchCredentials finds the program on the host by its marker once it is waiting (it
// catches SIGUSR1 first), reads its host-side credentials, then releases it.
func watchCredentials(ctx context.Context, a *attempt) func() {
	if a.env.goos != "linux" {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			for _, pid := range procsWith(a.marker) {
				st := procStatus(pid)
				if cgt, err := strconv.ParseUint(st["SigCgt"], 16, 64); err != nil || cgt&(1<<(int(sigRelease)-1)) == 0 {
					continue
				}
				a.mu.Lock()
				a.hostCred = st["Uid"]
				a.mu.Unlock()
				signalPid(pid, sigRelease)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

func procStatus(pid int) map[string]string {
	out := map[string]string{}
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

func judgeUID(a *attempt, res sandbox.Result, rep *programReport) (Status, string) {
	st, detail := byProgram(a, res, rep)
	if st != Passed && st != Failed {
		return st, detail
	}
	if a.env.goos != "linux" {
		return st, detail + " (host-side check needs /proc)"
	}
	a.mu.Lock()
	cred := a.hostCred
	a.mu.Unlock()
	if cred == "" {
		return Errored, detail + "; the host did not find the program to check its host uid"
	}
	for _, id := range strings.Fields(cred) {
		if id == "0" {
			return Failed, detail + "; on the host the program runs as uid " + cred
		}
	}
	return st, detail + "; host uid " + cred
}

// envSecret puts a fresh secret in the server's own environment for the length of the
// run. Only its name prefix is what the program looks for.
func envSecret(a *attempt) error {
	name := "AIRLOCK_PROBE_SECRET_" + strings.ToUpper(randHex(6))
	if err := os.Setenv(name, randHex(16)); err != nil {
		return err
	}
	a.onCleanup(func() { os.Unsetenv(name) })
	return nil
}

// initEnv are the variables every sandbox's init sets itself (program_linux.c's base
// environment; the darwin plan's), whose values a server's may share by chance
// (TMPDIR=/tmp, LANG=C.UTF-8).
var initEnv = []string{"PATH", "HOME", "TMPDIR", "LANG", "USER", "LOGNAME"}

// judgeEnv fails a program that sees the planted secret, or any variable of the server's
// own environment with the server's value that the sandbox does not set itself: the
// processes that start programs are started with the server, so a leak of theirs passes
// on the server's environment of then, which the planted secret is not in. The detail
// names the variables, never their values (they may be the server's secrets).
func judgeEnv(a *attempt, res sandbox.Result, rep *programReport) (Status, string) {
	if rep == nil {
		return Errored, noReport(res)
	}
	server := map[string]bool{}
	for _, kv := range os.Environ() {
		server[kv] = true
	}
	var leaked []string
	for _, f := range rep.Found {
		pair := f.Path + "=" + f.Data
		switch {
		case strings.HasPrefix(f.Path, "AIRLOCK_PROBE_SECRET"):
			leaked = append(leaked, f.Path)
		case server[pair] && !a.sandboxEnv[pair] && !slices.Contains(initEnv, f.Path):
			leaked = append(leaked, f.Path)
		}
	}
	if len(leaked) > 0 {
		return Failed, fmt.Sprintf("the server's environment reached the program: %s", strings.Join(leaked, ", "))
	}
	return byProgram(a, res, rep)
}

// leakFD opens a descriptor in the server without O_CLOEXEC for the length of the run,
// the way a careless library would; the sandbox must not pass it on.
func leakFD(a *attempt) error {
	fd, err := syscall.Open(os.DevNull, syscall.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("open a descriptor without O_CLOEXEC: %w", err)
	}
	a.onCleanup(func() { syscall.Close(fd) })
	return nil
}
