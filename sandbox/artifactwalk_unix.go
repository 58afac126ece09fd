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
	"slices"
	"syscall"
)

// artifactPathMax is the longest relative path WalkArtifacts lists, as the Linux init
// walker's PATH_MAX buffer bounds it.
const artifactPathMax = 4096

// artifactBatch is how many names a walker reads from a directory at a time.
const artifactBatch = 256

// WalkArtifacts returns the regular files under outDir in root, decided by the rules
// every OS shares (above, in artifacts.go), so a client gets the same list and the same
// reasons from it as from the Linux init's walker. It is the walker of darwin's
// workspace and of a Linux session's, after each call.
//
// Everything under root was written by hostile code: a symlink, FIFO, device or hard
// link (nlink > 1: it could be a second name of a host file) is listed as skipped,
// never opened or followed. The type is checked by lstat and again by fstat on the
// O_NOFOLLOW|O_NONBLOCK descriptor. Every name is resolved by an os.Root, which refuses
// one that leads outside it (a "..", an absolute symlink, a symlinked outDir swapped in
// while the walk runs), so nothing outside root is ever read.
//
// Its cost is the server's, so it is bounded by MaxArtifactWalk, not by what the program
// made: each directory is read by names in batches (Readdirnames: a directory read from
// an os.Root as DirEntries lstats every entry, 65,534 of them cost 280 ms and 86 MB),
// only an entry the walk decides about is lstatted, and a walk that runs out of its
// budget says so in its closing entry.
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
	top, err := root.OpenRoot(local)
	if err != nil {
		return nil, nil // swapped since the lstat: as above
	}
	defer top.Close()
	w := &artifactWalker{lim: lim, left: MaxArtifactWalk}
	err = w.dir(top, "", 0)
	switch {
	case w.cut:
		w.out = append(w.out, CutArtifact(w.unlisted))
	case w.unlisted > 0:
		w.out = append(w.out, UnlistedArtifact(w.unlisted))
	}
	if err != nil {
		return w.out, fmt.Errorf("walk output dir: %w", err)
	}
	return w.out, nil
}

// artifactWalker is one walk of the output directory: what it listed and returned so far,
// and what is left of its budget.
type artifactWalker struct {
	lim      ArtifactLimits
	out      []Artifact
	returned int
	total    int64
	unlisted int
	left     int  // entries the walk may still read (MaxArtifactWalk)
	cut      bool // a directory held more entries than the walk read
}

// names reads dir's names within the walk's budget, in batches, sorted. A directory
// still holding one when the budget is spent cuts the walk.
func (w *artifactWalker) names(dir *os.Root) ([]string, error) {
	f, err := dir.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var names []string
	for w.left > 0 {
		batch, err := f.Readdirnames(min(artifactBatch, w.left))
		w.left -= len(batch)
		names = append(names, batch...)
		if err != nil { // io.EOF: all read; another error ends this directory only
			slices.Sort(names)
			return names, nil
		}
	}
	if more, _ := f.Readdirnames(1); len(more) > 0 {
		w.cut = true
	}
	slices.Sort(names)
	return names, nil
}

// dir lists the entries of dir, whose path below the output directory is rel, at level
// depth (the output directory is 0), depth first.
func (w *artifactWalker) dir(dir *os.Root, rel string, depth int) error {
	names, err := w.names(dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		p := name
		if rel != "" {
			p = rel + "/" + name
		}
		if len(p) >= artifactPathMax {
			w.skip(name, 0, SkipPathTooLong)
			continue
		}
		fi, err := dir.Lstat(name)
		if err != nil {
			continue // gone since the directory was read
		}
		switch mode := fi.Mode(); {
		case mode.IsDir():
			if depth+1 >= MaxArtifactDepth {
				w.skip(p, 0, SkipTooDeep)
				continue
			}
			sub, err := dir.OpenRoot(name)
			if err != nil {
				continue // an unreadable subdirectory costs only its own files
			}
			_ = w.dir(sub, p, depth+1)
			sub.Close()
		case mode&fs.ModeSymlink != 0:
			w.skip(p, 0, SkipSymlink)
		case !mode.IsRegular():
			w.skip(p, 0, SkipNotRegular)
		default:
			w.file(dir, name, p, fi)
		}
	}
	return nil
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

// file decides about one regular file, name in dir, from its lstat, then reads it
// through a descriptor that must still be that file.
func (w *artifactWalker) file(dir *os.Root, name, rel string, fi fs.FileInfo) {
	if w.full() {
		return
	}
	size, links := fi.Size(), uint64(2) // without a link count, as a hard link
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		links = uint64(st.Nlink)
	}
	if why := w.lim.Check(w.returned, w.total, size, links); why != SkipNone {
		w.skip(rel, size, why)
		return
	}
	f, err := dir.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
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
