//go:build unix

// The workspace code is plain POSIX file I/O, so it builds on every unix and its tests run
// on Linux too; only the darwin backend calls it.

package darwin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"

	"github.com/airlock-mcp/airlock/sandbox"
)

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

// artifacts returns the regular files under outDir, by sandbox.WalkArtifacts: the
// rules every OS shares (sandbox/artifacts.go).
func (ws *workspace) artifacts(outDir string, lim sandbox.ArtifactLimits) ([]sandbox.Artifact, error) {
	if outDir == "" {
		return nil, nil
	}
	root, err := os.OpenRoot(ws.dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	return sandbox.WalkArtifacts(root, outDir, lim)
}

// remove deletes the workspace (sandbox.RemoveTree: hostile code may have made
// directories unwritable or immutable). clearFlags, when set, clears immutable flags
// (fchflags on darwin).
func (ws *workspace) remove(clearFlags func(*os.File) error) error {
	if err := sandbox.RemoveTree(ws.dir, clearFlags); err != nil {
		return fmt.Errorf("remove workspace: %w", err)
	}
	return nil
}
