//go:build unix

package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// artifactPathMax is the longest relative path WalkArtifacts lists, as the Linux init
// walker's PATH_MAX buffer bounds it.
const artifactPathMax = 4096

// WalkArtifacts returns the regular files under outDir in root, decided by the rules
// every OS shares (above, in artifacts.go), so a client gets the same list and the same
// reasons from it as from the Linux init's walker. It is the walker of darwin's
// workspace and of a Linux session's, after each call.
//
// Everything under root was written by hostile code: a symlink, FIFO, device or hard
// link (nlink > 1: it could be a second name of a host file) is listed as skipped,
// never opened or followed. The type is checked by lstat and again by fstat on the
// O_NOFOLLOW|O_NONBLOCK descriptor. Every name is resolved by root, which refuses one
// that leads outside it (a "..", an absolute symlink, a symlinked outDir swapped in
// while the walk runs), so nothing outside root is ever read.
func WalkArtifacts(root *os.Root, outDir string, lim ArtifactLimits) ([]Artifact, error) {
	if outDir == "" {
		return nil, nil
	}
	local := filepath.FromSlash(outDir)
	if !filepath.IsLocal(local) || path.Clean(outDir) != outDir {
		return nil, fmt.Errorf("%w: output dir %q", ErrInvalidSpec, outDir)
	}
	if fi, err := root.Lstat(local); err != nil || !fi.IsDir() {
		// Removed or replaced by a symlink or file: there is nothing trustworthy to return.
		return nil, nil
	}
	w := &artifactWalker{root: root, lim: lim}
	top := filepath.ToSlash(local)
	visited := 0
	err := fs.WalkDir(root.FS(), top, func(p string, d fs.DirEntry, err error) error {
		visited++
		if visited > MaxArtifactWalk {
			return fs.SkipAll
		}
		if err != nil || p == top {
			return nil // an unreadable subdirectory costs only its own files
		}
		rel := strings.TrimPrefix(p, top+"/")
		switch {
		case len(rel) >= artifactPathMax:
			w.skip(d.Name(), 0, SkipPathTooLong)
		case d.IsDir():
			if strings.Count(rel, "/")+1 >= MaxArtifactDepth {
				w.skip(rel, 0, SkipTooDeep)
				return fs.SkipDir
			}
		case d.Type()&fs.ModeSymlink != 0:
			w.skip(rel, 0, SkipSymlink)
		case !d.Type().IsRegular():
			w.skip(rel, 0, SkipNotRegular)
		default:
			w.file(filepath.FromSlash(p), rel, d)
		}
		return nil
	})
	if w.unlisted > 0 {
		w.out = append(w.out, UnlistedArtifact(w.unlisted))
	}
	if err != nil {
		return w.out, fmt.Errorf("walk output dir: %w", err)
	}
	return w.out, nil
}

// artifactWalker is one walk of the output directory: what it listed and returned so far.
type artifactWalker struct {
	root     *os.Root
	lim      ArtifactLimits
	out      []Artifact
	returned int
	total    int64
	unlisted int
}

// full reports whether the list is at MaxArtifactEntries, counting the entry left out.
func (w *artifactWalker) full() bool {
	if len(w.out) < MaxArtifactEntries {
		return false
	}
	w.unlisted++
	return true
}

func (w *artifactWalker) skip(rel string, size int64, why Skip) {
	if !w.full() {
		w.out = append(w.out, Artifact{Path: rel, Size: size, Skipped: why.Reason()})
	}
}

// file decides about one regular file from its lstat, then reads it through a
// descriptor that must still be that file.
func (w *artifactWalker) file(name, rel string, d fs.DirEntry) {
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
	if why := w.lim.Check(w.returned, w.total, size, links); why != SkipNone {
		w.skip(rel, size, why)
		return
	}
	f, err := w.root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		w.skip(rel, size, SkipUnreadable)
		return
	}
	defer f.Close()
	if fi2, err := f.Stat(); err != nil || !os.SameFile(fi, fi2) || !fi2.Mode().IsRegular() {
		w.skip(rel, size, SkipChanged)
		return
	}
	// One byte past the size: a file that grew since the lstat is not the file decided on.
	data, err := io.ReadAll(io.LimitReader(f, size+1))
	if err != nil || int64(len(data)) != size {
		w.skip(rel, size, SkipChanged)
		return
	}
	w.returned++
	w.total += size
	h := sha256.Sum256(data)
	w.out = append(w.out, Artifact{Path: rel, Size: size, SHA256: hex.EncodeToString(h[:]), Data: data})
}
