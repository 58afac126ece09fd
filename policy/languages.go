package policy

import (
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/airlock-mcp/airlock/sandbox"
)

// DefaultLanguage is used when a call names no language and when the operator enables none.
const DefaultLanguage = "python"

// Language is one entry of the registry, as detected on this host.
type Language struct {
	Name        string   `json:"name"`
	Interpreter string   `json:"interpreter"` // absolute real binary; "" when not installed
	Version     string   `json:"version"`
	Enabled     bool     `json:"enabled"`
	Installed   bool     `json:"installed"`
	File        string   `json:"file"`   // code file name in the workspace, e.g. main.py
	Argv        []string `json:"argv"`   // full argv, argv[0] == Interpreter
	Env         []string `json:"env"`    // the language's own variables
	Mounts      []string `json:"mounts"` // install prefixes outside the standard dirs
	// Problem says where detection looked and why nothing fit, when not Installed.
	Problem string `json:"problem,omitempty"`
}

const (
	mib = int64(1) << 20
	gib = int64(1) << 30
)

// nodeAddressReserve is what node 20 needs in RLIMIT_AS on top of its heap. Measured on
// x86_64 Linux with `prlimit --as=N node -e 1`: node aborts (SIGTRAP) at start below about
// 712 MiB whatever --max-old-space-size says (code range, thread stacks, cage
// reservations). With AddressSpace = Memory + 1 GiB, heaps up to the old-space cap fail
// with V8's own "heap out of memory" instead of an abort at start.
const nodeAddressReserve = 1 * gib

// langDef is the fixed, per-language part of the registry.
type langDef struct {
	name    string
	aliases []string
	file    string
	// binaries are the executable names to look for, in order of preference.
	binaries []string
	// flags go between the interpreter and the code file.
	flags []string
	env   []string
	// probe runs the interpreter once at Detect with a clean environment; parse turns its
	// stdout into a version and, when the interpreter reports one, its install prefix.
	probe []string
	parse func(out, binary string) (version, prefix string)
	// macDirs are extra darwin locations searched before /usr/bin (python.org framework,
	// Homebrew opt links); macSkip are darwin paths that are stubs, not interpreters.
	macDirs []string
	macSkip []string
}

// defs is the registry's fixed order: Languages lists them this way.
var defs = []langDef{
	{
		name:     "python",
		aliases:  []string{"python3", "py"},
		file:     "main.py",
		binaries: []string{"python3"},
		// -E ignores PYTHON* variables and -s the user site, so the env below does not
		// reach this interpreter (-B, -u and -X utf8 give the same effects; the
		// variables stay for any python the program starts itself). Not -I: it would
		// also drop the script's directory from sys.path, and a helper module sent as an
		// input file could not be imported. The import guard runs with -I (imports.go).
		flags: []string{"-E", "-s", "-B", "-u", "-X", "utf8"},
		env:   []string{"PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1", "PYTHONIOENCODING=utf-8"},
		probe: []string{"-I", "-S", "-c", "import sys; print(sys.version.split()[0]); print(sys.base_prefix)"},
		parse: func(out, _ string) (string, string) {
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) < 2 {
				return strings.TrimSpace(out), ""
			}
			return strings.TrimSpace(lines[0]), strings.TrimSpace(lines[1])
		},
		macDirs: []string{
			"/Library/Frameworks/Python.framework/Versions/Current/bin",
			"/opt/homebrew/opt/python3/bin",
			"/usr/local/opt/python3/bin",
		},
		// /usr/bin/python3 on macOS is an xcode-select trampoline that may open an
		// install dialog instead of running anything.
		macSkip: []string{"/usr/bin/python3"},
	},
	{
		name:     "javascript",
		aliases:  []string{"node", "js", "nodejs"},
		file:     "main.js",
		binaries: []string{"node", "nodejs"},
		probe:    []string{"--version"},
		parse:    func(out, _ string) (string, string) { return strings.TrimPrefix(firstLine(out), "v"), "" },
		macDirs:  []string{"/opt/homebrew/opt/node/bin", "/usr/local/opt/node/bin"},
	},
	{
		name:     "bash",
		file:     "main.sh",
		binaries: []string{"bash"},
		probe:    []string{"--version"},
		parse: func(out, _ string) (string, string) {
			// "GNU bash, version 5.2.15(1)-release (x86_64-pc-linux-gnu)"
			f := strings.Fields(firstLine(out))
			for i, w := range f {
				if w == "version" && i+1 < len(f) {
					return f[i+1], ""
				}
			}
			return firstLine(out), ""
		},
	},
	{
		name:     "sh",
		file:     "main.sh",
		binaries: []string{"sh"},
		// POSIX sh has no version flag (dash rejects --version): prove it runs and
		// report which shell it really is.
		probe: []string{"-c", "exit 0"},
		parse: func(_, binary string) (string, string) { return baseName(binary), "" },
	},
	{
		name:     "perl",
		file:     "main.pl",
		binaries: []string{"perl"},
		probe:    []string{"-e", "print $^V"},
		parse:    func(out, _ string) (string, string) { return strings.TrimPrefix(firstLine(out), "v"), "" },
	},
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

func baseName(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

// canonical maps a name or alias to its registry name.
func canonical(name string) (string, bool) {
	n := strings.ToLower(strings.TrimSpace(name))
	for _, d := range defs {
		if d.name == n || slices.Contains(d.aliases, n) {
			return d.name, true
		}
	}
	return "", false
}

// Canonical maps a language name or alias ("node", "py") to its registry name.
func Canonical(name string) (string, bool) { return canonical(name) }

func defFor(name string) (langDef, bool) {
	for _, d := range defs {
		if d.name == name {
			return d, true
		}
	}
	return langDef{}, false
}

// Known returns the registry names in their fixed order.
func Known() []string {
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.name
	}
	return names
}

// MemoryBound is what holds a sandbox's memory to its limit on this host, which decides
// how an interpreter is told about the limit.
type MemoryBound int

const (
	// BoundByRlimit: RLIMIT_AS only (no memory cgroup; macOS).
	BoundByRlimit MemoryBound = iota
	// BoundByCgroup: a memory cgroup, whose OOM kill is reported as memory_limit.
	BoundByCgroup
)

// Spec builds the sandbox spec for running code in this language with the given limits:
// argv (plus the program's own args), code file, env, mounts and the language's limit
// adjustments (e.g. node's address-space floor). Network, Files and OutDir are the
// caller's.
func (l Language) Spec(code []byte, args []string, limits sandbox.Limits, bound MemoryBound) sandbox.Spec {
	argv := make([]string, 0, len(l.Argv)+len(args))
	argv = append(append(argv, l.Argv...), args...)
	env := slices.Clone(l.Env)
	switch l.Name {
	case "javascript":
		// Under RLIMIT_AS, V8 sizing its heap from the host's RAM would crash at the limit
		// instead of failing with its own, readable "heap out of memory": cap the heap
		// below it. Not under a memory cgroup, whose OOM kill is reported as memory_limit:
		// a V8 flag in NODE_OPTIONS makes node reject its built-in code cache and compile
		// its own modules at every start (40 ms against 32 ms for console.log(1) here).
		if limits.Memory > 0 && bound == BoundByRlimit {
			old := max(limits.Memory*3/4/mib, 16)
			env = append(env, "NODE_OPTIONS=--max-old-space-size="+strconv.FormatInt(old, 10))
		}
		limits.AddressSpace = max(limits.AddressSpace, limits.Memory+nodeAddressReserve)
	default:
		limits.AddressSpace = max(limits.AddressSpace, limits.Memory)
	}
	return sandbox.Spec{
		Language: l.Name,
		Argv:     argv,
		Preload:  l.preload(),
		Code:     code,
		CodeFile: l.File,
		Env:      env,
		Mounts:   slices.Clone(l.Mounts),
		Limits:   limits,
	}
}

// The warm pool's bootstraps: they load the interpreter ahead of the call and then run
// the program exactly as Argv would (see sandbox.Spec.Preload).
var (
	//go:embed preload/python.py
	pythonPreload string
	//go:embed preload/node.js
	nodePreload string
	//go:embed preload/bash.sh
	bashPreload string
)

// preload is the interpreter with its flags and the bootstrap in place of the code file,
// or nil for languages whose start is cheap enough to leave to the call.
func (l Language) preload() []string {
	n := len(l.Argv)
	if n < 2 || l.Argv[n-1] != l.File {
		return nil
	}
	var opt, boot string
	switch l.Name {
	case "python":
		opt, boot = "-c", pythonBoot(true, nil, "")
	case "javascript":
		opt, boot = "-e", nodeBoot(nil)
	case "bash":
		return []string{l.Argv[0], "-c", bashBoot(l.Argv)}
	default:
		return nil
	}
	return append(slices.Clone(l.Argv[:n-1]), opt, boot)
}

// bashBoot is the -c command that starts a pooled bash: the bootstrap in a here-document
// on fd 5 (a pipe), then argv, the program's own `bash main.sh`, in its place with
// BASH_ENV naming that pipe (preload/bash.sh says why). The bootstrap ends with a
// command whose last argument is argv[0], which is what $_ holds when a shell starts.
func bashBoot(argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return "exec 5<<'AIRLOCK_BOOT'\n" + bashPreload + ": " + quoted[0] + "\nAIRLOCK_BOOT\n" +
		"BASH_ENV=/dev/fd/5 exec " + strings.Join(quoted, " ")
}

// Registry is the set of known languages, detected once at startup. It is read-only after
// Detect and safe for concurrent use.
type Registry struct {
	langs []Language
}

// NewRegistry builds a registry from already-detected languages (tests, fakes), in the
// order given.
func NewRegistry(langs ...Language) *Registry {
	return &Registry{langs: slices.Clone(langs)}
}

// Lookup returns an enabled, installed language, or an error wrapping
// ErrLanguageNotEnabled / ErrLanguageNotInstalled whose text lists the enabled languages.
// Aliases ("node", "python3") are accepted.
func (r *Registry) Lookup(name string) (Language, error) {
	canon, _ := canonical(name)
	for _, l := range r.langs {
		if l.Name != canon || !l.Enabled {
			continue
		}
		if !l.Installed {
			return Language{}, fmt.Errorf("%w: %s (%s; enabled: %s)", ErrLanguageNotInstalled, l.Name, l.Problem, r.enabledText())
		}
		return l, nil
	}
	if len(name) > 64 {
		name = name[:64]
	}
	// Installed but off is the operator's choice: say how to change it, and what else
	// there is, instead of a dead end.
	if l, ok := r.installed(canon); ok {
		return Language{}, fmt.Errorf("%w: %s is installed but not enabled on this server (enabled: %s; installed: %s); "+
			"the operator enables it with languages.enabled in the configuration file or the AIRLOCK_LANGUAGES environment variable, e.g. AIRLOCK_LANGUAGES=%s",
			ErrLanguageNotEnabled, l.Name, r.enabledText(), strings.Join(r.installedNames(), ", "),
			strings.Join(append(r.Enabled(), l.Name), ","))
	}
	return Language{}, fmt.Errorf("%w: %q (enabled: %s)", ErrLanguageNotEnabled, name, r.enabledText())
}

// installed returns the language named canon when it is installed.
func (r *Registry) installed(canon string) (Language, bool) {
	for _, l := range r.langs {
		if l.Name == canon && l.Installed {
			return l, true
		}
	}
	return Language{}, false
}

// installedNames lists every installed language, enabled or not, sorted.
func (r *Registry) installedNames() []string {
	var names []string
	for _, l := range r.langs {
		if l.Installed {
			names = append(names, l.Name)
		}
	}
	slices.Sort(names)
	return names
}

func (r *Registry) enabledText() string {
	if e := r.Enabled(); len(e) > 0 {
		return strings.Join(e, ", ")
	}
	return "none"
}

// Languages returns every known language, enabled or not, in a stable order.
func (r *Registry) Languages() []Language { return slices.Clone(r.langs) }

// Enabled returns the names of the enabled and installed languages, sorted.
func (r *Registry) Enabled() []string {
	var names []string
	for _, l := range r.langs {
		if l.Enabled && l.Installed {
			names = append(names, l.Name)
		}
	}
	slices.Sort(names)
	return names
}
