package policy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// probeTimeout bounds each interpreter's one start at Detect; a real interpreter answers
// in milliseconds (python 15 ms, node 7 ms here).
const probeTimeout = 5 * time.Second

// Config is the operator's language configuration.
type Config struct {
	// Enabled names the languages calls may use; empty enables DefaultLanguage.
	Enabled []string `json:"enabled"`
	// Interpreters pins a language to an explicit binary instead of searching. The path
	// is validated like a found one: a real executable, never a script or shim.
	Interpreters map[string]string `json:"interpreters,omitempty"`
	// Probe runs an interpreter's version probe (bin with args) and returns its stdout;
	// nil runs it (Run). A one-shot command passes one that remembers recent answers
	// for the same binary, so it does not start every interpreter each time.
	Probe func(bin string, args []string) (string, error) `json:"-"`
	// EnabledOnly resolves only the enabled languages and the pinned ones (a bad pin is
	// still an error); the others are listed as not detected, so Lookup refuses them as
	// not enabled, without naming what else is installed. A one-shot run in an enabled
	// language sets it: each language costs a search of the disk and a probe.
	EnabledOnly bool `json:"-"`
}

// Detect resolves every known language's interpreter to a real binary (never a shim) and
// its version, and marks the names in enabled as enabled. An unknown name is an error.
func Detect(enabled []string) (*Registry, error) {
	return DetectWith(Config{Enabled: enabled})
}

// DetectWith is Detect with explicit interpreter paths. An unknown language name or an
// unusable explicit path is an error: the operator asked for it by name.
func DetectWith(cfg Config) (*Registry, error) {
	enabled := map[string]bool{}
	names := cfg.Enabled
	if len(names) == 0 {
		names = []string{DefaultLanguage}
	}
	for _, n := range names {
		canon, ok := canonical(n)
		if !ok {
			return nil, fmt.Errorf("unknown language %q (known: %s)", n, strings.Join(Known(), ", "))
		}
		enabled[canon] = true
	}
	run := cfg.Probe
	if run == nil {
		run = Probe
	}
	pinned := map[string]string{}
	for n, p := range cfg.Interpreters {
		canon, ok := canonical(n)
		if !ok {
			return nil, fmt.Errorf("interpreter for unknown language %q (known: %s)", n, strings.Join(Known(), ", "))
		}
		pinned[canon] = p
	}

	langs := make([]Language, len(defs))
	errs := make([]error, len(defs))
	var wg sync.WaitGroup
	for i, d := range defs {
		if cfg.EnabledOnly && !enabled[d.name] && pinned[d.name] == "" {
			langs[i] = Language{Name: d.name, File: d.file, Problem: "not detected: not enabled"}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			langs[i], errs[i] = detectOne(d, pinned[d.name], runtime.GOOS, run)
			langs[i].Enabled = enabled[d.name]
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Registry{langs: langs}, nil
}

// detectOne fills one language. A missing interpreter is not an error (the language is
// simply not installed); a bad pinned path is.
func detectOne(d langDef, pinned, goos string, probe func(string, []string) (string, error)) (Language, error) {
	l := Language{Name: d.name, File: d.file}
	var bin string
	if pinned != "" {
		b, err := realBinary(pinned, goos)
		if err != nil {
			return l, fmt.Errorf("interpreter for %s: %w", d.name, err)
		}
		bin = b
	} else {
		var tried []string
		bin, tried = search(d, goos, filepath.SplitList(os.Getenv("PATH")))
		if bin == "" {
			l.Problem = "no real binary; looked at " + strings.Join(tried, ", ")
			return l, nil
		}
	}
	out, err := probe(bin, d.probe)
	if err != nil {
		if pinned != "" {
			return l, fmt.Errorf("interpreter for %s: %w", d.name, err)
		}
		l.Problem = err.Error()
		return l, nil
	}
	version, prefix := d.parse(out, bin)
	if prefix == "" {
		prefix = filepath.Dir(filepath.Dir(bin)) // <prefix>/bin/<binary>
	}
	if p, err := filepath.EvalSymlinks(prefix); err == nil {
		prefix = p
	}
	l.Interpreter = bin
	l.Version = version
	l.Installed = true
	l.Argv = append(append([]string{bin}, d.flags...), d.file)
	// Empty, not nil, so get_config shows [] rather than null.
	l.Env = append([]string{}, d.env...)
	l.Mounts = []string{}
	if m := mountFor(bin, prefix); m != "" {
		l.Mounts = append(l.Mounts, m)
	}
	return l, nil
}

// searchDirs are the well-known absolute locations, searched before PATH so that a shim
// early in PATH (pyenv, asdf, nvm) never wins over the real binary.
func searchDirs(d langDef, goos string) []string {
	if goos == "darwin" {
		dirs := []string{"/opt/homebrew/bin", "/usr/local/bin", "/opt/local/bin"}
		dirs = append(dirs, d.macDirs...)
		return append(dirs, "/usr/bin", "/bin")
	}
	return []string{"/usr/bin", "/bin", "/usr/local/bin"}
}

// search returns the first candidate that is a real binary, and every place it looked,
// with why each one was rejected.
func search(d langDef, goos string, path []string) (string, []string) {
	var tried []string
	seen := map[string]bool{}
	dirs := searchDirs(d, goos)
	for _, p := range path {
		if filepath.IsAbs(p) {
			dirs = append(dirs, p)
		}
	}
	for _, dir := range dirs {
		for _, name := range d.binaries {
			cand := filepath.Join(dir, name)
			if seen[cand] {
				continue
			}
			seen[cand] = true
			if goos == "darwin" && slices.Contains(d.macSkip, cand) {
				continue
			}
			bin, err := realBinary(cand, goos)
			if err == nil {
				return bin, tried
			}
			if !errors.Is(err, os.ErrNotExist) {
				tried = append(tried, err.Error())
			} else {
				tried = append(tried, cand)
			}
		}
	}
	return "", tried
}

// realBinary resolves p to an absolute, symlink-free path and checks that it is an
// executable native binary for goos. A script (a "#!" shim) is rejected: it costs a
// second interpreter start per run and can point anywhere.
func realBinary(p, goos string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%s: not an absolute path", p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s: not an executable file", real)
	}
	f, err := os.Open(real)
	if err != nil {
		return "", err
	}
	defer f.Close()
	magic := make([]byte, 4)
	if _, err := io.ReadFull(f, magic); err != nil {
		return "", fmt.Errorf("%s: read header: %w", real, err)
	}
	if !isNativeBinary(magic, goos) {
		return "", fmt.Errorf("%s: not a native %s binary (a script or shim)", real, goos)
	}
	return real, nil
}

// isNativeBinary reports whether the first bytes of a file are an executable format goos
// runs directly: ELF elsewhere, Mach-O (thin or universal) on darwin.
func isNativeBinary(magic []byte, goos string) bool {
	if len(magic) < 4 {
		return false
	}
	if goos == "darwin" {
		for _, m := range [][]byte{
			{0xfe, 0xed, 0xfa, 0xce}, {0xfe, 0xed, 0xfa, 0xcf}, // big-endian 32/64
			{0xce, 0xfa, 0xed, 0xfe}, {0xcf, 0xfa, 0xed, 0xfe}, // little-endian 32/64
			{0xca, 0xfe, 0xba, 0xbe}, // universal
		} {
			if bytes.Equal(magic[:4], m) {
				return true
			}
		}
		return false
	}
	return bytes.Equal(magic[:4], []byte{0x7f, 'E', 'L', 'F'})
}

// Probe runs the interpreter once with an empty environment and no access to the server's
// stdio, and returns its stdout.
func Probe(bin string, args []string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{}
	cmd.Dir = "/"
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, firstLine(stderr.String()))
	}
	return stdout.String(), nil
}

// pmRoots are package-manager trees whose binaries load libraries from elsewhere in the
// same tree (Homebrew's opt/ links into Cellar/), so the whole tree is bound.
var pmRoots = []string{"/opt/homebrew", "/usr/local", "/opt/local", "/home/linuxbrew/.linuxbrew"}

// mountFor returns the directory the sandbox must bind read-only for an interpreter at
// bin with install prefix prefix, or "" when the prefix is a standard system directory
// every backend already provides.
func mountFor(bin, prefix string) string {
	for _, root := range pmRoots {
		if within(bin, root) || within(prefix, root) {
			return root
		}
	}
	if standardDir(prefix) {
		return ""
	}
	return prefix
}

func standardDir(p string) bool {
	switch {
	case p == "/" || p == "/usr" || p == "/bin" || p == "/sbin":
		return true
	case strings.HasPrefix(p, "/lib"): // /lib, /lib64, /libx32 and below
		return true
	case within(p, "/usr"):
		return !within(p, "/usr/local")
	}
	return false
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}
