package policy

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The host reads an environment's metadata as the server's user, often root, and
// get_config shows what it found to every client; the environment's files are whatever
// its packages' installers wrote. So every read of the environment's files goes through
// an os.Root at the environment's directory: a symlink may point anywhere inside the
// environment's own tree (npm's file: dependencies and pnpm's store are relative links
// into it; an absolute link is refused even into it, as it names the host's path, which
// the sandbox, seeing the environment at /env, does not have) but not out of it, to a
// host file whose Name:/Version: or "name"/"version"
// lines would reach any client. Only regular files are read, opened non-blocking (a
// FIFO opened for reading would block the server's start until a writer came), and
// each read and listing is bounded (a device or a huge file would not be read whole).
// A system site directory (the base interpreter's, below /usr) is its own root.

const (
	// maxManifest bounds a package.json (the largest in a big node_modules is about
	// 200 KiB) and the prefix of a METADATA or PKG-INFO read for its headers.
	maxManifest = 1 << 20
	// maxSmallFile bounds pyvenv.cfg and top_level.txt.
	maxSmallFile = 64 << 10
	// maxEntries bounds the directory entries one inspection lists, across its site
	// directories or node_modules (a large environment has a few thousand).
	maxEntries = 50_000
)

var errNotRegular = errors.New("not a regular file")

// envRoot opens the root dir's reads must stay below, and dir's path within it: the
// environment's own directory when dir is inside it, else dir itself.
func (e *Environment) envRoot(dir string) (*os.Root, string, error) {
	if e.Path != "" && within(dir, e.Path) {
		rel, err := filepath.Rel(e.Path, dir)
		if err != nil {
			return nil, "", err
		}
		r, err := os.OpenRoot(e.Path)
		return r, rel, err
	}
	r, err := os.OpenRoot(dir)
	return r, ".", err
}

// openRegular opens a regular file below root for reading.
func openRegular(root *os.Root, name string) (*os.File, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|fileOpenFlags, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s: %w", name, errNotRegular)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readWhole reads a regular file below root of at most limit bytes: a larger one is an
// error, as a file cut is of no use.
func readWhole(root *os.Root, name string, limit int64) ([]byte, error) {
	f, err := openRegular(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(data)) > limit {
		err = fmt.Errorf("%s: larger than %d bytes", name, limit)
	}
	return data, err
}

// readDir lists a directory below root, sorted, within the inspection's entry budget.
func (e *Environment) readDir(root *os.Root, name string) []fs.DirEntry {
	f, err := root.OpenFile(name, os.O_RDONLY|dirOpenFlags, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []fs.DirEntry
	for e.entries < maxEntries {
		batch, err := f.ReadDir(min(1024, maxEntries-e.entries))
		e.entries += len(batch)
		out = append(out, batch...)
		if err != nil {
			slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
			return out
		}
	}
	// The budget is spent: an entry left here (or a directory not read at all) means the
	// package list is incomplete, which get_config and the log must say.
	if more, _ := f.ReadDir(1); len(more) > 0 && e.Warning == "" {
		e.Warning = fmt.Sprintf("the inspection stopped after %d directory entries: packages past them are not listed", maxEntries)
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out
}
