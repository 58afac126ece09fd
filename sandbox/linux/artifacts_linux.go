package linux

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/sandbox"
)

// maxArtifactDepth bounds the walk of the output directory.
const maxArtifactDepth = 8

// maxArtifactEntries bounds how many entries are listed, returned or not: a program that
// leaves 60,000 files in out/ must not flood the result. The rest are counted in one
// closing entry.
const maxArtifactEntries = 256

// collectArtifacts reads the regular files under dir. It runs in the init after every
// process of the sandbox is dead, so nothing can change the tree while it is read, and
// it trusts nothing in it: each component is opened with O_NOFOLLOW relative to its
// parent, so a symlink (to /etc, or to the host via /proc) is never followed; FIFOs,
// devices and sockets are skipped unopened; files with more than one link are skipped
// because a hard link may name a file outside the output directory.
func collectArtifacts(dir string, lim sandbox.ArtifactLimits) []sandbox.Artifact {
	fd, err := openDirNoFollow(dir)
	if err != nil {
		return nil
	}
	c := &collector{lim: lim}
	c.walk(fd, "", 0)
	unix.Close(fd)
	if c.unlisted > 0 {
		c.out = append(c.out, sandbox.Artifact{Path: "...",
			Skipped: fmt.Sprintf("%d more entries not listed (at most %d are)", c.unlisted, maxArtifactEntries)})
	}
	return c.out
}

type collector struct {
	lim      sandbox.ArtifactLimits
	out      []sandbox.Artifact
	count    int
	total    int64
	unlisted int
}

// full reports whether no more entries may be listed, counting the one at hand.
func (c *collector) full() bool {
	if len(c.out) < maxArtifactEntries {
		return false
	}
	c.unlisted++
	return true
}

func openDirNoFollow(p string) (int, error) {
	fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for _, part := range strings.Split(strings.Trim(path.Clean(p), "/"), "/") {
		next, err := unix.Openat(fd, part, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

func (c *collector) walk(dirfd int, rel string, depth int) {
	names, err := readDirNames(dirfd)
	if err != nil {
		return
	}
	sort.Strings(names)
	for _, name := range names {
		p := path.Join(rel, name)
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if depth+1 >= maxArtifactDepth {
				c.skip(p, 0, "directory too deep")
				continue
			}
			sub, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				continue
			}
			c.walk(sub, p, depth+1)
			unix.Close(sub)
		case unix.S_IFREG:
			c.file(dirfd, name, p, &st)
		case unix.S_IFLNK:
			c.skip(p, 0, "symlink")
		default:
			c.skip(p, 0, "not a regular file")
		}
	}
}

func (c *collector) skip(p string, size int64, why string) {
	if c.full() {
		return
	}
	c.out = append(c.out, sandbox.Artifact{Path: p, Size: size, Skipped: why})
}

func (c *collector) file(dirfd int, name, p string, st *unix.Stat_t) {
	size := st.Size
	if len(c.out) >= maxArtifactEntries {
		c.unlisted++
		return
	}
	switch {
	case st.Nlink > 1:
		c.skip(p, size, "hard link")
		return
	case c.lim.MaxFiles > 0 && c.count >= c.lim.MaxFiles:
		c.skip(p, size, "too many files")
		return
	case c.lim.MaxFileBytes > 0 && size > c.lim.MaxFileBytes:
		c.skip(p, size, "file too large")
		return
	case c.lim.MaxTotal > 0 && c.total+size > c.lim.MaxTotal:
		c.skip(p, size, "total size cap reached")
		return
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		c.skip(p, size, "unreadable")
		return
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	var st2 unix.Stat_t
	if err := unix.Fstat(fd, &st2); err != nil || st2.Ino != st.Ino || st2.Dev != st.Dev ||
		st2.Mode&unix.S_IFMT != unix.S_IFREG {
		c.skip(p, size, "changed while read")
		return
	}
	data, err := io.ReadAll(io.LimitReader(f, size+1))
	if err != nil || int64(len(data)) != size {
		c.skip(p, size, "changed while read")
		return
	}
	sum := sha256.Sum256(data)
	c.count++
	c.total += size
	c.out = append(c.out, sandbox.Artifact{Path: p, Size: size, SHA256: hex.EncodeToString(sum[:]), Data: data})
}

// readDirNames lists a directory through its descriptor without following anything.
func readDirNames(dirfd int) ([]string, error) {
	dup, err := unix.Dup(dirfd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	return f.Readdirnames(-1)
}
