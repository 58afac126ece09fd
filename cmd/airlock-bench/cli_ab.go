package main

import (
	"fmt"
	"io"
	"sort"
	"time"
)

// The CLI A/B (goal 4, `-cli-only -compare BIN`): each round runs bare python, this
// build's `airlock run`, bare python again, the other build's `airlock run`, so every
// run has its own bare neighbour and both builds see the same drift of a shared machine.
// Each run's ratio is to the bare run just before it; the verdict is on this build's
// median and p90 of those ratios. Both builds reuse their own recent self-check
// (stamps are keyed by the binary): the usual `airlock run`.

// cliABStats is one build's column of the A/B.
type cliABStats struct {
	name     string
	run      stats   // this build's run times
	p50, p90 float64 // ratio to the bare run before it
	bare     stats
	ratios   []float64
	runs     []time.Duration
}

func (s *cliABStats) add(bareT, runT time.Duration) {
	s.ratios = append(s.ratios, ratio(runT, bareT))
	s.runs = append(s.runs, runT)
}

func (s *cliABStats) finish(bares []time.Duration) {
	sort.Float64s(s.ratios)
	at := func(q float64) float64 { return s.ratios[min(len(s.ratios)-1, int(q*float64(len(s.ratios))))] }
	s.p50, s.p90 = at(0.5), at(0.9)
	s.run, s.bare = summarise(s.runs), summarise(bares)
}

// cliAB runs rounds A/B rounds (after two that warm the page cache and the stamps).
func cliAB(bin, compare string, rounds int) (this, other cliABStats, load [2]string, err error) {
	file, cleanup, err := cliProgram()
	if err != nil {
		return this, other, load, err
	}
	defer cleanup()
	this.name, other.name = bin, compare
	var bares []time.Duration
	load[0] = loadavg()
	for i := 0; i < rounds+2; i++ {
		for _, col := range []*cliABStats{&this, &other} {
			b, err := bare([]string{"/usr/bin/python3", file})
			if err != nil {
				return this, other, load, fmt.Errorf("bare python: %w", err)
			}
			r, err := cliRun(col.name, file)
			if err != nil {
				return this, other, load, fmt.Errorf("%s run: %w", col.name, err)
			}
			if i >= 2 {
				bares = append(bares, b)
				col.add(b, r)
			}
		}
	}
	load[1] = loadavg()
	this.finish(bares)
	other.finish(bares)
	return this, other, load, nil
}

func printCLIAB(w io.Writer, this, other cliABStats, load [2]string) {
	fmt.Fprintf(w, "\nairlock run FILE (CLI) A/B, python print(1), %d rounds of (bare, this, bare, other); load average %s → %s:\n",
		len(this.ratios), load[0], load[1])
	fmt.Fprintf(w, "  %-36s %8s %8s %12s %12s\n", "", "p50 ms", "p90 ms", "ratio p50", "ratio p90")
	fmt.Fprintf(w, "  %-36s %8s %8s %12s %12s\n", "bare python", ms(this.bare.p50), ms(this.bare.p90), "1.00", "1.00")
	for _, s := range []cliABStats{this, other} {
		fmt.Fprintf(w, "  %-36s %8s %8s %12.2f %12.2f\n", s.name, ms(s.run.p50), ms(s.run.p90), s.p50, s.p90)
	}
	verdict := "NOT MET:"
	if this.p50 <= 1.5 {
		verdict = "met:"
	}
	fmt.Fprintf(w, "  %-8s 4 airlock run FILE (%s) median %.2f× bare python, p90 %.2f× (goal ≤ 1.5×); %s median %.2f×, p90 %.2f×\n",
		verdict, this.name, this.p50, this.p90, other.name, other.p50, other.p90)
}
