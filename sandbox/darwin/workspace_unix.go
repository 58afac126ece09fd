//go:build unix

// The workspace code is plain POSIX file I/O, so it builds on every unix and its tests run
// on Linux too; only the darwin backend calls it.

package darwin

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/sandbox"
)

// pathMax is the longest relative path the walker lists, as the Linux walker's
// PATH_MAX buffer bounds it.
const pathMax = 4096

// maxSocketPath is the longest unix socket path macOS accepts (sun_path is 104 bytes,
// NUL included).
const maxSocketPath = 103

// socketDepth is how much Python's multiprocessing adds to TMPDIR for a Manager's socket:
// /pymp-XXXXXXXX/listener-XXXXXXXX.
const socketDepth = len("/pymp-XXXXXXXX/listener-XXXXXXXX")

// workspaceFits reports whether sockets made under a workspace in parent stay within
// maxSocketPath: parent/airlock-NNNNNNNNNN/tmp plus socketDepth.
func workspaceFits(parent string) bool {
	return len(parent)+len("/airlock-1234567890/tmp")+socketDepth <= maxSocketPath
}

// privateDir makes dir a directory only uid can enter, or checks that it already is one:
// it may live in a shared place such as /private/tmp, where another user could have
// made it first, as a symlink or with a looser mode, to read or plant workspaces.
func privateDir(dir string, uid int) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("check %s: %w", dir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory (a symlink?)", dir)
	case !ok || int(st.Uid) != uid:
		return fmt.Errorf("%s belongs to another user", dir)
	case fi.Mode().Perm() != 0o700:
		return fmt.Errorf("%s has mode %v, want 0700", dir, fi.Mode().Perm())
	}
	return nil
}

// workspace is one run's private directory tree.
type workspace struct {
	dir string // canonical (EvalSymlinks'd) path
	tmp string // TMPDIR inside dir
}

// newWorkspace creates a fresh directory under parent and fills it: code file, input
// files, TMPDIR and the output directory. Every file is created with O_EXCL|O_NOFOLLOW
// through an os.Root, so no name can step outside or through a symlink.
func newWorkspace(parent string, spec sandbox.Spec) (*workspace, error) {
	dir, err := os.MkdirTemp(parent, "airlock-")
	if err != nil {
		return nil, fmt.Errorf("create workspace: %w", err)
	}
	ws := &workspace{dir: dir}
	if ws.dir, err = filepath.EvalSymlinks(dir); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("resolve workspace: %w", err)
	}
	ws.tmp = filepath.Join(ws.dir, "tmp")
	if err := ws.fill(spec); err != nil {
		_ = os.RemoveAll(ws.dir)
		return nil, err
	}
	return ws, nil
}

func (ws *workspace) fill(spec sandbox.Spec) error {
	root, err := os.OpenRoot(ws.dir)
	if err != nil {
		return fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	if err := root.Mkdir("tmp", 0o700); err != nil {
		return fmt.Errorf("create tmp: %w", err)
	}
	if spec.CodeFile != "" {
		if err := writeNew(root, spec.CodeFile, spec.Code, 0o644); err != nil {
			return err
		}
	}
	for _, f := range spec.Files {
		if err := writeNew(root, f.Path, f.Data, f.Mode.Perm()); err != nil {
			return err
		}
	}
	if spec.OutDir != "" {
		name, err := localName(spec.OutDir)
		if err != nil {
			return err
		}
		if err := root.MkdirAll(name, 0o755); err != nil {
			return fmt.Errorf("create output dir: %w", err)
		}
	}
	return nil
}

// localName turns a slash-separated workspace-relative name into a local path, refusing
// absolute names, "..", and empty names even though policy checked them already.
func localName(name string) (string, error) {
	local := filepath.FromSlash(name)
	if name == "" || !filepath.IsLocal(local) || path.Clean(name) != name {
		return "", fmt.Errorf("%w: workspace path %q", sandbox.ErrInvalidSpec, name)
	}
	return local, nil
}

func writeNew(root *os.Root, name string, data []byte, perm fs.FileMode) error {
	local, err := localName(name)
	if err != nil {
		return err
	}
	if perm == 0 {
		perm = 0o644
	}
	if dir := filepath.Dir(local); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create dir for %q: %w", name, err)
		}
	}
	// O_EXCL refuses an existing name, symlink or not; O_NOFOLLOW makes that explicit.
	f, err := root.OpenFile(local, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm&0o777)
	if err != nil {
		return fmt.Errorf("create %q: %w", name, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %q: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %q: %w", name, err)
	}
	return nil
}

// artifacts returns the regular files under outDir, decided by the rules every OS
// shares (sandbox/artifacts.go), so a client gets the same list and the same reasons
// here as from the Linux walker. Everything in the workspace was written by hostile
// code: a symlink, FIFO, device or hard link (nlink > 1: it could be a second name of a
// host file) is listed as skipped, never opened or followed. The type is checked by
// lstat and again by fstat on the O_NOFOLLOW|O_NONBLOCK descriptor.
func (ws *workspace) artifacts(outDir string, lim sandbox.ArtifactLimits) ([]sandbox.Artifact, error) {
	if outDir == "" {
		return nil, nil
	}
	local, err := localName(outDir)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(ws.dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	if fi, err := root.Lstat(local); err != nil || !fi.IsDir() {
		// Removed or replaced by a symlink or file: there is nothing trustworthy to return.
		return nil, nil
	}
	w := &walker{root: root, lim: lim}
	top := filepath.ToSlash(local)
	visited := 0
	err = fs.WalkDir(root.FS(), top, func(p string, d fs.DirEntry, err error) error {
		visited++
		if visited > sandbox.MaxArtifactWalk {
			return fs.SkipAll
		}
		if err != nil || p == top {
			return nil // an unreadable subdirectory costs only its own files
		}
		rel := strings.TrimPrefix(p, top+"/")
		switch {
		case len(rel) >= pathMax:
			w.skip(d.Name(), 0, sandbox.SkipPathTooLong)
		case d.IsDir():
			if strings.Count(rel, "/")+1 >= sandbox.MaxArtifactDepth {
				w.skip(rel, 0, sandbox.SkipTooDeep)
				return fs.SkipDir
			}
		case d.Type()&fs.ModeSymlink != 0:
			w.skip(rel, 0, sandbox.SkipSymlink)
		case !d.Type().IsRegular():
			w.skip(rel, 0, sandbox.SkipNotRegular)
		default:
			w.file(filepath.FromSlash(p), rel, d)
		}
		return nil
	})
	if w.unlisted > 0 {
		w.out = append(w.out, sandbox.UnlistedArtifact(w.unlisted))
	}
	if err != nil {
		return w.out, fmt.Errorf("walk output dir: %w", err)
	}
	return w.out, nil
}

// walker is one walk of the output directory: what it listed and returned so far.
type walker struct {
	root     *os.Root
	lim      sandbox.ArtifactLimits
	out      []sandbox.Artifact
	returned int
	total    int64
	unlisted int
}

// full reports whether the list is at MaxArtifactEntries, counting the entry left out.
func (w *walker) full() bool {
	if len(w.out) < sandbox.MaxArtifactEntries {
		return false
	}
	w.unlisted++
	return true
}

func (w *walker) skip(rel string, size int64, why sandbox.Skip) {
	if !w.full() {
		w.out = append(w.out, sandbox.Artifact{Path: rel, Size: size, Skipped: why.Reason()})
	}
}

// file decides about one regular file from its lstat, then reads it through a
// descriptor that must still be that file.
func (w *walker) file(name, rel string, d fs.DirEntry) {
	if w.full() {
		return
	}
	fi, err := d.Info()
	if err != nil {
		return // gone since the directory was read
	}
	size, links := fi.Size(), uint64(2) // without a link count, as a hard link
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		links = uint64(st.Nlink)
	}
	if why := w.lim.Check(w.returned, w.total, size, links); why != sandbox.SkipNone {
		w.skip(rel, size, why)
		return
	}
	f, err := w.root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		w.skip(rel, size, sandbox.SkipUnreadable)
		return
	}
	defer f.Close()
	if fi2, err := f.Stat(); err != nil || !os.SameFile(fi, fi2) || !fi2.Mode().IsRegular() {
		w.skip(rel, size, sandbox.SkipChanged)
		return
	}
	// One byte past the size: a file that grew since the lstat is not the file decided on.
	data, err := io.ReadAll(io.LimitReader(f, size+1))
	if err != nil || int64(len(data)) != size {
		w.skip(rel, size, sandbox.SkipChanged)
		return
	}
	w.returned++
	w.total += size
	h := sha256.Sum256(data)
	w.out = append(w.out, sandbox.Artifact{Path: rel, Size: size, SHA256: hex.EncodeToString(h[:]), Data: data})
}

// remove deletes the workspace. Hostile code may have made directories unwritable or
// immutable; those are opened up and the removal retried. Every change goes through a
// descriptor opened inside the workspace with os.Root and O_NOFOLLOW, so a directory
// swapped for a symlink meanwhile can never redirect a chmod or chflags to a host path.
// clearFlags, when set, clears immutable flags on such a descriptor (fchflags on darwin).
func (ws *workspace) remove(clearFlags func(*os.File) error) error {
	err := os.RemoveAll(ws.dir)
	if err == nil {
		return nil
	}
	root, rerr := os.OpenRoot(ws.dir)
	if rerr != nil {
		return fmt.Errorf("remove workspace: %w", err)
	}
	defer root.Close()
	_ = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return nil // flags and modes are never changed through a symlink
		}
		f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			// A directory made unreadable (mode 000) cannot be opened: change its mode
			// through its parent's descriptor, without following a symlink.
			if d.IsDir() && p != "." {
				if parent, perr := root.Open(path.Dir(p)); perr == nil {
					_ = unix.Fchmodat(int(parent.Fd()), path.Base(p), 0o700, unix.AT_SYMLINK_NOFOLLOW)
					parent.Close()
				}
			}
			return nil
		}
		defer f.Close()
		if clearFlags != nil {
			_ = clearFlags(f)
		}
		if d.IsDir() {
			// f is a descriptor opened inside the workspace through os.Root with
			// O_NOFOLLOW: fchmod resolves no path, so nothing can be swapped under it.
			_ = f.Chmod(0o700) //nolint:gosec // G122: see above
		}
		return nil
	})
	if err := os.RemoveAll(ws.dir); err != nil {
		return fmt.Errorf("remove workspace: %w", err)
	}
	return nil
}
