// Command airlock-bench measures airlock as its users feel it (the report goes to stderr,
// like every airlock tool's output but the MCP channel): run_code over MCP stdio,
// cold and from the warm pool, interleaved in the same run with the bare interpreters it
// is compared against, plus parallel throughput and the server's memory. It prints a
// table and one line per performance goal saying whether it is met.
//
//	go run ./cmd/airlock-bench -airlock bin/airlock
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// language is one benchmarked language: how to run "print 1" bare and through airlock.
type language struct {
	name string
	bare []string
	code string
	gap  time.Duration // think time before a pooled call, so the pool has refilled
}

var languages = []language{
	{"python", []string{"/usr/bin/python3", "-c", "print(1)"}, "print(1)", 150 * time.Millisecond},
	{"javascript", []string{"/usr/bin/node", "-e", "console.log(1)"}, "console.log(1)", 300 * time.Millisecond},
	{"bash", []string{"/usr/bin/bash", "-c", "echo 1"}, "echo 1", 100 * time.Millisecond},
}

func main() {
	bin := flag.String("airlock", "bin/airlock", "the airlock binary to benchmark")
	rounds := flag.Int("n", 40, "latency samples per language and mode")
	parallel := flag.Int("parallel", 8, "concurrent clients in the throughput test")
	dur := flag.Duration("duration", 2*time.Second, "length of each throughput window")
	tputRounds := flag.Int("rounds", 5, "throughput rounds (each runs every window once)")
	compare := flag.String("compare", "", "another airlock binary (e.g. the previous build) whose cold and pooled throughput windows join the same rounds (with -cli-only: whose airlock run joins the CLI rounds)")
	envOnly := flag.Bool("environment-only", false, "run only the environment benchmark")
	cliOnly := flag.Bool("cli-only", false, "run only the CLI benchmark (airlock run FILE)")
	tputOnly := flag.Bool("throughput-only", false, "run only the throughput rounds (with -compare: an A/B of two builds)")
	latencyOnly := flag.Bool("latency-only", false, "run only the latency table (with -compare: the other build's cold and pooled calls in the same rounds) and its goals")
	load := flag.Duration("load", 0, "run only a cold python window this long against one server, for profiling it (perf, strace): its pid is printed first")
	flag.Parse()
	var err error
	if *cliOnly && *compare != "" {
		var this, other cliABStats
		var load [2]string
		if this, other, load, err = cliAB(*bin, *compare, *rounds); err == nil {
			printCLIAB(os.Stderr, this, other, load)
		}
	} else if *cliOnly {
		var c cliStats
		if c, err = cliBench(*bin, *rounds); err == nil {
			c.print(os.Stderr)
			ok, text := c.goal()
			fmt.Fprintf(os.Stderr, "  %-8s %s\n", map[bool]string{true: "met:", false: "NOT MET:"}[ok], text)
		}
	} else if *envOnly {
		var r float64
		if r, err = environmentBench(context.Background(), *bin, max(*rounds/4, 8)); err == nil {
			fmt.Fprintf(os.Stderr, "pooled in the environment %.3f× bare (goal ≤ 0.1×)\n", r)
		}
	} else if *load > 0 {
		err = loadWindow(context.Background(), *bin, *parallel, *load)
	} else if *latencyOnly {
		var results map[string]map[string]stats
		if results, err = latency(context.Background(), *bin, *compare, *rounds); err == nil {
			fmt.Fprintln(os.Stderr, "\ngoals:")
			latencyGoals(results)
		}
	} else if *tputOnly {
		fmt.Fprintf(os.Stderr, "throughput, python print(1), %d concurrent clients, %d rounds × %s, rotated; load average %s\n", *parallel, *tputRounds, *dur, loadavg())
		_, err = throughputRounds(context.Background(), *bin, *compare, *parallel, *tputRounds, *dur)
	} else {
		err = run(*bin, *compare, *rounds, *parallel, *tputRounds, *dur)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "airlock-bench:", err)
		os.Exit(1)
	}
}

// server is one `airlock serve` over stdio.
type server struct {
	cmd *exec.Cmd
	c   *client.Client
}

func startServer(ctx context.Context, bin string, args ...string) (*server, error) {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(abs, append([]string{"serve", "--log-level", "warn", "--languages", "python,javascript,bash"}, args...)...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + os.TempDir()}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := client.NewClient(transport.NewIO(stdout, stdin, io.NopCloser(strings.NewReader(""))))
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "airlock-bench", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	return &server{cmd: cmd, c: c}, nil
}

func (s *server) close() {
	s.c.Close()
	s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

// call runs code and returns the client-side latency.
func (s *server) call(ctx context.Context, lang, code string) (time.Duration, error) {
	return s.callWith(ctx, map[string]any{"code": code, "language": lang})
}

func (s *server) callWith(ctx context.Context, args map[string]any) (time.Duration, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_code"
	req.Params.Arguments = args
	t0 := time.Now()
	res, err := s.c.CallTool(ctx, req)
	d := time.Since(t0)
	if err != nil {
		return d, err
	}
	if res.IsError {
		return d, fmt.Errorf("run_code failed: %v", res.Content)
	}
	return d, nil
}

// runCPU runs code and returns the program's CPU time as the sandbox reports it
// (whole milliseconds, so half a millisecond is added: the mean of what truncation cut).
func (s *server) runCPU(ctx context.Context, lang, code string) (time.Duration, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_code"
	req.Params.Arguments = map[string]any{"code": code, "language": lang}
	res, err := s.c.CallTool(ctx, req)
	if err != nil {
		return 0, err
	}
	if res.IsError {
		return 0, fmt.Errorf("run_code failed: %v", res.Content)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var v struct {
		CPUMs int64 `json:"cpu_ms"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return 0, err
	}
	return time.Duration(v.CPUMs)*time.Millisecond + 500*time.Microsecond, nil
}

func (s *server) poolStats(ctx context.Context) (hits, ready, idleMemory int64) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "get_config"
	res, err := s.c.CallTool(ctx, req)
	if err != nil || res.StructuredContent == nil {
		return 0, 0, 0
	}
	b, _ := json.Marshal(res.StructuredContent)
	var v struct {
		Pool struct {
			Hits       int64 `json:"hits"`
			Ready      int64 `json:"ready"`
			IdleMemory int64 `json:"idle_memory"`
		} `json:"pool"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return 0, 0, 0
	}
	return v.Pool.Hits, v.Pool.Ready, v.Pool.IdleMemory
}

// poolSize is the pooled server's pool size per language.
const poolSize = 2

// waitPoolFull waits until the warm pool has want sandboxes ready, or for at most max.
func (s *server) waitPoolFull(ctx context.Context, want int, max time.Duration) {
	for deadline := time.Now().Add(max); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, ready, _ := s.poolStats(ctx); ready >= int64(want) {
			return
		}
	}
}

func bare(argv []string) (time.Duration, error) { return bareWith(argv, []string{}) }

func bareWith(argv, env []string) (time.Duration, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	// A clean environment, as the sandbox has: an inherited NODE_EXTRA_CA_CERTS alone
	// adds ~70 ms to every node start and would flatter the sandbox.
	cmd.Env = env
	t0 := time.Now()
	err := cmd.Run()
	return time.Since(t0), err
}

type stats struct{ p50, p90, p99 time.Duration }

func summarise(x []time.Duration) stats {
	sort.Slice(x, func(i, j int) bool { return x[i] < x[j] })
	at := func(q float64) time.Duration { return x[min(len(x)-1, int(q*float64(len(x))))] }
	return stats{at(0.5), at(0.9), at(0.99)}
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64)
}

func signedMS(d time.Duration) string {
	if d >= 0 {
		return "+" + ms(d)
	}
	return ms(d)
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

func run(bin, compare string, rounds, parallel, tputRounds int, dur time.Duration) error {
	ctx := context.Background()
	results, err := latency(ctx, bin, compare, rounds)
	if err != nil {
		return err
	}

	// Throughput: parallel clients as fast as they can, every window interleaved round
	// by round with the others.
	fmt.Fprintf(os.Stderr, "\nthroughput, python print(1), %d concurrent clients, %d rounds of (bare, bwrap, cold, pooled) × %s, rotated:\n", parallel, tputRounds, dur)
	tp, err := throughputRounds(ctx, bin, compare, parallel, tputRounds, dur)
	if err != nil {
		return err
	}

	// Memory: the server's resident size idle, after load, and after floods.
	mem, err := startServer(ctx, bin, "--pool-size", "0", "--max-parallel", strconv.Itoa(parallel))
	if err != nil {
		return err
	}
	rssIdle := rss(mem.cmd.Process.Pid)
	throughput(parallel, time.Second, func() error { _, err := mem.call(ctx, "python", "print(1)"); return err })
	rssLoad := hwm(mem.cmd.Process.Pid)
	// The server must not grow with output size beyond its caps: its peak RSS after a
	// 64 MiB flood on each stream must be what it is after output just over the cap
	// (2 MiB each), since both keep the same 1 MiB per stream.
	flood := "import sys\nfor _ in range(%d): sys.stdout.write('x' * (1 << 20)); sys.stderr.write('y' * (1 << 20))"
	// Both end as error results (output_limit for the flood): only the memory counts.
	_, _ = mem.call(ctx, "python", fmt.Sprintf(flood, 2))
	rssCap := hwm(mem.cmd.Process.Pid)
	_, _ = mem.call(ctx, "python", fmt.Sprintf(flood, 64))
	rssFlood := hwm(mem.cmd.Process.Pid)
	mem.close()
	idle, err := startServer(ctx, bin, "--pool-size", "2")
	if err != nil {
		return err
	}
	idle.waitPoolFull(ctx, 2*len(languages), 10*time.Second)
	time.Sleep(time.Second)
	idleCPU := treeCPU(idle.cmd.Process.Pid)
	time.Sleep(2 * time.Second)
	idleCPU = treeCPU(idle.cmd.Process.Pid) - idleCPU
	_, _, idleMem := idle.poolStats(ctx)
	idle.close()
	fmt.Fprintf(os.Stderr, "\nserver memory: idle RSS %.1f MiB, peak under load %.1f MiB; peak after 2×2 MiB of output %.1f MiB, after a 2×64 MiB flood %.1f MiB (cap 1 MiB per stream)\n",
		mib(rssIdle), mib(rssLoad), mib(rssCap), mib(rssFlood))
	fmt.Fprintf(os.Stderr, "warm pool idle cost (pool=2, 3 languages): %.1f MiB held by waiting sandboxes, %.1f ms CPU per second of the server tree while idle\n",
		mib(idleMem), float64(idleCPU.Microseconds())/1000/2)

	cli, cliErr := cliBench(bin, rounds)
	if cliErr != nil {
		fmt.Fprintf(os.Stderr, "\nCLI benchmark failed: %v\n", cliErr)
	} else {
		cli.print(os.Stderr)
	}

	envRatio, envErr := environmentBench(ctx, bin, max(rounds/4, 8))
	if envErr != nil {
		fmt.Fprintf(os.Stderr, "\nenvironment benchmark skipped: %v\n", envErr)
	}

	fmt.Fprintln(os.Stderr, "\ngoals:")
	if cliErr == nil {
		ok, text := cli.goal()
		goal(ok, "%s", text)
	}
	if envErr == nil {
		goal(envRatio <= 0.1, "pooled import pandas, matplotlib.pyplot in a preloaded environment, median %.3f× bare (goal ≤ 0.1×)", envRatio)
	}
	goal(tp.rounds >= 3 && tp.cgroupsOwn, "5 honest bench: %d throughput rounds, each window once per round in a rotated order; each server's cgroups its own: %s",
		tp.rounds, tp.cgroupNote)
	// Issue 24's goals: 1 throughput, 2 cold, 3 pooled (4, the CLI, has its own bench).
	if tp.bwrap != nil {
		r := medianRatio(tp.cold, tp.bwrap)
		goal(r >= 1, "1 throughput with %d clients: cold %.2f× bwrap's runs/s (median of the rounds' ratios; goal ≥ 1.00×), %.0f%% of bare (bwrap %.0f%%)",
			parallel, r, 100*medianRatio(tp.cold, tp.bare), 100*medianRatio(tp.bwrap, tp.bare))
	} else {
		goal(false, "1 throughput: not measured without bwrap (apt-get install bubblewrap)")
	}
	srvCPU, spawnCPU := tp.cold.perCall(tp.cold.cpu.server), tp.cold.perCall(tp.cold.cpu.spawned-tp.cold.cpu.program)
	goal(srvCPU <= 0.7, "1 budget: server CPU per cold call under load %.2f ms (goal ≤ 0.7 ms)", srvCPU)
	goal(spawnCPU <= 2, "1 budget: spawner + init CPU per cold call under load %.2f ms (goal ≤ 2 ms)", spawnCPU)
	latencyGoals(results)
	// Garbage-collector timing moves a peak by a few MiB; memory that followed the output
	// would grow by the flood's 124 extra MiB.
	goal(rssFlood-rssCap < 16<<20, "server peak RSS grew %.1f MiB from a capped output to a 32× larger flood (goal: under 16 MiB, bounded by the caps, not the output)", mib(rssFlood-rssCap))
	return nil
}

// goal prints one goal's verdict line.
func goal(ok bool, text string, args ...any) {
	verdict := "NOT MET"
	if ok {
		verdict = "met"
	}
	fmt.Fprintf(os.Stderr, "  %-8s %s\n", verdict+":", fmt.Sprintf(text, args...))
}

// latencyGoals prints the verdicts of the latency table: goal 2 (cold), goal 3 (pooled).
func latencyGoals(results map[string]map[string]stats) {
	py := results["python"]
	if py != nil {
		c50, c90 := ratio(py["cold"].p50, py["bare"].p50), ratio(py["cold"].p90, py["bare"].p90)
		goal(c50 <= 1.2 && c90 <= 1.3, "2 cold python median %.2f× bare (goal ≤ 1.2×), p90 %.2f× (goal ≤ 1.3×)", c50, c90)
		p50 := ratio(py["pooled"].p50, py["bare"].p50)
		goal(p50 <= 0.3, "3 pooled python median %.2f× bare (goal ≤ 0.3×)", p50)
	}
	if r := results["bash"]; r != nil {
		p50 := ratio(r["pooled"].p50, r["bare"].p50)
		goal(p50 <= 1.3, "3 pooled bash median %.2f× bare (goal ≤ 1.3×)", p50)
	}
	if r := results["javascript"]; r != nil {
		p50 := ratio(r["pooled"].p50, r["bare"].p50)
		goal(p50 <= 0.5, "pooled javascript median %.2f× bare (goal ≤ 0.5×, as python before)", p50)
	}
}

// latency runs the interleaved latency table (bare, bwrap, cold, pooled, and with compare
// the other build's cold and pooled, in the same rounds) and returns each language's stats.
func latency(ctx context.Context, bin, compare string, rounds int) (map[string]map[string]stats, error) {
	cold, err := startServer(ctx, bin, "--pool-size", "0")
	if err != nil {
		return nil, fmt.Errorf("cold server: %w", err)
	}
	defer cold.close()
	warm, err := startServer(ctx, bin, "--pool-size", strconv.Itoa(poolSize))
	if err != nil {
		return nil, fmt.Errorf("pooled server: %w", err)
	}
	defer warm.close()
	// With -compare, the other build's cold and pooled servers join every round.
	var coldB, warmB *server
	if compare != "" {
		if coldB, err = startServer(ctx, compare, "--pool-size", "0"); err != nil {
			return nil, fmt.Errorf("cold server of %s: %w", compare, err)
		}
		defer coldB.close()
		if warmB, err = startServer(ctx, compare, "--pool-size", strconv.Itoa(poolSize)); err != nil {
			return nil, fmt.Errorf("pooled server of %s: %w", compare, err)
		}
		defer warmB.close()
	}
	time.Sleep(time.Second) // let the pool fill

	order := "(bare, bwrap for python, cold, pooled)"
	if compare != "" {
		order = "(bare, bwrap for python, then each build's cold and pooled, the builds taking turns going first)"
	}
	fmt.Fprintf(os.Stderr, "airlock-bench: %d samples per cell, interleaved %s in one run; %d CPUs, load average %s\n\n", rounds, order, numCPU(), loadavg())
	fmt.Fprintf(os.Stderr, "%-11s %-7s %8s %8s %8s %9s %9s\n", "language", "mode", "p50 ms", "p90 ms", "p99 ms", "p50/bare", "p90/bare")
	results := map[string]map[string]stats{}
	for _, l := range languages {
		if _, err := os.Stat(l.bare[0]); err != nil {
			fmt.Fprintf(os.Stderr, "%-11s skipped: %s not installed\n", l.name, l.bare[0])
			continue
		}
		var b, c, p, bw, cB, pB []time.Duration
		// bwrap, where installed, in the same rounds as a peer's cold start (python only).
		bwrap := bwrapArgv(l.bare)
		if l.name != "python" {
			bwrap = nil
		}
		hits0, _, _ := warm.poolStats(ctx)
		for i := 0; i < rounds+2; i++ {
			// The pooled server refills after each call: a new interpreter start, whose
			// CPU would otherwise land on this round's bare and cold runs only.
			warm.waitPoolFull(ctx, poolSize*len(languages), 2*time.Second)
			if warmB != nil {
				warmB.waitPoolFull(ctx, poolSize*len(languages), 2*time.Second)
			}
			db, err := bare(l.bare)
			if err != nil {
				return nil, fmt.Errorf("bare %s: %w", l.name, err)
			}
			var dw time.Duration
			if bwrap != nil {
				if dw, err = bare(bwrap); err != nil {
					return nil, fmt.Errorf("bwrap %s: %w", l.name, err)
				}
			}
			// A build's cold call, then its pooled one. The pooled call's refill (a
			// sandbox and an interpreter's start) runs after its answer: a cold call right
			// behind it shared the CPUs with it, which cost the other build's cold calls
			// 1–5 ms (main against itself). So each cold call starts with both pools full.
			pair := func(c, w *server) (dc, dp time.Duration, err error) {
				warm.waitPoolFull(ctx, poolSize*len(languages), 2*time.Second)
				if warmB != nil {
					warmB.waitPoolFull(ctx, poolSize*len(languages), 2*time.Second)
				}
				if dc, err = c.call(ctx, l.name, l.code); err != nil {
					return 0, 0, fmt.Errorf("cold %s: %w", l.name, err)
				}
				time.Sleep(l.gap)
				if dp, err = w.call(ctx, l.name, l.code); err != nil {
					return 0, 0, fmt.Errorf("pooled %s: %w", l.name, err)
				}
				return dc, dp, nil
			}
			// With -compare the two builds take turns going first: whichever went first,
			// right behind the bare run, measured 0.5–1.5 ms faster here (i24y, both
			// builds in both roles).
			var dc, dp, dcB, dpB time.Duration
			if coldB != nil && i%2 == 1 {
				if dcB, dpB, err = pair(coldB, warmB); err != nil {
					return nil, fmt.Errorf("%w (compare)", err)
				}
			}
			if dc, dp, err = pair(cold, warm); err != nil {
				return nil, err
			}
			if coldB != nil && i%2 == 0 {
				if dcB, dpB, err = pair(coldB, warmB); err != nil {
					return nil, fmt.Errorf("%w (compare)", err)
				}
			}
			if i >= 2 { // the first rounds warm the page cache
				b, c, p = append(b, db), append(c, dc), append(p, dp)
				if coldB != nil {
					cB, pB = append(cB, dcB), append(pB, dpB)
				}
				if bwrap != nil {
					bw = append(bw, dw)
				}
			}
		}
		hits1, _, _ := warm.poolStats(ctx)
		// The sandbox's own cost, paired within each round so machine drift between rounds
		// cancels: the ratio to bare moves with how fast the bare interpreter starts that
		// day, this much less.
		dc, dp := make([]time.Duration, len(b)), make([]time.Duration, len(b))
		for i := range b {
			dc[i], dp[i] = c[i]-b[i], p[i]-b[i]
		}
		overCold, overPooled := summarise(dc).p50, summarise(dp).p50
		sb, sc, sp := summarise(b), summarise(c), summarise(p)
		results[l.name] = map[string]stats{"bare": sb, "cold": sc, "pooled": sp}
		fmt.Fprintf(os.Stderr, "%-11s %-7s %8s %8s %8s %9s %9s\n", l.name, "bare", ms(sb.p50), ms(sb.p90), ms(sb.p99), "1.00", "1.00")
		if len(bw) > 0 {
			sw := summarise(bw)
			results[l.name]["bwrap"] = sw
			fmt.Fprintf(os.Stderr, "%-11s %-7s %8s %8s %8s %9.2f %9.2f\n", "", "bwrap", ms(sw.p50), ms(sw.p90), ms(sw.p99), ratio(sw.p50, sb.p50), ratio(sw.p90, sb.p90))
		}
		fmt.Fprintf(os.Stderr, "%-11s %-7s %8s %8s %8s %9.2f %9.2f\n", "", "cold", ms(sc.p50), ms(sc.p90), ms(sc.p99), ratio(sc.p50, sb.p50), ratio(sc.p90, sb.p90))
		fmt.Fprintf(os.Stderr, "%-11s %-7s %8s %8s %8s %9.2f %9.2f   (%d/%d from the pool)\n", "", "pooled", ms(sp.p50), ms(sp.p90), ms(sp.p99), ratio(sp.p50, sb.p50), ratio(sp.p90, sb.p90), hits1-hits0, rounds+2)
		fmt.Fprintf(os.Stderr, "%-11s time over bare, median of per-round differences: cold %s ms, pooled %s ms\n", "", signedMS(overCold), signedMS(overPooled))
		if len(cB) > 0 {
			scB, spB := summarise(cB), summarise(pB)
			fmt.Fprintf(os.Stderr, "%-11s %-7s %8s %8s %8s %9.2f %9.2f   (-compare build)\n", "", "cold'", ms(scB.p50), ms(scB.p90), ms(scB.p99), ratio(scB.p50, sb.p50), ratio(scB.p90, sb.p90))
			fmt.Fprintf(os.Stderr, "%-11s %-7s %8s %8s %8s %9.2f %9.2f   (-compare build)\n", "", "pooled'", ms(spB.p50), ms(spB.p90), ms(spB.p99), ratio(spB.p50, sb.p50), ratio(spB.p90, sb.p90))
		}
	}
	return results, nil
}

// throughput runs fn from n goroutines for d and returns completions per second.
func throughput(n int, d time.Duration, fn func() error) float64 {
	var done, failed atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if fn() != nil {
					failed.Add(1)
					continue
				}
				done.Add(1)
			}
		}()
	}
	start := time.Now()
	wg.Wait()
	if f := failed.Load(); f > 0 {
		fmt.Fprintf(os.Stderr, "airlock-bench: %d calls failed during the throughput test\n", f)
	}
	return float64(done.Load()) / time.Since(start).Seconds()
}

func statusField(pid int, key string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, key+":") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				return n * 1024
			}
		}
	}
	return 0
}

func rss(pid int) int64 { return statusField(pid, "VmRSS") }
func hwm(pid int) int64 { return statusField(pid, "VmHWM") }

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// treeCPU is the CPU time of pid and every live descendant (the pool's sandboxes).
func treeCPU(root int) time.Duration {
	parent := map[int]int{}
	cpu := map[int]time.Duration{}
	eachProc("/proc", func(pid int, s statLine) { parent[pid], cpu[pid] = s.ppid, s.cpu.self })
	var total time.Duration
	for pid, t := range cpu {
		for p := pid; p > 1; p = parent[p] {
			if p == root {
				total += t
				break
			}
		}
	}
	return total
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func numCPU() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return strings.Count(string(b), "processor\t:")
}

// envImports is the environment benchmark's program: the imports a data-work call starts
// with.
const envImports = "import pandas, matplotlib.pyplot; print(1)"

// environmentBench compares a pooled call in an environment that preloads pandas and
// matplotlib.pyplot with the bare interpreter importing them, interleaved, and reports
// what the preloaded pool holds while idle. The environment is a venv over the system's
// site packages, as docs/environments.md builds one from Debian's packages.
func environmentBench(ctx context.Context, bin string, rounds int) (float64, error) {
	// Not under /tmp, which the sandbox cannot bind from; readable by the sandbox's user.
	dir, err := os.MkdirTemp("/var/tmp", "airlock-bench-env-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	// The bare interpreter keeps matplotlib's font cache between runs, as on a
	// workstation (without a config dir matplotlib rebuilds it every time, ~1 s here).
	bareArgv := []string{"/usr/bin/python3", "-c", envImports}
	bareEnv := []string{"MPLCONFIGDIR=" + filepath.Join(dir, "mpl")}
	cmd := exec.Command(bareArgv[0], bareArgv[1:]...)
	cmd.Env = bareEnv
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("the host python cannot import pandas and matplotlib (%w: %s); apt install python3-pandas python3-matplotlib", err, strings.TrimSpace(string(out)))
	}
	if err := os.Chmod(dir, 0o755); err != nil { //nolint:gosec // the sandbox's user must traverse it
		return 0, err
	}
	venv := filepath.Join(dir, "data")
	if out, err := exec.Command("/usr/bin/python3", "-m", "venv", "--without-pip", "--system-site-packages", venv).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("python3 -m venv: %w: %s (apt install python3-venv)", err, strings.TrimSpace(string(out)))
	}
	conf := filepath.Join(dir, "airlock.toml")
	toml := fmt.Sprintf("[environments.data]\nlanguage = \"python\"\npath = %q\npreload = [\"pandas\", \"matplotlib.pyplot\"]\n", venv)
	if err := os.WriteFile(conf, []byte(toml), 0o600); err != nil {
		return 0, err
	}
	// Two servers with python only and pool=1: without and with the environment, so the
	// difference in idle memory is the preloaded sandbox's.
	plain, err := startServer(ctx, bin, "--languages", "python", "--pool-size", "1")
	if err != nil {
		return 0, err
	}
	plain.waitPoolFull(ctx, 1, 10*time.Second)
	time.Sleep(500 * time.Millisecond)
	_, _, memPlain := plain.poolStats(ctx)
	plain.close()
	s, err := startServer(ctx, bin, "--config", conf, "--languages", "python", "--pool-size", "1")
	if err != nil {
		return 0, err
	}
	defer s.close()
	args := map[string]any{"code": envImports, "environment": "data"}
	var b, p []time.Duration
	hits0, _, _ := s.poolStats(ctx)
	var memEnv int64
	for i := 0; i < rounds+1; i++ {
		// A preloaded sandbox takes a second or two to prepare: wait for it, so the
		// refill's CPU does not land on the bare run.
		s.waitPoolFull(ctx, 2, 30*time.Second)
		time.Sleep(200 * time.Millisecond)
		if i == 0 {
			_, _, memEnv = s.poolStats(ctx)
		}
		db, err := bareWith(bareArgv, bareEnv)
		if err != nil {
			return 0, err
		}
		dp, err := s.callWith(ctx, args)
		if err != nil {
			return 0, fmt.Errorf("pooled call in the environment: %w", err)
		}
		if i >= 1 {
			b, p = append(b, db), append(p, dp)
		}
	}
	hits1, _, _ := s.poolStats(ctx)
	sb, sp := summarise(b), summarise(p)
	fmt.Fprintf(os.Stderr, "\nenvironment (venv over the system's pandas and matplotlib, preload pandas, matplotlib.pyplot), %d samples interleaved:\n", rounds)
	fmt.Fprintf(os.Stderr, "  bare /usr/bin/python3 -c '%s' (font cache kept)  p50 %s ms  p90 %s ms\n", envImports, ms(sb.p50), ms(sb.p90))
	fmt.Fprintf(os.Stderr, "  airlock pooled, environment data   p50 %s ms  p90 %s ms  (%.3f× bare; %d/%d from the pool)\n",
		ms(sp.p50), ms(sp.p90), ratio(sp.p50, sb.p50), hits1-hits0, rounds+1)
	fmt.Fprintf(os.Stderr, "  idle pool memory: %.1f MiB with the preloaded sandbox, %.1f MiB without: %.1f MiB for one preloaded sandbox\n",
		mib(memEnv), mib(memPlain), mib(memEnv-memPlain))
	return ratio(sp.p50, sb.p50), nil
}
