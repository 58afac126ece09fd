package policy

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestIsNativeBinary(t *testing.T) {
	tests := []struct {
		name  string
		magic []byte
		goos  string
		want  bool
	}{
		{"elf on linux", []byte("\x7fELF"), "linux", true},
		{"script on linux", []byte("#!/u"), "linux", false},
		{"mach-o on linux", []byte{0xcf, 0xfa, 0xed, 0xfe}, "linux", false},
		{"mach-o 64 le on darwin", []byte{0xcf, 0xfa, 0xed, 0xfe}, "darwin", true},
		{"mach-o 32 le on darwin", []byte{0xce, 0xfa, 0xed, 0xfe}, "darwin", true},
		{"universal on darwin", []byte{0xca, 0xfe, 0xba, 0xbe}, "darwin", true},
		{"elf on darwin", []byte("\x7fELF"), "darwin", false},
		{"script on darwin", []byte("#!/b"), "darwin", false},
		{"short", []byte("\x7fE"), "linux", false},
	}
	for _, tt := range tests {
		if got := isNativeBinary(tt.magic, tt.goos); got != tt.want {
			t.Errorf("%s: got %v", tt.name, got)
		}
	}
}

func TestRealBinaryRejectsShims(t *testing.T) {
	dir := t.TempDir()
	shim := filepath.Join(dir, "python3")
	if err := os.WriteFile(shim, []byte("#!/bin/sh\nexec /usr/bin/python3 \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := realBinary(shim, "linux"); err == nil || !strings.Contains(err.Error(), "script or shim") {
		t.Fatalf("shim accepted: %v", err)
	}
	noexec := filepath.Join(dir, "noexec")
	if err := os.WriteFile(noexec, []byte("\x7fELF...."), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := realBinary(noexec, "linux"); err == nil || !strings.Contains(err.Error(), "not an executable") {
		t.Fatalf("non-executable accepted: %v", err)
	}
	if _, err := realBinary("python3", "linux"); err == nil {
		t.Fatal("relative path accepted")
	}
	if _, err := realBinary(dir, "linux"); err == nil {
		t.Fatal("directory accepted")
	}
}

// TestSearchSkipsShimInPath puts a shim first in PATH for a binary name that is in no
// well-known directory, then a symlink to a real binary: search must skip the shim and
// return the resolved target.
func TestSearchSkipsShimInPath(t *testing.T) {
	real, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Skip("no /bin/sh")
	}
	shims, bins := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(shims, "airlock-test-interp"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/bin/sh", filepath.Join(bins, "airlock-test-interp")); err != nil {
		t.Fatal(err)
	}
	d := langDef{name: "t", binaries: []string{"airlock-test-interp"}}
	got, tried := search(d, "linux", []string{"relative/dir", shims, bins})
	if got != real {
		t.Fatalf("search = %q (tried %v), want %q", got, tried, real)
	}
	if len(tried) == 0 || !strings.Contains(strings.Join(tried, " "), "script or shim") {
		t.Fatalf("shim not reported as tried: %v", tried)
	}
	if got, _ := search(d, "linux", []string{shims}); got != "" {
		t.Fatalf("shim-only PATH found %q", got)
	}
}

func TestMountFor(t *testing.T) {
	tests := []struct{ bin, prefix, want string }{
		{"/usr/bin/python3.11", "/usr", ""},
		{"/usr/bin/node", "/usr", ""},
		{"/bin/dash", "/", ""},
		{"/lib64/x/bin/y", "/lib64/x", ""},
		{"/usr/local/bin/python3.12", "/usr/local", "/usr/local"},
		{"/opt/python/3.12/bin/python3", "/opt/python/3.12", "/opt/python/3.12"},
		{"/opt/homebrew/Cellar/node/20.1/bin/node", "/opt/homebrew/Cellar/node/20.1", "/opt/homebrew"},
		{"/opt/homebrew/Cellar/python@3.12/3.12.1/Frameworks/Python.framework/Versions/3.12/bin/python3.12",
			"/opt/homebrew/Cellar/python@3.12/3.12.1/Frameworks/Python.framework/Versions/3.12", "/opt/homebrew"},
		{"/Library/Frameworks/Python.framework/Versions/3.12/bin/python3.12",
			"/Library/Frameworks/Python.framework/Versions/3.12", "/Library/Frameworks/Python.framework/Versions/3.12"},
		{"/root/.pyenv/versions/3.12.0/bin/python3.12", "/root/.pyenv/versions/3.12.0", "/root/.pyenv/versions/3.12.0"},
	}
	for _, tt := range tests {
		if got := mountFor(tt.bin, tt.prefix); got != tt.want {
			t.Errorf("mountFor(%q, %q) = %q, want %q", tt.bin, tt.prefix, got, tt.want)
		}
	}
}

func TestSearchDirsDarwin(t *testing.T) {
	d, _ := defFor("python")
	dirs := searchDirs(d, "darwin")
	brew, usr := slices.Index(dirs, "/opt/homebrew/bin"), slices.Index(dirs, "/usr/bin")
	fw := slices.Index(dirs, "/Library/Frameworks/Python.framework/Versions/Current/bin")
	if brew < 0 || fw < 0 || usr < 0 || brew > usr || fw > usr {
		t.Fatalf("darwin search order %v must put Homebrew and the framework before /usr/bin", dirs)
	}
}

func TestDetectHost(t *testing.T) {
	start := time.Now()
	r, err := Detect([]string{"python", "node", "sh"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Detect took %v for %d languages", time.Since(start), len(r.Languages()))
	if got := r.Languages(); len(got) != len(defs) || got[0].Name != "python" || got[1].Name != "javascript" {
		t.Fatalf("order: %+v", got)
	}
	py, err := r.Lookup("python")
	if err != nil {
		if _, statErr := os.Stat("/usr/bin/python3"); statErr == nil {
			t.Fatalf("python not found although /usr/bin/python3 exists: %v", err)
		}
		t.Skipf("no python on this host: %v", err)
	}
	if strings.Contains(py.Interpreter, "shims") || !filepath.IsAbs(py.Interpreter) {
		t.Fatalf("interpreter %q is not a real binary", py.Interpreter)
	}
	if want, _ := filepath.EvalSymlinks(py.Interpreter); want != py.Interpreter {
		t.Fatalf("interpreter %q not symlink-resolved (%q)", py.Interpreter, want)
	}
	out, err := exec.Command(py.Interpreter, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSpace(strings.TrimPrefix(string(out), "Python ")); py.Version != want {
		t.Fatalf("version %q, interpreter says %q", py.Version, want)
	}
	if py.Argv[0] != py.Interpreter || py.Argv[len(py.Argv)-1] != "main.py" || !slices.Contains(py.Argv, "-E") || !slices.Contains(py.Argv, "-s") {
		t.Fatalf("argv %v", py.Argv)
	}
	if alias, err := r.Lookup("Python3"); err != nil || alias.Name != "python" {
		t.Fatalf("alias: %v %v", alias.Name, err)
	}
	if sh, err := r.Lookup("sh"); err == nil && sh.Version == "" {
		t.Fatalf("sh detected without a version: %+v", sh)
	}
	if _, err := r.Lookup("bash"); !errors.Is(err, ErrLanguageNotEnabled) || !strings.Contains(err.Error(), "enabled: ") ||
		!strings.Contains(err.Error(), "python") {
		t.Fatalf("bash not enabled: %v", err)
	}
}

func TestDetectErrors(t *testing.T) {
	if _, err := Detect([]string{"python", "ruby"}); err == nil || !strings.Contains(err.Error(), `"ruby"`) ||
		!strings.Contains(err.Error(), "known: python, javascript, bash, sh, perl") {
		t.Fatalf("unknown language: %v", err)
	}
	dir := t.TempDir()
	shim := filepath.Join(dir, "python3")
	if err := os.WriteFile(shim, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := DetectWith(Config{Enabled: []string{"python"}, Interpreters: map[string]string{"python": shim}})
	if err == nil || !strings.Contains(err.Error(), "interpreter for python") {
		t.Fatalf("pinned shim accepted: %v", err)
	}
	r, err := Detect(nil)
	if err != nil {
		t.Fatal(err)
	}
	if l := r.Languages(); !l[0].Enabled || l[1].Enabled {
		t.Fatalf("empty enabled list must enable only %s: %+v", DefaultLanguage, l)
	}
}

// A one-shot run resolves only what it may use: a language neither enabled nor pinned
// is never probed, and Lookup refuses it as not enabled; a bad pin still fails.
func TestDetectEnabledOnly(t *testing.T) {
	var mu sync.Mutex
	var probed []string
	probe := func(bin string, args []string) (string, error) {
		mu.Lock()
		probed = append(probed, bin)
		mu.Unlock()
		return Probe(bin, args)
	}
	r, err := DetectWith(Config{Enabled: []string{"sh"}, Probe: probe, EnabledOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(probed) != 1 || !strings.Contains(filepath.Base(probed[0]), "sh") {
		t.Fatalf("probed %v, want only sh's interpreter", probed)
	}
	if l, err := r.Lookup("sh"); err != nil || !l.Installed {
		t.Fatalf("sh: %+v, %v", l, err)
	}
	if _, err := r.Lookup("python"); !errors.Is(err, ErrLanguageNotEnabled) {
		t.Fatalf("python, not enabled: %v", err)
	}
	for _, l := range r.Languages() {
		if l.Name != "sh" && (l.Installed || l.Problem != "not detected: not enabled") {
			t.Fatalf("%s was resolved: %+v", l.Name, l)
		}
	}
	dir := t.TempDir()
	shim := filepath.Join(dir, "perl")
	if err := os.WriteFile(shim, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = DetectWith(Config{Enabled: []string{"sh"}, Interpreters: map[string]string{"perl": shim}, EnabledOnly: true})
	if err == nil || !strings.Contains(err.Error(), "interpreter for perl") {
		t.Fatalf("a bad pin of a language not enabled was accepted: %v", err)
	}
}

func TestLookupErrors(t *testing.T) {
	r := NewRegistry(
		Language{Name: "python", Enabled: true, Installed: true, Interpreter: "/usr/bin/python3"},
		Language{Name: "javascript", Enabled: true, Problem: "no real binary; looked at /usr/bin/node"},
		Language{Name: "bash", Installed: true},
	)
	if _, err := r.Lookup("node"); !errors.Is(err, ErrLanguageNotInstalled) || !strings.Contains(err.Error(), "looked at /usr/bin/node") {
		t.Fatalf("not installed: %v", err)
	}
	_, err := r.Lookup("bash")
	const want = "language not enabled: bash is installed but not enabled on this server (enabled: python; installed: bash, python); " +
		"the operator enables it with languages.enabled in the configuration file or the AIRLOCK_LANGUAGES environment variable, e.g. AIRLOCK_LANGUAGES=python,bash"
	if !errors.Is(err, ErrLanguageNotEnabled) || err.Error() != want {
		t.Fatalf("installed, not enabled:\n got %v\nwant %s", err, want)
	}
	// Neither installed nor enabled: nothing to suggest but the enabled ones.
	if _, err := r.Lookup("perl"); !errors.Is(err, ErrLanguageNotEnabled) || err.Error() != `language not enabled: "perl" (enabled: python)` {
		t.Fatalf("unknown and not installed: %v", err)
	}
	if _, err := r.Lookup("cobol\x1b[31m"); !errors.Is(err, ErrLanguageNotEnabled) || strings.Contains(err.Error(), "\x1b") {
		t.Fatalf("unknown: %v", err)
	}
	if got := r.Enabled(); !slices.Equal(got, []string{"python"}) {
		t.Fatalf("Enabled() = %v", got)
	}
}

func TestSpec(t *testing.T) {
	limits := DefaultBounds().Clamp(Request{})
	py := Language{Name: "python", Interpreter: "/usr/bin/python3.11", File: "main.py",
		Argv: []string{"/usr/bin/python3.11", "-I", "main.py"}, Env: []string{"A=1"}, Mounts: []string{"/opt/py"}}
	s := py.Spec([]byte("print(1)"), []string{"x", "y"}, limits, BoundByRlimit)
	if !slices.Equal(s.Argv, []string{"/usr/bin/python3.11", "-I", "main.py", "x", "y"}) || s.CodeFile != "main.py" ||
		s.Language != "python" || string(s.Code) != "print(1)" || s.Limits.AddressSpace != limits.Memory ||
		!slices.Equal(s.Env, []string{"A=1"}) || !slices.Equal(s.Mounts, []string{"/opt/py"}) {
		t.Fatalf("python spec %+v", s)
	}
	s.Argv[0], s.Env[0] = "changed", "changed"
	if py.Argv[0] != "/usr/bin/python3.11" || py.Env[0] != "A=1" {
		t.Fatal("Spec shares slices with the registry entry")
	}

	node := Language{Name: "javascript", Interpreter: "/usr/bin/node", File: "main.js", Argv: []string{"/usr/bin/node", "main.js"}}
	s = node.Spec(nil, nil, limits, BoundByRlimit)
	if s.Limits.AddressSpace != limits.Memory+nodeAddressReserve {
		t.Fatalf("node address space %d", s.Limits.AddressSpace)
	}
	if want := "NODE_OPTIONS=--max-old-space-size=384"; !slices.Contains(s.Env, want) {
		t.Fatalf("node env %v, want %s", s.Env, want)
	}
	// Under a memory cgroup the heap is not capped: the cgroup bounds it, and the flag
	// would cost node its built-in code cache at every start.
	s = node.Spec(nil, nil, limits, BoundByCgroup)
	if len(s.Env) != 0 || s.Limits.AddressSpace != limits.Memory+nodeAddressReserve {
		t.Fatalf("node under a memory cgroup: env %v, address space %d", s.Env, s.Limits.AddressSpace)
	}
}

// TestNodeAddressSpace runs node under the RLIMIT_AS its Spec asks for (it must start and
// allocate up to its heap cap with a clean V8 error, not an abort), and under the python
// rule AddressSpace = Memory (which must fail: otherwise the floor is unneeded).
func TestNodeAddressSpace(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit not installed")
	}
	r, err := Detect([]string{"node"})
	if err != nil {
		t.Fatal(err)
	}
	node, err := r.Lookup("node")
	if err != nil {
		t.Skipf("node not installed: %v", err)
	}
	limits := DefaultBounds().Clamp(Request{Memory: 256 << 20})
	spec := node.Spec(nil, nil, limits, BoundByRlimit)
	run := func(as int64, js string) (string, error) {
		cmd := exec.Command(prlimit, "--as="+strconv.FormatInt(as, 10), node.Interpreter, "-e", js)
		cmd.Env = spec.Env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(spec.Limits.AddressSpace, "console.log('up')"); err != nil || !strings.Contains(out, "up") {
		t.Fatalf("node does not start at AS %d: %v %s", spec.Limits.AddressSpace, err, out)
	}
	out, err := run(spec.Limits.AddressSpace, "let a=[];for(let i=0;i<400;i++)a.push(new Array(1e6).fill(i))")
	if err == nil || !strings.Contains(out, "heap out of memory") {
		t.Fatalf("heap overflow at AS %d must be V8's own error: %v %s", spec.Limits.AddressSpace, err, out)
	}
	if _, err := run(limits.Memory, "1"); err == nil {
		t.Fatalf("node started with AS = Memory (%d): the reserve is not needed", limits.Memory)
	}
}
