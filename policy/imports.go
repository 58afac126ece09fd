package policy

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/airlock-mcp/airlock/sandbox"
)

// The Python import policy is ADVISORY defence in depth, NOT a security boundary: the
// sandbox (namespaces, seccomp, no network, rlimits) is what contains hostile code. The
// guard only turns the common forbidden imports into a clear policy_denied answer, with
// the module and the line, instead of letting them run into the sandbox's walls.
//
// Caught (tested in imports_test.go against the real interpreter):
//   - import X, import X.Y, import X as Z, from X import Y, from X.Y import Z, imports
//     nested in functions or under try/except, literal __import__("X") and
//     importlib.import_module("X") (all statically, before any user code runs);
//   - __import__("o"+"s"), importlib.import_module(...), importlib.__import__, imports in
//     exec'd, eval'd or compile()d strings, __builtins__["__import__"], relative imports
//     resolved through a forged __package__ (runtime, before the module is imported);
//   - the original __import__ recovered from the wrapper, for a module not loaded yet
//     (audit hook on the "import" event);
//   - catching the ImportError does not help: the guard ends the process itself.
//
// Only the program's own imports are checked (main.py, files next to it, exec'd
// strings); libraries import what they need, so pathlib, tempfile, zipfile, unittest and
// asyncio keep working under StrictImports.
//
// Not caught (known advisory gaps):
//   - modules already loaded at start-up are reachable without an import:
//     sys.modules["os"], random._os, (lambda: 0).__globals__ of library functions;
//   - the original __import__ is reachable through the wrapper's __closure__;
//   - code compiled with a library-looking file name counts as library code for
//     already-loaded modules;
//   - libraries that expose a denied module's power: asyncio.create_subprocess_exec,
//     tempfile, pathlib.Path.unlink;
//   - native extensions, and any new interpreter the program starts (os.exec*, when os
//     itself is allowed);
//   - denying only subprocess does not deny os.system / os.posix_spawn.
//
// DenyImport names are denied in every form, with their submodules. DenyFrom names are
// denied only as `from X import ...` and may name an attribute: "os.system" denies
// `from os import system` while `import os` stays allowed.

// DeniedExitCode is the exit status the guard ends a denied program with. A program can
// exit with it on its own; Denied also requires the guard's report line.
const DeniedExitCode = 86

// GuardFile is the guard script's name in the workspace; Files reserves ".airlock*".
const GuardFile = ".airlock_guard.py"

const deniedMarker = "airlock-policy-denied "

//go:embed airlock_guard.py
var guardScript []byte

// Imports is the advisory Python import policy (defence in depth, not a boundary).
type Imports struct {
	DenyImport []string `json:"deny_import"` // modules denied for `import X`
	DenyFrom   []string `json:"deny_from"`   // modules denied for `from X import ...`
}

// StrictImports is the example configuration's preset: the modules that reach processes,
// files by path, the network, signals, raw memory and native code. importlib and sys are
// not in it: inspect, dataclasses and much of the standard library import importlib, and
// sys is needed for argv and exit. Denying os still lets random, pathlib and json load,
// because os is already loaded and only the program's own imports of it are checked.
func StrictImports() Imports {
	return Imports{
		DenyImport: []string{
			"os", "posix", "nt", "subprocess", "_posixsubprocess", "pty", "signal",
			"socket", "_socket", "ssl", "shutil", "ctypes", "_ctypes", "cffi", "mmap",
			"multiprocessing", "_multiprocessing", "resource", "fcntl",
		},
	}
}

// Empty reports whether the policy denies nothing.
func (p Imports) Empty() bool { return len(p.DenyImport) == 0 && len(p.DenyFrom) == 0 }

// Validate checks that every entry is a dotted Python identifier, naming the bad one.
func (p Imports) Validate() error {
	var errs []error
	check := func(field string, names []string) {
		for i, n := range names {
			if !dottedName(n) {
				errs = append(errs, fmt.Errorf("imports.%s[%d]: %q is not a dotted module name", field, i, n))
			}
		}
	}
	check("deny_import", p.DenyImport)
	check("deny_from", p.DenyFrom)
	return errors.Join(errs...)
}

// dottedName accepts ASCII identifiers joined by dots; the guard receives the lists
// comma-separated, and non-ASCII module names are not worth the ambiguity.
func dottedName(s string) bool {
	if s == "" {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if part == "" || (part[0] >= '0' && part[0] <= '9') {
			return false
		}
		for i := 0; i < len(part); i++ {
			c := part[i]
			if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				return false
			}
		}
	}
	return true
}

func validNames(names []string) string {
	ok := make([]string, 0, len(names))
	for _, n := range names {
		if dottedName(n) {
			ok = append(ok, n)
		}
	}
	return strings.Join(ok, ",")
}

// Apply rewrites spec so the import policy is enforced inside the sandbox before user code
// runs (python only; other languages and an empty policy are returned unchanged). The
// guard goes into the workspace as GuardFile and python runs it in place of the code file:
// argv[0] -I ... .airlock_guard.py DENY_IMPORT DENY_FROM main.py args...
// A python spec whose argv does not contain its code file gets a nil Argv, so the sandbox
// refuses it rather than running the code unguarded.
func (p Imports) Apply(spec sandbox.Spec) sandbox.Spec {
	if spec.Language != "python" || p.Empty() {
		return spec
	}
	i := slices.Index(spec.Argv, spec.CodeFile)
	if i < 1 || spec.CodeFile == "" {
		spec.Argv = nil
		return spec
	}
	// The guard itself runs isolated (-I): a file in the workspace named like a module it
	// imports (ast.py) must not replace that module. It puts the program's directory on
	// sys.path itself, just before the program runs, as `python3 main.py` would.
	argv := make([]string, 0, len(spec.Argv)+4)
	argv = append(argv, spec.Argv[0], "-I")
	flags := spec.Argv[1:i]
	for j := 0; j < len(flags); j++ {
		switch f := flags[j]; f {
		case "-E", "-s", "-I":
		case "-c":
			j++ // an environment's bootstrap: the guard runs the code file itself
		default:
			argv = append(argv, f)
		}
	}
	argv = append(argv, GuardFile, validNames(p.DenyImport), validNames(p.DenyFrom))
	spec.Argv = append(argv, spec.Argv[i:]...)
	// A preloaded interpreter would run the code file directly, around the guard.
	spec.Preload = nil
	files := make([]sandbox.File, 0, len(spec.Files)+1)
	files = append(files, spec.Files...)
	spec.Files = append(files, sandbox.File{Path: GuardFile, Data: guardScript, Mode: 0o444})
	return spec
}

// Denied reports whether a finished run was stopped by the import policy: the guard's
// exit status plus its report line (the last one on stderr), naming a module this policy
// denies.
func (p Imports) Denied(res sandbox.Result) (Violation, bool) {
	if p.Empty() || res.ExitCode != DeniedExitCode {
		return Violation{}, false
	}
	stderr := res.Stderr.Bytes()
	i := bytes.LastIndex(stderr, []byte(deniedMarker))
	if i < 0 || (i > 0 && stderr[i-1] != '\n') {
		return Violation{}, false
	}
	line, _, _ := bytes.Cut(stderr[i+len(deniedMarker):], []byte("\n"))
	var v Violation
	if err := json.Unmarshal(line, &v); err != nil {
		return Violation{}, false
	}
	// The line is on the program's stderr, and so is the program's to write (even the
	// guard's own report names what the program asked for): only a module name, short
	// and dotted, is taken, so the audit log's violation field never carries output.
	if (v.How != "static" && v.How != "runtime") || v.Line < 0 || len(v.Module) > maxModuleName ||
		!dottedName(v.Module) || !p.denies(v.Module) {
		return Violation{}, false
	}
	return v, true
}

// maxModuleName bounds a reported module name: real dotted names are far shorter.
const maxModuleName = 256

func (p Imports) denies(module string) bool {
	for _, d := range slices.Concat(p.DenyImport, p.DenyFrom) {
		if module == d || strings.HasPrefix(module, d+".") {
			return true
		}
	}
	return false
}

// Violation is an import the policy denied.
type Violation struct {
	Module string `json:"module"`
	Line   int    `json:"line"` // in the code file; 0 when no line of it was on the stack
	How    string `json:"how"`  // "static" or "runtime"
}
