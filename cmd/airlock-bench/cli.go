package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// The CLI window (goal 4): `airlock run FILE` as a shell user feels it, process start to
// exit, against bare python on the same file. Each round runs, in this order, bare
// python, `airlock run --recheck` (every check in full: the cold start, as with no
// stamp) and `airlock run` (the stamps of a recent pass reused: a warm start). cliRound
// is one round, for an interleaved loop; cliBench loops it on its own.

// cliSample is one round.
type cliSample struct{ bare, cold, warm time.Duration }

// cliProgram writes the benchmarked program to a file and returns its path.
func cliProgram() (string, func(), error) {
	dir, err := os.MkdirTemp("", "airlock-bench-cli")
	if err != nil {
		return "", nil, err
	}
	p := filepath.Join(dir, "print1.py")
	if err := os.WriteFile(p, []byte("print(1)\n"), 0o600); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return p, func() { os.RemoveAll(dir) }, nil
}

// cliRun times one `airlock run [flags] FILE` with the bench's environment (no AIRLOCK_*
// setting of the caller's leaks in).
func cliRun(bin, file string, flags ...string) (time.Duration, error) {
	cmd := exec.Command(bin, append(append([]string{"run"}, flags...), file)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	t0 := time.Now()
	err := cmd.Run()
	return time.Since(t0), err
}

// cliRound runs one round of the CLI window.
func cliRound(bin, file string) (cliSample, error) {
	var s cliSample
	var err error
	if s.bare, err = bare([]string{"/usr/bin/python3", file}); err != nil {
		return s, fmt.Errorf("bare python: %w", err)
	}
	if s.cold, err = cliRun(bin, file, "--recheck"); err != nil {
		return s, fmt.Errorf("airlock run --recheck: %w", err)
	}
	if s.warm, err = cliRun(bin, file); err != nil {
		return s, fmt.Errorf("airlock run: %w", err)
	}
	return s, nil
}

// cliStats summarises the CLI window: each column's quantiles, and the median of the
// per-round ratios to bare (drift between rounds cancels).
type cliStats struct {
	bare, cold, warm     stats
	coldRatio, warmRatio float64
	rounds               int
}

func summariseCLI(samples []cliSample) cliStats {
	var b, c, w []time.Duration
	var rc, rw []time.Duration // ratios ×1000, as durations to reuse summarise
	for _, s := range samples {
		b, c, w = append(b, s.bare), append(c, s.cold), append(w, s.warm)
		rc = append(rc, time.Duration(1000*ratio(s.cold, s.bare)))
		rw = append(rw, time.Duration(1000*ratio(s.warm, s.bare)))
	}
	return cliStats{bare: summarise(b), cold: summarise(c), warm: summarise(w),
		coldRatio: float64(summarise(rc).p50) / 1000, warmRatio: float64(summarise(rw).p50) / 1000, rounds: len(samples)}
}

// cliBench runs rounds rounds of the CLI window (after two that warm the page cache).
func cliBench(bin string, rounds int) (cliStats, error) {
	file, cleanup, err := cliProgram()
	if err != nil {
		return cliStats{}, err
	}
	defer cleanup()
	var samples []cliSample
	for i := 0; i < rounds+2; i++ {
		s, err := cliRound(bin, file)
		if err != nil {
			return cliStats{}, err
		}
		if i >= 2 {
			samples = append(samples, s)
		}
	}
	return summariseCLI(samples), nil
}

func (c cliStats) print(w io.Writer) {
	fmt.Fprintf(w, "\nairlock run FILE (CLI), python print(1), %d interleaved rounds (bare, run --recheck, run):\n", c.rounds)
	fmt.Fprintf(w, "  %-26s %8s %8s %8s %14s\n", "", "p50 ms", "p90 ms", "p99 ms", "ratio (median)")
	fmt.Fprintf(w, "  %-26s %8s %8s %8s %14s\n", "bare python", ms(c.bare.p50), ms(c.bare.p90), ms(c.bare.p99), "1.00")
	fmt.Fprintf(w, "  %-26s %8s %8s %8s %14.2f\n", "run, checks in full (cold)", ms(c.cold.p50), ms(c.cold.p90), ms(c.cold.p99), c.coldRatio)
	fmt.Fprintf(w, "  %-26s %8s %8s %8s %14.2f\n", "run, stamps reused (warm)", ms(c.warm.p50), ms(c.warm.p90), ms(c.warm.p99), c.warmRatio)
}

// goal is goal 4's verdict: the usual `airlock run` (a recent pass reused) ≤ 1.5× bare.
func (c cliStats) goal() (bool, string) {
	return c.warmRatio <= 1.5, fmt.Sprintf("airlock run FILE median %.2f× bare python with a recent self-check reused, %.2f× with every check in full (goal ≤ 1.5×)", c.warmRatio, c.coldRatio)
}
