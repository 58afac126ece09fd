package policy

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/airlock-mcp/airlock/internal/trust"
	"github.com/airlock-mcp/airlock/sandbox"
)

// An environment is a set of libraries the operator built on the host with the tools
// they already use (uv, pip, conda, apt, npm), bound read-only at sandbox.EnvironmentDir
// into every sandbox that runs in it. The server learns what it holds by reading files
// (pyvenv.cfg, dist-info, package.json); on the host it runs only a base interpreter
// outside the environment, with site off, as Detect does for the system interpreters,
// and an interpreter of the environment's own only in a sandbox (inspectPython).

// EnvironmentConfig is one [environments.NAME] table.
type EnvironmentConfig struct {
	Name     string
	Language string
	// Path is a venv, a prefix (conda, /usr/local), or for javascript a directory
	// holding node_modules.
	Path string
	// Preload are the modules a warm sandbox imports before its call.
	Preload []string
	// Default: used for calls in its language that name no environment.
	Default bool
}

// Package is one installed distribution.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// System: seen through include-system-site-packages, not installed in the
	// environment itself.
	System bool `json:"system,omitempty"`
	// modules are the top-level names it provides to import or require.
	modules []string
}

// Environment is one configured environment as inspected at startup.
type Environment struct {
	Name     string `json:"name"`
	Language string `json:"language"`
	// Path is the host directory, symlinks resolved; the sandbox sees it at
	// sandbox.EnvironmentDir.
	Path string `json:"path"`
	// Interpreter is the path the sandbox runs; Version is its version.
	Interpreter        string    `json:"interpreter"`
	Version            string    `json:"version"`
	SystemSitePackages bool      `json:"system_site_packages"`
	Preload            []string  `json:"preload"`
	Default            bool      `json:"default"`
	Packages           []Package `json:"packages"`
	// Usable: inspected and checked in a sandbox; only usable environments are offered.
	Usable bool `json:"usable"`
	// Problem says why an environment is not usable.
	Problem string `json:"problem,omitempty"`
	// Warning says what the inspection could not see: a listing cut at its budget of
	// directory entries leaves packages out of Packages, and that must not pass silently.
	Warning string `json:"warning,omitempty"`
	// mounts are host prefixes the interpreter needs beyond the environment (a venv's
	// base python outside /usr).
	mounts []string
	// sandboxedSite: the interpreter is one of the environment's files, so its version
	// and site directories are asked in a sandbox (NeedsSiteQuery).
	sandboxedSite bool
	// venv: the environment has a pyvenv.cfg (else it is a prefix).
	venv bool
	// entries counts the directory entries the inspection listed (maxEntries).
	entries int
}

// The patterns here compile on first use, not at init: every airlock process, `airlock
// run` included, would pay for them at start (the bounded repetitions expand into
// hundreds of instructions), and most never use one.

// envName is the rule for environment names: they appear in the tool's schema.
var envName = lazyRegexp(`^[a-z][a-z0-9_-]{0,31}$`)

// npmName is npm's rule for package names, scoped or not.
var npmName = lazyRegexp(`^(@[a-z0-9-~][a-z0-9-._~]*/)?[a-z0-9-~][a-z0-9-._~]*$`)

// An environment's package names and versions are its installers' text: run_code's
// description and get_config show them to the model, so only a name and a version in
// their own shape are listed, never a line of text. pkgVersion is PEP 440's and
// semver's characters; npm names may hold upper case in old packages (JSONStream).
var (
	pyPackage  = lazyRegexp(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,198}[A-Za-z0-9])?$`)
	npmPackage = lazyRegexp(`^(@[A-Za-z0-9-~][A-Za-z0-9-._~]*/)?[A-Za-z0-9-~][A-Za-z0-9-._~]*$`)
	pkgVersion = lazyRegexp(`^([0-9A-Za-z][0-9A-Za-z.+!_-]{0,63})?$`)
)

// lazyRegexp is regexp.MustCompile(expr) on the first call.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// Validate checks an environment's configuration without looking at the host.
func (c EnvironmentConfig) Validate() error {
	if !envName().MatchString(c.Name) {
		return fmt.Errorf("name %q: use lowercase letters, digits, - and _, starting with a letter (at most 32)", c.Name)
	}
	lang, ok := canonical(c.Language)
	switch {
	case !ok || (lang != "python" && lang != "javascript"):
		return fmt.Errorf("language %q: environments are python or javascript", c.Language)
	case !filepath.IsAbs(c.Path) || filepath.Clean(c.Path) == "/":
		return fmt.Errorf("path %q: must be an absolute directory other than /", c.Path)
	}
	for i, m := range c.Preload {
		if (lang == "python" && !dottedName(m)) || (lang == "javascript" && !npmName().MatchString(m)) {
			return fmt.Errorf("preload[%d] %q: not a %s module name", i, m, lang)
		}
	}
	return nil
}

// InspectEnvironment reads what the environment holds. base is the registry's entry for
// the environment's language (flags, and node itself for javascript). A problem is
// reported in the result, never as an error: one broken environment must not stop the
// others.
func InspectEnvironment(c EnvironmentConfig, base Language) Environment {
	lang, _ := canonical(c.Language)
	e := Environment{Name: c.Name, Language: lang, Path: c.Path, Preload: slices.Clone(c.Preload),
		Default: c.Default, Packages: []Package{}}
	if e.Preload == nil {
		e.Preload = []string{}
	}
	if err := c.Validate(); err != nil {
		e.Problem = err.Error()
		return e
	}
	if !base.Installed || base.Name != lang {
		e.Problem = fmt.Sprintf("language %s is not enabled or not installed on this host", lang)
		return e
	}
	root, err := filepath.EvalSymlinks(c.Path)
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(root); err == nil && !fi.IsDir() {
			err = fmt.Errorf("%s: not a directory", root)
		}
	}
	if err != nil {
		e.Problem = err.Error()
		return e
	}
	e.Path = root
	if d := swappable(root); d != "" {
		e.Problem = swapProblem(root, d)
		return e
	}
	if within(root, "/tmp") {
		// The init builds the sandbox's root over its own view of /tmp before it binds
		// anything, so nothing below the host's /tmp can be bound.
		e.Problem = fmt.Sprintf("%s is under /tmp, which the sandbox's root is built over; move it (e.g. to /opt/venvs/%s)", root, c.Name)
		return e
	}
	if lang == "javascript" {
		err = e.inspectNode(base)
	} else {
		err = e.inspectPython()
	}
	if err != nil {
		e.Problem = err.Error()
		return e
	}
	// Usable only once checked in a sandbox (SetUsable).
	return e
}

func (e *Environment) inspectNode(node Language) error {
	root, err := os.OpenRoot(e.Path)
	if err != nil {
		return err
	}
	defer root.Close()
	if fi, err := root.Stat("node_modules"); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s: no node_modules directory (run npm install there)", e.Path)
	}
	e.Interpreter, e.Version = node.Interpreter, node.Version
	for _, d := range e.readDir(root, "node_modules") {
		name := d.Name()
		if strings.HasPrefix(name, "@") {
			scope := filepath.Join("node_modules", name)
			for _, s := range e.readDir(root, scope) {
				e.addNodePackage(root, filepath.Join(scope, s.Name()))
			}
			continue
		}
		if !strings.HasPrefix(name, ".") {
			e.addNodePackage(root, filepath.Join("node_modules", name))
		}
	}
	return nil
}

// addNodePackage reads the package.json of dir, a path below root.
func (e *Environment) addNodePackage(root *os.Root, dir string) {
	data, err := readWhole(root, filepath.Join(dir, "package.json"), maxManifest)
	if err != nil {
		return
	}
	var pj struct{ Name, Version string }
	if json.Unmarshal(data, &pj) != nil || len(pj.Name) > 214 || !npmPackage().MatchString(pj.Name) || !pkgVersion().MatchString(pj.Version) {
		return
	}
	e.Packages = append(e.Packages, Package{Name: pj.Name, Version: pj.Version, modules: []string{pj.Name}})
}

// pythonSite asks the interpreter, with site and the environment's code off, for its
// version, base prefix and the base prefix's site directories. -S keeps site.main()
// from running, so no .pth file of any package is executed.
var pythonSite = []string{"-I", "-S", "-c", siteQuery}

// siteQuery is pythonSite's program: the version, sys.base_prefix and the base prefix's
// site directories, one a line.
const siteQuery = "import sys, site; print(sys.version.split()[0]); print(sys.base_prefix); print(*site.getsitepackages([sys.base_prefix]), sep='\\n')"

// The host runs no file of an environment. Python reads, even under -I -S, a "._pth"
// file beside the executable it was started as (one holding "import site" turns site
// back on, and with it every .pth file of the listed directories: code, run on the host
// as the server's user; seen with Debian's 3.11) and the pyvenv.cfg beside it or one
// directory up, whose home names the standard library it imports at start. So the host
// asks only a base interpreter outside the environment, by its own path; an
// interpreter that is the environment's own (a prefix, a venv made with --copies) is
// asked in a sandbox by the startup check (SiteQuery, Environments.CompleteSite).

func (e *Environment) inspectPython() error {
	var host, rel string
	for _, cand := range []string{"bin/python3", "bin/python"} {
		if _, err := os.Lstat(filepath.Join(e.Path, cand)); err == nil {
			host, rel = filepath.Join(e.Path, cand), cand
			break
		}
	}
	if host == "" {
		return fmt.Errorf("%s: no bin/python3 (not a venv or a prefix)", e.Path)
	}
	cfg, isVenv, err := readPyvenv(e.Path)
	if err != nil {
		return err
	}
	e.venv = isVenv
	e.SystemSitePackages = isVenv && strings.EqualFold(cfg["include-system-site-packages"], "true")
	real, err := realBinary(host, "linux")
	if err != nil {
		return fmt.Errorf("interpreter: %w", err)
	}
	e.Interpreter = sandbox.EnvironmentDir + "/" + rel
	if within(real, e.Path) {
		e.sandboxedSite = true
		return nil
	}
	// The base interpreter runs on the host as this server's user: it must be a file
	// no other user could have written or swapped.
	if d := untrusted(real); d != "" {
		return errors.New(swapProblem(real, d))
	}
	out, err := Probe(real, pythonSite)
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		return fmt.Errorf("%s: unexpected answer %q", real, out)
	}
	e.Version = lines[0]
	basePrefix, baseSite := lines[1], lines[2:]
	// The venv's interpreter links to its base python, which must be visible at the same
	// path inside the sandbox.
	if m := mountFor(real, basePrefix); e.venv && m != "" {
		if d := swappable(m); d != "" {
			return errors.New(swapProblem(m, d))
		}
		e.mounts = append(e.mounts, m)
	}
	e.addSites(baseSite)
	return nil
}

// untrusted is swappable for a file: a directory above it, or the file itself, that a
// user other than root or this server's could change ("" when there is none).
func untrusted(file string) string {
	fi, err := os.Lstat(file)
	if err != nil || !trust.Owner(fi) || fi.Mode().Perm()&0o022 != 0 {
		return file
	}
	return swappable(file)
}

// addSites reads the packages of the environment's own site directories (a venv's, or
// for a prefix its interpreter's, baseSite) and, with include-system-site-packages, the
// base interpreter's baseSite.
func (e *Environment) addSites(baseSite []string) {
	own := baseSite // a prefix: its interpreter's site dirs are its own
	if e.venv {
		own = e.venvSites()
	}
	for _, d := range own {
		e.addPythonPackages(d, false)
	}
	if e.SystemSitePackages {
		for _, d := range baseSite {
			e.addPythonPackages(d, true)
		}
	}
}

// SiteQuery is the program the startup check runs in a sandbox, before its own, for an
// environment whose interpreter is its own (NeedsSiteQuery); its output goes to
// Environments.CompleteSite.
const SiteQuery = siteQuery + "\n"

// NeedsSiteQuery reports whether the environment's version and site directories are
// still to be asked in a sandbox: its interpreter is one of its own files.
func (e Environment) NeedsSiteQuery() bool { return e.sandboxedSite && e.Version == "" }

// pyVersion is what a version from a sandbox may look like: the answer is the
// environment's code's (a .pth file runs before the query there), shown in get_config
// and the tool's description.
var pyVersion = lazyRegexp(`^[0-9]+\.[0-9]+[0-9A-Za-z.+]{0,24}$`)

// completeSite takes SiteQuery's answer from a sandbox, where the environment is at
// sandbox.EnvironmentDir: its site directories there are read on the host below e.Path,
// and only system ones (/usr, /lib) besides; any other is not the environment's.
func (e *Environment) completeSite(answer string) error {
	lines := strings.Split(strings.TrimSpace(answer), "\n")
	if len(lines) < 2 || !pyVersion().MatchString(lines[0]) {
		return fmt.Errorf("%s: unexpected answer to the site query in a sandbox: %.200q", e.Interpreter, answer)
	}
	var sites []string
	for _, d := range lines[2:] {
		d = filepath.Clean(d)
		if rest, ok := strings.CutPrefix(d, sandbox.EnvironmentDir+"/"); ok {
			sites = append(sites, filepath.Join(e.Path, rest))
		} else if within(d, "/usr") || within(d, "/lib") {
			sites = append(sites, d)
		}
	}
	e.Version = lines[0]
	e.addSites(sites)
	return nil
}

// swappable names a directory on path (path itself or one above it) that a user other
// than root or this server's could rename or replace, "" when there is none. The path is
// resolved once, here, but each sandbox binds it by name when it is built: whoever may
// rename a directory on it could swap in a symlink, and every later sandbox would see
// what it points to at /env (or at the prefix's path), another host directory. So, as
// sshd's StrictModes: every directory above path is root's or the server's and writable
// by no one else, or sticky (/var/tmp), where only the entry's own owner may rename it,
// so that entry must be root's or the server's too.
func swappable(path string) string {
	for p := filepath.Clean(path); ; {
		parent := filepath.Dir(p)
		if parent == p {
			return ""
		}
		fi, err := os.Lstat(parent)
		if err != nil || !trust.Owner(fi) {
			return parent
		}
		if fi.Mode().Perm()&0o022 != 0 {
			if fi.Mode()&os.ModeSticky == 0 {
				return parent
			}
			if own, err := os.Lstat(p); err != nil || !trust.Owner(own) {
				return p
			}
		}
		p = parent
	}
}

func swapProblem(path, dir string) string {
	return fmt.Sprintf("%s: %s can be renamed or replaced by a user other than root or this server's (sandboxes bind the path by name, so a symlink swapped in would change what they see); make every directory on the path root's and not group- or world-writable (chown root; chmod go-w), or move the environment (e.g. to /opt/venvs)", path, dir)
}

// venvSites are a venv's lib/python*/site-packages directories.
func (e *Environment) venvSites() []string {
	root, err := os.OpenRoot(e.Path)
	if err != nil {
		return nil
	}
	defer root.Close()
	var sites []string
	for _, d := range e.readDir(root, "lib") {
		site := filepath.Join("lib", d.Name(), "site-packages")
		if ok, _ := filepath.Match("python*", d.Name()); ok {
			if fi, err := root.Stat(site); err == nil && fi.IsDir() {
				sites = append(sites, filepath.Join(e.Path, site))
			}
		}
	}
	return sites
}

// readPyvenv parses the pyvenv.cfg of the environment at dir ("key = value" lines); ok
// is false when there is none, i.e. the directory is a prefix. One that is there but
// not a readable regular file inside the environment is an error.
func readPyvenv(dir string) (cfg map[string]string, ok bool, err error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, false, err
	}
	defer root.Close()
	data, err := readWhole(root, "pyvenv.cfg", maxSmallFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", filepath.Join(dir, "pyvenv.cfg"), err)
	}
	cfg = map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			cfg[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
		}
	}
	return cfg, true, nil
}

// addPythonPackages reads the distributions in one site directory: *.dist-info (pip,
// uv, conda) and *.egg-info (Debian's packages), file or directory.
func (e *Environment) addPythonPackages(dir string, system bool) {
	root, rel, err := e.envRoot(dir)
	if err != nil {
		return
	}
	defer root.Close()
	for _, d := range e.readDir(root, rel) {
		name := d.Name()
		var meta, top string
		switch {
		case strings.HasSuffix(name, ".dist-info"):
			meta, top = filepath.Join(rel, name, "METADATA"), filepath.Join(rel, name, "top_level.txt")
		case strings.HasSuffix(name, ".egg-info") && d.IsDir():
			meta, top = filepath.Join(rel, name, "PKG-INFO"), filepath.Join(rel, name, "top_level.txt")
		case strings.HasSuffix(name, ".egg-info"):
			meta = filepath.Join(rel, name)
		default:
			continue
		}
		p, ok := readMetadata(root, meta)
		if !ok || slices.ContainsFunc(e.Packages, func(q Package) bool { return strings.EqualFold(q.Name, p.Name) }) {
			continue // the first site directory on sys.path wins, as at import
		}
		p.System = system
		if top != "" {
			if data, err := readWhole(root, top, maxSmallFile); err == nil {
				p.modules = strings.Fields(string(data))
			}
		}
		if len(p.modules) == 0 {
			p.modules = []string{strings.ToLower(strings.ReplaceAll(p.Name, "-", "_"))}
		}
		e.Packages = append(e.Packages, p)
	}
}

// readMetadata reads Name and Version from the headers of a core-metadata file below
// root; they come before its description, so the read stops at the blank line after
// them, within maxManifest.
func readMetadata(root *os.Root, name string) (Package, bool) {
	f, err := openRegular(root, name)
	if err != nil {
		return Package{}, false
	}
	defer f.Close()
	var p Package
	sc := bufio.NewScanner(io.LimitReader(f, maxManifest))
	for sc.Scan() && sc.Text() != "" {
		if v, ok := strings.CutPrefix(sc.Text(), "Name:"); ok {
			p.Name = strings.TrimSpace(v)
		} else if v, ok := strings.CutPrefix(sc.Text(), "Version:"); ok {
			p.Version = strings.TrimSpace(v)
		}
	}
	return p, pyPackage().MatchString(p.Name) && pkgVersion().MatchString(p.Version)
}

// Provides returns the package that provides the top-level module, if any.
func (e Environment) Provides(module string) (Package, bool) {
	for _, p := range e.Packages {
		if slices.Contains(p.modules, module) {
			return p, true
		}
	}
	return Package{}, false
}

// MainPackages are what the tool description shows: the preloaded modules' packages
// first, then the environment's own, at most n.
func (e Environment) MainPackages(n int) []Package {
	var out []Package
	add := func(p Package) {
		if len(out) < n && !slices.ContainsFunc(out, func(q Package) bool { return q.Name == p.Name }) {
			out = append(out, p)
		}
	}
	for _, m := range e.Preload {
		top, _, _ := strings.Cut(m, ".")
		if p, ok := e.Provides(top); ok {
			add(p)
		}
	}
	for _, p := range e.Packages {
		if !p.System {
			add(p)
		}
	}
	return out
}

// Spec builds the sandbox spec for running code in this environment: lang's spec with
// the environment's interpreter, its directory bound at sandbox.EnvironmentDir, and for
// python a bootstrap that keeps matplotlib headless and returns its figures as PNG files
// in outDir ("" for none).
func (e Environment) Spec(lang Language, code []byte, args []string, limits sandbox.Limits, bound MemoryBound, outDir string) sandbox.Spec {
	lang.Argv = slices.Clone(lang.Argv)
	lang.Argv[0] = e.Interpreter
	spec := lang.Spec(code, args, limits, bound)
	spec.Environment = e.Path
	spec.Mounts = append(spec.Mounts, e.mounts...)
	switch e.Language {
	case "python":
		spec.Env = append(spec.Env,
			"MPLBACKEND=module://"+figureBackend,
			// matplotlib's config and font cache, built per sandbox: /env is read-only.
			"MPLCONFIGDIR=/tmp/matplotlib")
		n := len(lang.Argv) - 1 // the code file
		argv := slices.Concat(lang.Argv[:n], []string{"-c", pythonBoot(false, nil, outDir)}, lang.Argv[n:], args)
		spec.Argv = argv
		spec.Preload = slices.Concat(lang.Argv[:n], []string{"-c", pythonBoot(true, e.Preload, outDir)})
	case "javascript":
		spec.Env = append(spec.Env, "NODE_PATH="+sandbox.EnvironmentDir+"/node_modules")
		if len(spec.Preload) > 0 {
			spec.Preload[len(spec.Preload)-1] = nodeBoot(e.Preload)
		}
	}
	return spec
}

// CheckProgram is the startup check's program for an environment: it imports the
// preload list (or only starts the interpreter when there is none).
func CheckProgram(e Environment) []byte {
	var b strings.Builder
	for _, m := range e.Preload {
		if e.Language == "javascript" {
			p, _ := json.Marshal(m)
			fmt.Fprintf(&b, "require(%s);\n", p)
		} else {
			fmt.Fprintf(&b, "import %s\n", m)
		}
	}
	if b.Len() == 0 {
		b.WriteString("0\n")
	}
	return []byte(b.String())
}

// figureBackend is the matplotlib backend the python bootstrap provides (Agg, whose
// show() saves the figures).
const figureBackend = "_airlock_figures"

// pythonBoot is the python bootstrap with its settings in front: pooled (argv on fd 3
// after the ready byte on fd 4) or not (argv from the command line), the modules to
// import first, and where figures go. Names are validated dotted names and outDir a
// clean relative path, so JSON strings are Python literals here.
func pythonBoot(pooled bool, preload []string, outDir string) string {
	p, _ := json.Marshal(append([]string{}, preload...))
	d, _ := json.Marshal(outDir)
	flag := "False"
	if pooled {
		flag = "True"
	}
	return fmt.Sprintf("_airlock_pooled, _airlock_preload, _airlock_figures = %s, %s, %s\n%s", flag, p, d, pythonPreload)
}

// nodeBoot is the node bootstrap with the modules to require before the call in front.
func nodeBoot(preload []string) string {
	p, _ := json.Marshal(append([]string{}, preload...))
	return fmt.Sprintf("const airlockPreload = %s;\n%s", p, nodePreload)
}

var (
	pyMissing = lazyRegexp(`ModuleNotFoundError: No module named '([A-Za-z0-9_.]+)'`)
	// Only what an npm name or a path can hold (214 bytes at most): the program writes
	// its own stderr, and anything else caught here would be its text in the hint.
	nodeMissing = lazyRegexp(`Cannot find (?:module|package) '([A-Za-z0-9@/._~:-]{1,214})'`)
)

// MissingModule finds the top-level module a failed run could not import, from the
// last such error on its stderr.
func MissingModule(language string, stderr []byte) (string, bool) {
	var re *regexp.Regexp
	switch language {
	case "python":
		re = pyMissing()
	case "javascript":
		re = nodeMissing()
	default:
		return "", false // environments hold python and node packages only
	}
	all := re.FindAllSubmatch(stderr, -1)
	if len(all) == 0 {
		return "", false
	}
	m := string(all[len(all)-1][1])
	if language != "javascript" {
		top, _, _ := strings.Cut(m, ".")
		return top, true
	}
	if strings.HasPrefix(m, ".") || strings.HasPrefix(m, "/") || strings.HasPrefix(m, "node:") {
		return "", false // a file of the program, or a built-in
	}
	parts := strings.SplitN(m, "/", 3)
	if strings.HasPrefix(m, "@") && len(parts) >= 2 {
		return parts[0] + "/" + parts[1], true
	}
	return parts[0], true
}

// Environments is the set of configured environments. Only the startup check changes
// it (SetUsable), before the server serves.
type Environments struct {
	mu   sync.RWMutex
	list []Environment
}

// NewEnvironments holds already-inspected environments, in the order given.
func NewEnvironments(envs ...Environment) *Environments {
	return &Environments{list: slices.Clone(envs)}
}

// All returns every configured environment, usable or not.
func (es *Environments) All() []Environment {
	if es == nil {
		return nil
	}
	es.mu.RLock()
	defer es.mu.RUnlock()
	return slices.Clone(es.list)
}

// Usable returns the environments calls may use.
func (es *Environments) Usable() []Environment {
	var out []Environment
	for _, e := range es.All() {
		if e.Usable {
			out = append(out, e)
		}
	}
	return out
}

// CompleteSite records the answer of SiteQuery, run in a sandbox, for one environment.
func (es *Environments) CompleteSite(name, answer string) error {
	es.mu.Lock()
	defer es.mu.Unlock()
	for i := range es.list {
		if es.list[i].Name == name {
			return es.list[i].completeSite(answer)
		}
	}
	return fmt.Errorf("unknown environment %q", name)
}

// SetUsable records the startup check's verdict on one environment.
func (es *Environments) SetUsable(name string, problem string) {
	es.mu.Lock()
	defer es.mu.Unlock()
	for i := range es.list {
		if es.list[i].Name == name {
			es.list[i].Usable, es.list[i].Problem = problem == "", problem
		}
	}
}

// Lookup returns a usable environment by name, or an ErrInvalidRequest naming the
// usable ones.
func (es *Environments) Lookup(name string) (Environment, error) {
	var names []string
	for _, e := range es.Usable() {
		if e.Name == name {
			return e, nil
		}
		names = append(names, e.Name)
	}
	for _, e := range es.All() {
		if e.Name == name {
			return Environment{}, fmt.Errorf("%w: environment %q is not available: %s (usable: %s)", ErrInvalidRequest, name, e.Problem, orNone(names))
		}
	}
	if len(name) > 64 {
		name = name[:64]
	}
	return Environment{}, fmt.Errorf("%w: unknown environment %q (usable: %s)", ErrInvalidRequest, name, orNone(names))
}

// Default returns the usable default environment of a language, if any.
func (es *Environments) Default(language string) (Environment, bool) {
	for _, e := range es.Usable() {
		if e.Default && e.Language == language {
			return e, true
		}
	}
	return Environment{}, false
}

// MissingHint says where a module the program could not import can be found: the usable
// environments of its language that provide it, or how an operator adds one. current is
// the environment the run used ("" for none).
func (es *Environments) MissingHint(language, current, module string) string {
	var have []string
	for _, e := range es.Usable() {
		if e.Language != language || e.Name == current {
			continue
		}
		if p, ok := e.Provides(module); ok {
			have = append(have, fmt.Sprintf("%s (%s %s)", e.Name, p.Name, p.Version))
		}
	}
	where := "without an environment"
	if current != "" {
		where = "in environment " + current
	}
	if len(have) > 0 {
		return fmt.Sprintf("module %q is not installed %s; environments that provide it: %s; pass \"environment\" to run_code",
			module, where, strings.Join(have, ", "))
	}
	return fmt.Sprintf("module %q is not installed %s and no environment of this server provides it; the sandbox cannot install packages (no network, read-only system), so work without it, or ask the operator to add it to an environment ([environments.NAME] in the configuration, see docs/environments.md)",
		module, where)
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
