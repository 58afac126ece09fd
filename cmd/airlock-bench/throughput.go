package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-mcp/airlock/internal/soak"
)

// The throughput windows run round by round, each window once per round and in a
// rotated order, so the machine's drift (±10 points within minutes on a shared host)
// lands on every window alike and the per-round ratios compare like with like.

// window is one kind of throughput measurement: n clients calling fn as fast as they can.
type window struct {
	name string
	fn   func() (cpu time.Duration, err error) // one call; cpu: the program's, if known
	srv  *server                               // nil for bare and bwrap
	// bareCPU: the program's CPU is the bench's reaped children's (bare runs only; bwrap's
	// pid 1 does not wait for the program, whose CPU is then reaped by nobody).
	bareCPU bool

	calls, failed int64
	elapsed       time.Duration
	rates         []float64    // per round
	cpu           cpuSplit     // summed over the rounds
	machine       machineSplit // summed over the rounds
	// idle: no calls, only the machine's counters over the window's length, so the rate
	// of the host's other load can be taken out of the other windows.
	idle bool
}

// cpuSplit is CPU time by process, summed over a window's calls.
type cpuSplit struct {
	server, zygote, spawned, program, client time.Duration
	programCalls                             int64 // calls whose program CPU is known
}

// procCPU is what /proc/PID/stat says: the process's own CPU and its reaped children's.
type procCPU struct{ self, children time.Duration }

func readProcCPU(pid int) (procCPU, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procCPU{}, err
	}
	s, err := parseStat(b)
	return s.cpu, err
}

// zygoteOf finds the server's zygote: its child started as the sandbox init's name, which
// renames itself airlock-zygote.
func zygoteOf(serverPID int) int {
	zygote := 0
	eachProc("/proc", func(pid int, s statLine) {
		if zygote != 0 || s.ppid != serverPID {
			return
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if strings.HasPrefix(string(cmd), "airlock-zygote") || strings.HasPrefix(string(cmd), "airlock-sandbox-init") {
			zygote = pid
		}
	})
	return zygote
}

// snapshot is every counter a window's CPU split is computed from.
type snapshot struct {
	server, zygote procCPU
	zygotePID      int
	self, children time.Duration // the bench's own rusage
}

func takeSnapshot(srv *server) snapshot {
	s := snapshot{self: selfCPU(), children: childrenCPU()}
	if srv != nil {
		s.server, _ = readProcCPU(srv.cmd.Process.Pid)
		s.zygotePID = zygoteOf(srv.cmd.Process.Pid)
		if s.zygotePID > 0 {
			s.zygote, _ = readProcCPU(s.zygotePID)
		}
	}
	return s
}

// settle is the pause after each window: a finished sandbox's teardown (after its
// answer) and the pool's refill belong to the window that caused them, and the zygote
// reaps its spawners only once they have exited.
const settle = 300 * time.Millisecond

// runWindow runs w for d with n clients and adds its figures to w.
func (w *window) runWindow(n int, d time.Duration) {
	if w.idle {
		before := readMachine(true)
		time.Sleep(d + settle)
		w.machine.add(before, readMachine(false))
		return
	}
	before := takeSnapshot(w.srv)
	machineBefore := readMachine(true)
	var done, failed atomic.Int64
	var progCPU atomic.Int64
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				cpu, err := w.fn()
				if err != nil {
					failed.Add(1)
					continue
				}
				done.Add(1)
				progCPU.Add(int64(cpu))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	time.Sleep(settle)
	w.machine.add(machineBefore, readMachine(false))
	after := takeSnapshot(w.srv)
	calls := done.Load()
	w.calls += calls
	w.failed += failed.Load()
	w.elapsed += elapsed
	w.rates = append(w.rates, float64(calls)/elapsed.Seconds())
	w.cpu.client += after.self - before.self
	switch {
	case w.srv != nil:
		w.cpu.server += after.server.self - before.server.self
		if after.zygotePID != before.zygotePID {
			fmt.Fprintf(os.Stderr, "airlock-bench: the %s server's zygote changed during a window (pid %d → %d): its CPU is not counted\n",
				w.name, before.zygotePID, after.zygotePID)
		} else {
			w.cpu.zygote += after.zygote.self - before.zygote.self
			w.cpu.spawned += after.zygote.children - before.zygote.children
		}
		w.cpu.program += time.Duration(progCPU.Load())
		w.cpu.programCalls += calls
	case w.bareCPU:
		w.cpu.program += after.children - before.children
		w.cpu.programCalls += calls
	}
}

// perCall is d over the window's calls, in milliseconds.
func (w *window) perCall(d time.Duration) float64 {
	if w.calls == 0 {
		return 0
	}
	return float64(d.Microseconds()) / 1000 / float64(w.calls)
}

// medianRatio is the median over the rounds of w's rate over base's in the same round.
func medianRatio(w, base *window) float64 {
	var r []float64
	for i := range w.rates {
		if i < len(base.rates) && base.rates[i] > 0 {
			r = append(r, w.rates[i]/base.rates[i])
		}
	}
	if len(r) == 0 {
		return 0
	}
	sort.Float64s(r)
	return r[len(r)/2]
}

func minMax(x []float64) (float64, float64) {
	lo, hi := x[0], x[0]
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

// throughputResult is what the goals need from the throughput rounds.
type throughputResult struct {
	bare, bwrap, cold, pooled *window
	idle                      *window // no calls: the host's other load
	// baseCold, basePooled: the -compare binary's windows, in the same rounds.
	baseCold, basePooled *window
	rounds               int
	// cgroupsOwn: each server made its sandboxes' cgroups in dirs of its own, which
	// were gone after it exited; cgroupNote says what was found.
	cgroupsOwn bool
	cgroupNote string
}

// throughputRounds interleaves the windows round by round and prints the rates and the
// CPU per call by process.
func throughputRounds(ctx context.Context, bin, compare string, parallel, rounds int, d time.Duration) (*throughputResult, error) {
	py := languages[0]
	cold, err := startServer(ctx, bin, "--languages", "python", "--pool-size", "0", "--max-parallel", strconv.Itoa(parallel))
	if err != nil {
		return nil, fmt.Errorf("cold throughput server: %w", err)
	}
	closed := false
	defer func() {
		if !closed {
			cold.close()
		}
	}()
	pooled, err := startServer(ctx, bin, "--languages", "python", "--pool-size", strconv.Itoa(poolSize), "--max-parallel", strconv.Itoa(parallel))
	if err != nil {
		return nil, fmt.Errorf("pooled throughput server: %w", err)
	}
	defer func() {
		if !closed {
			pooled.close()
		}
	}()
	pooled.waitPoolFull(ctx, poolSize, 10*time.Second)

	res := &throughputResult{
		rounds: rounds,
		bare: &window{name: "bare python", bareCPU: true, fn: func() (time.Duration, error) {
			_, err := bare(py.bare)
			return 0, err
		}},
		cold: &window{name: "airlock cold", srv: cold, fn: func() (time.Duration, error) {
			return cold.runCPU(ctx, "python", py.code)
		}},
		pooled: &window{name: fmt.Sprintf("airlock pool=%d", poolSize), srv: pooled, fn: func() (time.Duration, error) {
			return pooled.runCPU(ctx, "python", py.code)
		}},
	}
	windows := []*window{res.bare}
	if argv := bwrapArgv(py.bare); argv != nil {
		res.bwrap = &window{name: "bwrap python", fn: func() (time.Duration, error) {
			_, err := bare(argv)
			return 0, err
		}}
		windows = append(windows, res.bwrap)
	} else {
		fmt.Fprintln(os.Stderr, "  bwrap not installed (apt-get install bubblewrap): no bwrap window")
	}
	windows = append(windows, res.cold, res.pooled)
	if compare != "" {
		bc, err := startServer(ctx, compare, "--languages", "python", "--pool-size", "0", "--max-parallel", strconv.Itoa(parallel))
		if err != nil {
			return nil, fmt.Errorf("cold server of %s: %w", compare, err)
		}
		defer bc.close()
		bp, err := startServer(ctx, compare, "--languages", "python", "--pool-size", strconv.Itoa(poolSize), "--max-parallel", strconv.Itoa(parallel))
		if err != nil {
			return nil, fmt.Errorf("pooled server of %s: %w", compare, err)
		}
		defer bp.close()
		bp.waitPoolFull(ctx, poolSize, 10*time.Second)
		res.baseCold = &window{name: "compare cold", srv: bc, fn: func() (time.Duration, error) { return bc.runCPU(ctx, "python", py.code) }}
		res.basePooled = &window{name: "compare pooled", srv: bp, fn: func() (time.Duration, error) { return bp.runCPU(ctx, "python", py.code) }}
		windows = append(windows, res.baseCold, res.basePooled)
		fmt.Fprintf(os.Stderr, "  compare: %s, in the same rounds\n", compare)
	}
	for w := range windows { // warm the page cache and the servers
		_, _ = windows[w].fn()
	}
	res.idle = &window{name: "idle", idle: true}
	rotation := append(slices.Clone(windows), res.idle)
	for r := 0; r < rounds; r++ {
		for i := range rotation {
			rotation[(r+i)%len(rotation)].runWindow(parallel, d)
		}
	}
	coldDirs, pooledDirs := soak.CgroupBases(cold.cmd.Process.Pid), soak.CgroupBases(pooled.cmd.Process.Pid)
	closed = true
	cold.close()
	pooled.close()
	res.cgroupsOwn, res.cgroupNote = ownCgroups(coldDirs, pooledDirs)
	fmt.Fprintf(os.Stderr, "%-16s %9s %9s %9s %11s\n", "", "runs/s", "% bare", "× bwrap", "rounds")
	for _, w := range windows {
		rate := float64(w.calls) / w.elapsed.Seconds()
		lo, hi := minMax(w.rates)
		vsBwrap := "–"
		if res.bwrap != nil {
			vsBwrap = fmt.Sprintf("%.2f", medianRatio(w, res.bwrap))
		}
		fmt.Fprintf(os.Stderr, "  %-14s %9.1f %8.0f%% %9s %5.0f–%.0f/s\n", w.name, rate, 100*medianRatio(w, res.bare), vsBwrap, lo, hi)
		if w.failed > 0 {
			fmt.Fprintf(os.Stderr, "  %-14s %d calls failed\n", "", w.failed)
		}
	}
	fmt.Fprintln(os.Stderr, "  (% bare and × bwrap: medians of the per-round ratios)")
	fmt.Fprintf(os.Stderr, "\nCPU per call, ms (summed over the rounds, divided by the calls):\n")
	fmt.Fprintf(os.Stderr, "  %-14s %7s %7s %14s %8s %8s %9s\n", "", "server", "zygote", "spawner+init", "program", "total", "(client)")
	for _, w := range windows {
		c := w.cpu
		switch {
		case w.srv != nil:
			spawner := c.spawned - c.program
			fmt.Fprintf(os.Stderr, "  %-14s %7.2f %7.2f %14.2f %8.2f %8.2f %9.2f\n", w.name, w.perCall(c.server), w.perCall(c.zygote),
				w.perCall(spawner), w.perCall(c.program), w.perCall(c.server+c.zygote+c.spawned), w.perCall(c.client))
		case w.bareCPU:
			fmt.Fprintf(os.Stderr, "  %-14s %7s %7s %14s %8.2f %8.2f %9.2f\n", w.name, "–", "–", "–", w.perCall(c.program), w.perCall(c.program), w.perCall(c.client))
		default:
			fmt.Fprintf(os.Stderr, "  %-14s %7s %7s %14s %8s %8s %9.2f\n", w.name, "–", "–", "–", "?", "?", w.perCall(c.client))
		}
	}
	fmt.Fprintln(os.Stderr, "  server: the airlock process; zygote: its fork helper; spawner+init: each sandbox's spawner and")
	fmt.Fprintln(os.Stderr, "  pid 1 (the zygote's reaped children, less the program); program: the interpreter and its children")
	fmt.Fprintln(os.Stderr, "  as the sandbox's init counts them (cpu_ms, whole ms, +0.5 ms each for the truncation); bare: the")
	fmt.Fprintln(os.Stderr, "  bench's reaped children; bwrap's pid 1 reaps nothing into rusage, so its CPU is unknown (?): see the")
	fmt.Fprintln(os.Stderr, "  whole machine's figures below.")
	fmt.Fprintln(os.Stderr, "  Pooled: the refills' CPU is in its window (a refill per call). Ticks are 10 ms: small windows are noisy.")
	printMachine(windows, res.idle)
	return res, nil
}

// printMachine prints each window's whole-machine CPU per call, raw and with the idle
// window's rate taken out, and the kernel threads' part of it.
func printMachine(windows []*window, idle *window) {
	im := idle.machine
	perSec := func(d time.Duration) float64 {
		if im.wall <= 0 {
			return 0
		}
		return float64(d.Microseconds()) / 1000 / im.wall.Seconds()
	}
	fmt.Fprintf(os.Stderr, "\nWhole machine's CPU per call, ms (/proc/stat and the kernel threads over each window and its settle):\n")
	fmt.Fprintf(os.Stderr, "  %-14s %9s %9s %12s %12s\n", "", "busy", "kthreads", "busy−idle", "kthreads−idle")
	for _, w := range windows {
		busy, kt := w.machine.lessIdle(im)
		fmt.Fprintf(os.Stderr, "  %-14s %9.2f %9.2f %12.2f %12.2f\n", w.name, w.perCall(w.machine.busy), w.perCall(w.machine.kthreads), w.perCall(busy), w.perCall(kt))
	}
	fmt.Fprintf(os.Stderr, "  idle window (no calls, every round): %.0f ms busy and %.1f ms in kernel threads per second\n", perSec(im.busy), perSec(im.kthreads))
	fmt.Fprintln(os.Stderr, "  busy: all CPUs' user+nice+system+irq+softirq, so the bench's client, every sandbox process, bwrap's")
	fmt.Fprintln(os.Stderr, "  program and the kernel's deferred work (cleanup_net, memcg, mntput in kworkers) AND the host's other")
	fmt.Fprintln(os.Stderr, "  load; kthreads: the kernel threads' own time (kthreadd's children). −idle: less the idle window's rate")
	fmt.Fprintln(os.Stderr, "  over the window's length; other load yields CPU to a full window, so −idle takes out too much on a")
	fmt.Fprintln(os.Stderr, "  busy host: these figures are meaningful on a quiet one only (see the load average).")
}

// bwrapArgv wraps argv in bubblewrap with the namespaces it offers (user, pid, net, ipc,
// uts, cgroup, mount), a read-only /usr and a fresh /proc, /dev and /tmp, or returns nil
// when bwrap is not installed. It has no seccomp filter and no cgroup: it isolates less.
func bwrapArgv(argv []string) []string {
	const bwrap = "/usr/bin/bwrap"
	if _, err := os.Stat(bwrap); err != nil {
		return nil
	}
	return append([]string{bwrap, "--unshare-all", "--die-with-parent", "--new-session",
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
		"--symlink", "usr/bin", "/bin", "--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--clearenv", "--"}, argv...)
}

// ownCgroups checks two servers' cgroup dirs: some, none shared, and none left after
// both exited.
func ownCgroups(a, b []string) (bool, string) {
	if len(a) == 0 || len(b) == 0 {
		return false, "a server made no cgroup dir of its own (no cgroups on this host?)"
	}
	for _, d := range a {
		if slices.Contains(b, d) {
			return false, "two servers share " + d
		}
	}
	var left []string
	for _, d := range append(slices.Clone(a), b...) {
		if _, err := os.Stat(d); err == nil {
			left = append(left, d)
		}
	}
	if len(left) > 0 {
		return false, fmt.Sprintf("left after exit: %v", left)
	}
	return true, fmt.Sprintf("e.g. %s and %s, both removed at exit", a[0], b[0])
}

// loadWindow runs one cold python window of length d against one server and prints its
// rate and CPU per call: a steady load to profile the server under (its pid comes first).
func loadWindow(ctx context.Context, bin string, parallel int, d time.Duration) error {
	srv, err := startServer(ctx, bin, "--languages", "python", "--pool-size", "0", "--max-parallel", strconv.Itoa(parallel))
	if err != nil {
		return fmt.Errorf("cold server: %w", err)
	}
	defer srv.close()
	py := languages[0]
	w := &window{name: "airlock cold", srv: srv, fn: func() (time.Duration, error) { return srv.runCPU(ctx, "python", py.code) }}
	_, _ = w.fn()
	fmt.Fprintf(os.Stderr, "server pid %d, zygote pid %d; load average %s\n", srv.cmd.Process.Pid, zygoteOf(srv.cmd.Process.Pid), loadavg())
	w.runWindow(parallel, d)
	c := w.cpu
	fmt.Fprintf(os.Stderr, "%d calls, %.1f/s, %d failed; CPU per call, ms: server %.2f, zygote %.2f, spawner+init %.2f, program %.2f; whole machine %.2f, kernel threads %.2f (with the host's other load)\n",
		w.calls, float64(w.calls)/w.elapsed.Seconds(), w.failed, w.perCall(c.server), w.perCall(c.zygote), w.perCall(c.spawned-c.program), w.perCall(c.program),
		w.perCall(w.machine.busy), w.perCall(w.machine.kthreads))
	return nil
}
