package darwin

import (
	"debug/macho"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// The profile is assembled only from these embedded fragments and from parameter names
// that Render makes up itself (EXEC_0, READ_0, …). Host paths and user strings reach
// Seatbelt only as -D values, so no path can close a string or inject a rule.
var (
	//go:embed profile.sb
	baseProfile string
	//go:embed network.sb
	networkProfile string
	//go:embed rosetta.sb
	rosettaProfile string
	//go:embed secrets.sb
	secretsProfile string
	//go:embed workspace.sb
	workspaceProfile string
)

// ErrUnsafePath marks a path that cannot be handed to Seatbelt: relative, unclean,
// containing NUL, or a read root that would expose the home directory or the workspace's
// parent.
var ErrUnsafePath = errors.New("unsafe sandbox path")

// Params are the per-run inputs of the profile. Every path must be absolute; Resolve
// canonicalises them (Seatbelt matches the real path: /var is /private/var).
type Params struct {
	Workspace string   // the only writable tree: code, HOME, TMPDIR, outputs
	Home      string   // the server user's home; its secret dirs are denied explicitly
	Exec      []string // the only binaries that may be executed (and read, and mapped)
	Read      []string // read-only roots: the interpreter's prefix and Spec.Mounts
	Network   bool     // allow outbound IP and DNS (sandbox.NetworkHost)
	Rosetta   bool     // allow Rosetta 2's runtime and oahd: an executable may be x86_64 only
}

// prefixConfigs are configuration files that package managers read from an interpreter's
// prefix, which is a read root as a whole: npm's global npmrc ($PREFIX/etc/npmrc, under
// nvm's ~/.nvm/versions/node/<v>), pip's site configuration (sys.prefix/pip.conf) and
// conda's (.condarc). They hold registry and index tokens; no interpreter reads them to
// start or to run a program.
var prefixConfigs = []string{"/etc/npmrc", "/pip.conf", "/.condarc"}

// Profile canonicalises p and renders it: see Resolve and Render.
func Profile(p Params) (text string, args []string, err error) {
	r, err := Resolve(p)
	if err != nil {
		return "", nil, err
	}
	return Render(r)
}

// Resolve returns p with every path made absolute-real with filepath.EvalSymlinks.
// Executables and read roots keep their original spelling as well as the resolved one,
// because exec and open walk through the symlink hops (/opt/homebrew/bin/python3 →
// ../Cellar/…) and Seatbelt checks each. Read roots that would contain the home
// directory or the workspace are refused.
func Resolve(p Params) (Params, error) {
	var out Params
	var err error
	if out.Workspace, err = realPath("workspace", p.Workspace); err != nil {
		return Params{}, err
	}
	if out.Workspace == "/" {
		return Params{}, fmt.Errorf("%w: workspace is /", ErrUnsafePath)
	}
	if out.Home, err = realPathIfExists("home", p.Home); err != nil {
		return Params{}, err
	}
	if len(p.Exec) == 0 {
		return Params{}, fmt.Errorf("%w: no executable", ErrUnsafePath)
	}
	for _, e := range p.Exec {
		if out.Exec, err = appendBoth(out.Exec, "executable", e); err != nil {
			return Params{}, err
		}
	}
	for _, r := range p.Read {
		if out.Read, err = appendBoth(out.Read, "read root", r); err != nil {
			return Params{}, err
		}
	}
	for _, r := range out.Read {
		if within(out.Home, r) || within(out.Workspace, r) {
			return Params{}, fmt.Errorf("%w: read root %q contains the home directory or the workspace", ErrUnsafePath, r)
		}
	}
	out.Network = p.Network
	out.Rosetta = p.Rosetta || needsRosetta(runtime.GOARCH, out.Exec)
	return out, nil
}

// needsRosetta reports whether one of the executables may run under Rosetta 2: one
// without arm64 code (x86_64 Intel Homebrew, x86 conda), one that is not a Mach-O file
// readable here, or any of them when this process is not arm64 itself (an Intel Mac,
// where the rules are inert, or an x86_64 airlock under Rosetta, whose children prefer
// the x86_64 slice of a universal binary). A wrong "no" fails closed: the start-up
// self-test runs each interpreter under the profile a call gets.
func needsRosetta(goarch string, exec []string) bool {
	if goarch != "arm64" {
		return true
	}
	for _, e := range exec {
		if !hasArm64(e) {
			return true
		}
	}
	return false
}

// fatMagic64 starts a universal file whose arch table has 64-bit offsets (debug/macho
// has no name for it).
const fatMagic64 = 0xcafebabf

// hasArm64 reports whether path is a Mach-O file, thin or universal, with arm64 code. It
// reads the headers only: debug/macho would load the whole symbol table (megabytes for
// node) on every call.
func hasArm64(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var hdr [4096]byte // a universal header and its arch table (20 or 32 bytes each)
	n, _ := io.ReadFull(f, hdr[:])
	b := hdr[:n]
	if len(b) < 8 {
		return false
	}
	be, le := binary.BigEndian, binary.LittleEndian
	switch {
	case be.Uint32(b) == macho.MagicFat || be.Uint32(b) == fatMagic64:
		size := 20 // fat_arch
		if be.Uint32(b) == fatMagic64 {
			size = 32 // fat_arch_64
		}
		for i, off := uint32(0), 8; i < be.Uint32(b[4:]) && off+4 <= len(b); i, off = i+1, off+size {
			if macho.Cpu(be.Uint32(b[off:])) == macho.CpuArm64 {
				return true
			}
		}
		return false
	case le.Uint32(b) == macho.Magic64 || le.Uint32(b) == macho.Magic32:
		return macho.Cpu(le.Uint32(b[4:])) == macho.CpuArm64
	case be.Uint32(b) == macho.Magic64 || be.Uint32(b) == macho.Magic32:
		return macho.Cpu(be.Uint32(b[4:])) == macho.CpuArm64
	}
	return false
}

// Render builds the profile text and the sandbox-exec arguments that precede the
// command: -D NAME=value pairs, then -p and the text. It is pure; p must already be
// canonical (Resolve), and Render rechecks the shape of every path.
func Render(p Params) (text string, args []string, err error) {
	if len(p.Exec) == 0 {
		return "", nil, fmt.Errorf("%w: no executable", ErrUnsafePath)
	}
	if p.Workspace == "/" {
		return "", nil, fmt.Errorf("%w: workspace is /", ErrUnsafePath)
	}
	for _, v := range append([]string{p.Workspace, p.Home}, append(slices.Clone(p.Exec), p.Read...)...) {
		if err := checkPath(v); err != nil {
			return "", nil, err
		}
	}
	args = []string{"-D", "WORKSPACE=" + p.Workspace, "-D", "HOME=" + p.Home}
	exec := names("EXEC", len(p.Exec))
	read := names("READ", len(p.Read))
	for i, v := range p.Exec {
		args = append(args, "-D", exec[i]+"="+v)
	}
	for i, v := range p.Read {
		args = append(args, "-D", read[i]+"="+v)
	}

	var b strings.Builder
	b.WriteString(baseProfile)
	b.WriteString("\n; --- interpreter (rendered: parameter names only) ----------------------------------\n")
	b.WriteString("(allow process-exec")
	filters(&b, "literal", exec)
	b.WriteString(")\n(allow file-read* file-test-existence file-map-executable")
	filters(&b, "literal", exec)
	filters(&b, "subpath", read)
	// Opening a file by absolute path stats each ancestor directory first.
	b.WriteString(")\n(allow file-read-metadata file-test-existence")
	filters(&b, "path-ancestors", exec)
	filters(&b, "path-ancestors", read)
	filters(&b, "path-ancestors", []string{"WORKSPACE"})
	b.WriteString(")\n")
	if p.Rosetta {
		b.WriteString(rosettaProfile)
	}
	if p.Network {
		b.WriteString(networkProfile)
	}
	b.WriteString(secretsProfile)
	if len(read) > 0 {
		// After the read roots, so these win; a deny without filters would deny every read.
		b.WriteString("; Package managers' configuration inside the read roots (rendered: parameter names only).\n")
		b.WriteString("(deny file-read* file-write*")
		for _, r := range read {
			for _, c := range prefixConfigs {
				fmt.Fprintf(&b, "\n  (literal (string-append (param %q) %q))", r, c)
			}
		}
		b.WriteString(")\n")
	}
	b.WriteString(workspaceProfile)
	return b.String(), append(args, "-p", b.String()), nil
}

// names returns prefix_0 … prefix_{n-1}: the only generated words in the profile.
func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s_%d", prefix, i)
	}
	return out
}

func filters(b *strings.Builder, kind string, params []string) {
	for _, p := range params {
		fmt.Fprintf(b, "\n  (%s (param %q))", kind, p)
	}
}

// checkPath accepts only absolute, clean paths without NUL (argv cannot carry NUL, and an
// unclean path would never match the real path Seatbelt sees).
func checkPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%w: empty path", ErrUnsafePath)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("%w: NUL in %q", ErrUnsafePath, p)
	case !filepath.IsAbs(p) || filepath.Clean(p) != p:
		return fmt.Errorf("%w: %q is not absolute and clean", ErrUnsafePath, p)
	}
	return nil
}

func realPath(what, p string) (string, error) {
	if err := checkPath(filepath.Clean(p)); err != nil || !filepath.IsAbs(p) {
		return "", fmt.Errorf("%s: %w: %q", what, ErrUnsafePath, p)
	}
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", what, err)
	}
	return r, nil
}

// realPathIfExists resolves p, or keeps it cleaned when it does not exist: a missing home
// directory has no secrets to hide, but the deny rules still need a value.
func realPathIfExists(what, p string) (string, error) {
	r, err := realPath(what, p)
	if err != nil && errors.Is(err, ErrUnsafePath) {
		return "", err
	}
	if err != nil {
		return filepath.Clean(p), nil
	}
	return r, nil
}

func appendBoth(list []string, what, p string) ([]string, error) {
	r, err := realPath(what, p)
	if err != nil {
		return nil, err
	}
	for _, v := range []string{filepath.Clean(p), r} {
		if !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	return list, nil
}

// within reports whether path is root or lies under it.
func within(path, root string) bool {
	if root == "/" {
		return true
	}
	return path == root || strings.HasPrefix(path, root+"/")
}
