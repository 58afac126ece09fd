// Package probe is the sandbox self-check: which isolation layers are active and what
// each escape probe of the catalogue found. This file holds the report shape and the
// verdict rule every caller shares.
package probe

import (
	"github.com/airlock-mcp/airlock/sandbox"
)

// Status is the outcome of one probe.
type Status string

const (
	Passed        Status = "passed"         // the escape attempt was blocked
	Failed        Status = "failed"         // the escape attempt succeeded
	NotApplicable Status = "not_applicable" // the probe means nothing on this platform
	Errored       Status = "error"          // the probe itself could not run
)

// Verdict sums a report up.
type Verdict string

const (
	Isolated Verdict = "isolated" // every layer active, every probe passed
	Degraded Verdict = "degraded" // an optional layer is missing or a probe could not run
	Unsafe   Verdict = "unsafe"   // a required layer is missing or an escape succeeded
)

// Result is one probe's finding.
type Result struct {
	Name       string `json:"name"`
	Category   string `json:"category"`
	Status     Status `json:"status"`
	Detail     string `json:"detail,omitempty"`
	DurationMs int64  `json:"duration_ms"`
	Fix        string `json:"fix,omitempty"`
}

// Totals counts results by status.
type Totals struct {
	Passed        int `json:"passed"`
	Failed        int `json:"failed"`
	NotApplicable int `json:"not_applicable"`
	Errored       int `json:"error"`
}

// Report is the whole self-check.
type Report struct {
	Platform string `json:"platform"`
	Backend  string `json:"backend"`
	// Isolation is the Linux tier the probes ran in (namespaces, landlock).
	Isolation string          `json:"isolation,omitempty"`
	Layers    []sandbox.Layer `json:"layers"`
	Probes    []Result        `json:"probes"`
	Totals    Totals          `json:"totals"`
	Verdict   Verdict         `json:"verdict"`
	Fixes     []string        `json:"fixes"`
	// Notes say how the probe runs differed from a run_code call (probe language, import
	// guard, lowered limits).
	Notes []string `json:"notes,omitempty"`
	// Environments are the configured environments and whether the startup check let
	// them serve.
	Environments []EnvironmentCheck `json:"environments,omitempty"`
	DurationMs   int64              `json:"duration_ms"`
}

// EnvironmentCheck is one environment's state: a broken one is not offered to calls.
type EnvironmentCheck struct {
	Name     string `json:"name"`
	Language string `json:"language"`
	Usable   bool   `json:"usable"`
	Problem  string `json:"problem,omitempty"`
}

// Filter selects probes by name or category; empty fields select everything.
//
// Transport, Client and Principal say who asked (probe_sandbox's caller), as runner.Call's
// fields of those names do: each probe's sandbox is one of that client's runs, in the
// audit log and the logs.
type Filter struct {
	Probes     []string
	Categories []string

	Transport, Client, Principal string
}

// Count totals results by status.
func Count(results []Result) Totals {
	var t Totals
	for _, r := range results {
		switch r.Status {
		case Passed:
			t.Passed++
		case Failed:
			t.Failed++
		case NotApplicable:
			t.NotApplicable++
		default:
			t.Errored++
		}
	}
	return t
}

// Judge is the verdict rule: a failed probe or a missing required layer is unsafe
// whatever else passed, because one open door is enough. An inactive optional layer
// degrades the verdict only when it names a fix: one without (landlock available but
// unused by design) is information, and would otherwise keep a healthy host from ever
// reading "isolated".
func Judge(layers []sandbox.Layer, results []Result) Verdict {
	v := Isolated
	for _, l := range layers {
		switch {
		case l.Required && !l.Active:
			return Unsafe
		case !l.Active && l.Fix != "":
			v = Degraded
		}
	}
	for _, r := range results {
		switch r.Status {
		case Failed:
			return Unsafe
		case Errored:
			v = Degraded
		}
	}
	return v
}

// Fixes collects the remediation hints of inactive layers and failed or errored probes.
func Fixes(layers []sandbox.Layer, results []Result) []string {
	fixes := []string{}
	seen := map[string]bool{}
	add := func(f string) {
		if f != "" && !seen[f] {
			seen[f] = true
			fixes = append(fixes, f)
		}
	}
	for _, l := range layers {
		if !l.Active {
			add(l.Fix)
		}
	}
	for _, r := range results {
		if r.Status == Failed || r.Status == Errored {
			add(r.Fix)
		}
	}
	return fixes
}

// NewReport assembles a report and its verdict from a sandbox report and probe results.
func NewReport(sr sandbox.Report, results []Result) Report {
	if results == nil {
		results = []Result{}
	}
	layers := sr.Layers
	if layers == nil {
		layers = []sandbox.Layer{}
	}
	return Report{
		Platform: sr.Platform, Backend: sr.Backend, Isolation: sr.Isolation, Layers: layers, Probes: results,
		Totals: Count(results), Verdict: Judge(layers, results), Fixes: Fixes(layers, results),
	}
}
