package probe

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/airlock-mcp/airlock/egress"
	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/runner"
	"github.com/airlock-mcp/airlock/sandbox"
)

//go:embed programs/*.py
var programs embed.FS

// probeLanguage is the language every probe program is written in.
const probeLanguage = "python"

// parallel bounds how many probe sandboxes run at once: enough to hide the slow ones
// (timeouts, floods) behind the fast ones without starving real calls of slots.
const parallel = 3

// QuickFilter is the startup subset: the checks that catch a broken or missing sandbox
// (identity, environment, descriptors, network, host files, the seccomp filter, and under
// network "allowlist" the egress bridge) in a few hundred milliseconds.
var QuickFilter = Filter{Probes: []string{
	"read-shadow", "tcp-loopback", "egress-bridge", "env-secret", "fd-leak", "capabilities",
	"no-new-privs", "seccomp-mode", "mount-syscall",
}}

// Suite runs the escape catalogue against the real sandbox, through the same runner,
// spec building and limits as run_code.
type Suite struct {
	base    runner.Runner
	sandbox sandbox.Sandbox
	langErr error    // no python interpreter: every program probe errors
	notes   []string // how the probe runs differ from run_code, said in every report
	env     hostEnv
	envs    *policy.Environments // reported, not used by the probes
	// sandboxEnv are the variables the sandbox sets for the probe language itself.
	sandboxEnv map[string]bool
}

// NewSuite prepares the catalogue for r. Three things differ from a run_code call, each
// said in the report's notes: the probes are python even when python is not enabled for
// run_code, the advisory import guard is off (it is not a boundary and would hide the walls
// behind it), and the slow probes get lower limits than the defaults.
func NewSuite(r *runner.Runner) *Suite {
	s := &Suite{base: *r, sandbox: r.Sandbox, env: currentHost()}
	lang, err := r.Languages.Lookup(probeLanguage)
	if err != nil {
		lang, err = installed(r.Languages, probeLanguage, err)
		if err == nil {
			s.notes = append(s.notes, fmt.Sprintf("python is not enabled for run_code; the probes ran with the registry's %s (%s) in the same sandbox", lang.Interpreter, lang.Version))
		}
	}
	s.langErr = err
	s.sandboxEnv = map[string]bool{}
	for _, kv := range append(slices.Clone(lang.Env), egress.Env()...) {
		s.sandboxEnv[kv] = true
	}
	lang.Enabled = true
	s.base.Languages = fixedLanguage{lang}
	if !r.Imports.Empty() {
		s.notes = append(s.notes, "the advisory python import guard is not applied to probe programs; they test the sandbox behind it")
	}
	s.base.Imports = policy.Imports{}
	// The probes test the sandbox itself; a default environment would run them through
	// its bootstrap.
	s.envs, s.base.Environments = r.Environments, nil
	// probe_sandbox counts as one of its client's calls in flight, as a whole
	// (tools/probe_sandbox.go); its probes, run in the client's name, take no slot more.
	s.base.PerClient = nil
	// The probe programs are ours and larger than a small code cap may allow.
	s.base.MaxCodeBytes = max(r.MaxCodeBytes, 1<<20)
	return s
}

func installed(langs runner.Languages, name string, lookupErr error) (policy.Language, error) {
	for _, l := range langs.Languages() {
		if l.Name == name && l.Installed {
			return l, nil
		}
	}
	return policy.Language{}, fmt.Errorf("no %s interpreter to run the probes: %w", name, lookupErr)
}

// Names lists every probe, in catalogue order.
func Names() []string {
	names := make([]string, len(catalogue))
	for i, p := range catalogue {
		names[i] = p.name
	}
	return names
}

// Categories lists the probe categories, in catalogue order.
func Categories() []string {
	var cats []string
	for _, p := range catalogue {
		if !slices.Contains(cats, p.category) {
			cats = append(cats, p.category)
		}
	}
	return cats
}

// Select returns the probes f names, in catalogue order, or an error listing the valid
// names and categories when f names one that does not exist.
func Select(f Filter) ([]string, error) {
	var bad []string
	for _, n := range f.Probes {
		if !slices.Contains(Names(), n) {
			bad = append(bad, fmt.Sprintf("probe %q", n))
		}
	}
	for _, c := range f.Categories {
		if !slices.Contains(Categories(), c) {
			bad = append(bad, fmt.Sprintf("category %q", c))
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("unknown %s; categories: %s; probes: %s", strings.Join(bad, ", "),
			strings.Join(Categories(), ", "), strings.Join(Names(), ", "))
	}
	var out []string
	for _, p := range catalogue {
		all := len(f.Probes) == 0 && len(f.Categories) == 0
		if all || slices.Contains(f.Probes, p.name) || slices.Contains(f.Categories, p.category) {
			out = append(out, p.name)
		}
	}
	return out, nil
}

// Quick runs QuickFilter: the check `airlock serve` runs at startup.
func (s *Suite) Quick(ctx context.Context) (Report, error) { return s.Run(ctx, QuickFilter) }

// Run reports the sandbox's layers and runs the probes f selects. The error is for an
// unknown probe or category, or a sandbox that cannot report its layers; a probe that
// cannot run is an "error" result, never a silent pass.
func (s *Suite) Run(ctx context.Context, f Filter) (Report, error) {
	start := time.Now()
	names, err := Select(f)
	if err != nil {
		return Report{}, err
	}
	sr, err := s.sandbox.Probe(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("sandbox layers: %w", err)
	}
	results := make([]Result, len(names))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
				results[i] = s.runOne(ctx, byName(name), sr, f)
			case <-ctx.Done():
				p := byName(name)
				results[i] = Result{Name: p.name, Category: p.category, Status: Errored,
					Detail: "not run: " + context.Cause(ctx).Error()}
			}
		}()
	}
	wg.Wait()
	rep := NewReport(sr, results)
	rep.Notes = append([]string{}, s.notes...)
	for _, e := range s.envs.All() {
		rep.Environments = append(rep.Environments, EnvironmentCheck{Name: e.Name, Language: e.Language, Usable: e.Usable, Problem: e.Problem})
		if !e.Usable {
			rep.Fixes = append(rep.Fixes, fmt.Sprintf("environment %s is not offered: %s; fix it and restart the server", e.Name, orUnchecked(e.Problem)))
		}
	}
	rep.DurationMs = time.Since(start).Milliseconds()
	return rep, nil
}

func orUnchecked(problem string) string {
	if problem == "" {
		return "not checked yet (the server checks environments at startup)"
	}
	return problem
}

func byName(name string) *probeDef {
	for i := range catalogue {
		if catalogue[i].name == name {
			return &catalogue[i]
		}
	}
	return nil
}

// runOne runs one probe: host-side preparation, the program in a fresh sandbox, the
// host-side verdict, then cleanup whatever happened.
func (s *Suite) runOne(ctx context.Context, p *probeDef, sr sandbox.Report, f Filter) Result {
	start := time.Now()
	res := Result{Name: p.name, Category: p.category}
	res.Status, res.Detail = s.verdict(ctx, p, sr, f)
	if res.Status == Failed || res.Status == Errored {
		res.Fix = p.fix
	}
	res.DurationMs = time.Since(start).Milliseconds()
	return res
}

func (s *Suite) verdict(ctx context.Context, p *probeDef, sr sandbox.Report, f Filter) (Status, string) {
	if why := p.skip(s.env); why != "" {
		return NotApplicable, why
	}
	if sr.Isolation == sandbox.IsolationLandlock && p.landlock != "" && !layerActive(sr, p.landlockUnless) {
		return NotApplicable, "the Landlock tier: " + p.landlock
	}
	if s.langErr != nil {
		return Errored, s.langErr.Error()
	}
	r := s.base
	r.Bounds.Default = lower(r.Bounds.Default, p.limits)
	timeout := p.timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	a := &attempt{args: map[string]any{}, limits: r.Bounds.Clamp(policy.Request{Timeout: timeout}), env: s.env, network: r.Network,
		sandboxEnv: s.sandboxEnv}
	defer a.cleanup()
	if p.setup != nil {
		if err := p.setup(a); err != nil {
			return Errored, "host-side setup: " + err.Error()
		}
	}
	code, err := program(p.program)
	if err != nil {
		return Errored, err.Error()
	}
	args, err := a.argJSON()
	if err != nil {
		return Errored, err.Error()
	}
	if p.during != nil {
		stop := p.during(ctx, a)
		defer stop()
	}
	out, err := r.Run(ctx, runner.Call{Language: probeLanguage, Code: code, Args: []string{p.name, args}, Timeout: timeout,
		Transport: f.Transport, Client: f.Client, Principal: f.Principal})
	if err != nil {
		if errors.Is(err, runner.ErrBusy) {
			return Errored, "no free sandbox slot: " + err.Error()
		}
		return Errored, "run: " + err.Error()
	}
	if out.Result.Status == sandbox.StatusSandboxError {
		return Errored, "sandbox error: " + out.Result.Detail
	}
	return p.judge(a, out.Result, parseReport(out.Result))
}

// lower returns d with each positive field of tight taken where it is lower: a probe may
// tighten a limit to stay fast, never loosen one.
func lower(d, tight sandbox.Limits) sandbox.Limits {
	pick := func(v, t int64) int64 {
		if t > 0 && (v <= 0 || t < v) {
			return t
		}
		return v
	}
	d.Wall = time.Duration(pick(int64(d.Wall), int64(tight.Wall)))
	d.CPU = time.Duration(pick(int64(d.CPU), int64(tight.CPU)))
	d.Memory = pick(d.Memory, tight.Memory)
	d.Pids = int(pick(int64(d.Pids), int64(tight.Pids)))
	d.FileSize = pick(d.FileSize, tight.FileSize)
	d.OpenFiles = int(pick(int64(d.OpenFiles), int64(tight.OpenFiles)))
	d.Workspace = pick(d.Workspace, tight.Workspace)
	d.Output = pick(d.Output, tight.Output)
	return d
}

// program is the shared prelude followed by one category's probes.
func program(name string) ([]byte, error) {
	common, err := programs.ReadFile("programs/common.py")
	if err != nil {
		return nil, fmt.Errorf("probe program: %w", err)
	}
	body, err := programs.ReadFile("programs/" + name + ".py")
	if err != nil {
		return nil, fmt.Errorf("probe program: %w", err)
	}
	return append(append(common, '\n'), body...), nil
}

// fixedLanguage is a registry holding only the probe interpreter, enabled.
type fixedLanguage struct{ lang policy.Language }

func (f fixedLanguage) Lookup(name string) (policy.Language, error) {
	if name != f.lang.Name {
		return policy.Language{}, fmt.Errorf("%w: %q (probes run %s)", policy.ErrLanguageNotEnabled, name, f.lang.Name)
	}
	return f.lang, nil
}

func (f fixedLanguage) Enabled() []string            { return []string{f.lang.Name} }
func (f fixedLanguage) Languages() []policy.Language { return []policy.Language{f.lang} }

// hostEnv is what decides whether a probe applies here.
type hostEnv struct {
	goos, goarch string
}

func currentHost() hostEnv { return hostEnv{goos: runtime.GOOS, goarch: runtime.GOARCH} }

// layerActive reports whether the sandbox has the layer name, active.
func layerActive(sr sandbox.Report, name string) bool {
	l, ok := sr.Layer(name)
	return name != "" && ok && l.Active
}
