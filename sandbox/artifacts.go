package sandbox

import (
	"fmt"
	"strings"
)

// The rules for what comes back from the output directory, the same on every OS: the
// Linux init's C walker (sandbox/linux/artifacts_linux.c) and the darwin walker
// (sandbox/darwin/workspace_unix.go) make these decisions in this order, and the reason
// a client sees for a file not returned is one of Skip's, whichever OS ran the program.
//
//   - The walk is depth first, each directory's entries in byte order of their names,
//     into at most MaxArtifactDepth-1 levels of subdirectories; a directory deeper than
//     that is listed as SkipTooDeep and not entered.
//   - A symlink, FIFO, device or socket is listed as skipped and never opened or followed.
//   - A regular file is decided from its lstat by ArtifactLimits.Check (hard link, count,
//     size, total), then read through a descriptor opened with O_NOFOLLOW; one that is
//     not the file the lstat saw, or not of that size, is SkipChanged.
//   - At most MaxArtifactEntries entries are listed, returned or not: the rest are
//     counted in one closing entry, UnlistedArtifact.
//   - At most MaxArtifactWalk entries are read from the directories, in the kernel's
//     order, each directory's sorted once read: when a directory still holds more as
//     the budget runs out, the walk is cut, and the closing entry is CutArtifact. So a
//     cut list is sorted within what was read, not over the whole directory.
//   - Every cap is positive (ArtifactLimits.Validate): a backend refuses a spec with an
//     output directory and a zero cap, never reading it as "no cap" or a default.

// MaxArtifactEntries bounds how many entries are listed, returned or not: a program that
// leaves 60,000 files in out/ must not flood the result.
const MaxArtifactEntries = 256

// MaxArtifactDepth bounds the walk: the output directory is level 0, and a directory at
// level MaxArtifactDepth is not entered.
const MaxArtifactDepth = 8

// MaxArtifactWalk bounds how many directory entries a walker reads in all, so that a
// walk's cost (the server's own, for a session's workspace or darwin's) does not grow
// with what the program made: the workspace's 65,534 inodes cost a walk that read them
// all 280 ms and 86 MB of the server's. A walk that stops at it with entries unread
// closes with CutArtifact, never silently.
const MaxArtifactWalk = 4096

// Validate refuses a zero or negative cap, naming it: the configuration fills them all
// (artifacts.max_files = 0 turns artifacts off before a spec has an output directory).
func (l ArtifactLimits) Validate() error {
	var bad []string
	if l.MaxFiles <= 0 {
		bad = append(bad, "max_files")
	}
	if l.MaxFileBytes <= 0 {
		bad = append(bad, "max_file_bytes")
	}
	if l.MaxTotal <= 0 {
		bad = append(bad, "max_total")
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: artifact caps %s must be positive", ErrInvalidSpec, strings.Join(bad, ", "))
	}
	return nil
}

// Skip is why an entry of the output directory was not returned. The values are the
// Linux walker's wire codes too (ART_* in sandbox/linux/protocol_linux.h).
type Skip uint8

const (
	SkipNone         Skip = iota // returned
	SkipHardLink                 // more than one link: it may be a second name of a host file
	SkipTooManyFiles             // MaxFiles files already returned
	SkipFileTooLarge             // over MaxFileBytes
	SkipTotalCap                 // would take the returned bytes over MaxTotal
	SkipUnreadable               // could not be opened
	SkipChanged                  // not the file the walk saw, or not of its size, when read
	SkipPathTooLong              // a path beyond PATH_MAX
	SkipSymlink                  // never followed
	SkipNotRegular               // a FIFO, device or socket: never opened
	SkipTooDeep                  // a directory at MaxArtifactDepth
	skipEnd
)

var skipReasons = [skipEnd]string{
	SkipNone:         "",
	SkipHardLink:     "hard link",
	SkipTooManyFiles: "too many files",
	SkipFileTooLarge: "file too large",
	SkipTotalCap:     "total size cap reached",
	SkipUnreadable:   "unreadable",
	SkipChanged:      "changed while read",
	SkipPathTooLong:  "path too long",
	SkipSymlink:      "symlink",
	SkipNotRegular:   "not a regular file",
	SkipTooDeep:      "directory too deep",
}

// Reason is what Artifact.Skipped says for s: empty for SkipNone.
func (s Skip) Reason() string {
	if s < skipEnd {
		return skipReasons[s]
	}
	return fmt.Sprintf("skipped (%d)", s)
}

// Valid reports whether s is one of the reasons above.
func (s Skip) Valid() bool { return s < skipEnd }

// Check decides about a regular file before it is read, from its lstat (size, links),
// with returned files and their total bytes so far. l has its floors.
func (l ArtifactLimits) Check(returned int, total, size int64, links uint64) Skip {
	switch {
	case links > 1:
		return SkipHardLink
	case returned >= l.MaxFiles:
		return SkipTooManyFiles
	case size > l.MaxFileBytes:
		return SkipFileTooLarge
	case total+size > l.MaxTotal:
		return SkipTotalCap
	}
	return SkipNone
}

// UnlistedArtifact is the closing entry of a list that stopped at MaxArtifactEntries,
// counting the n entries left out.
func UnlistedArtifact(n int) Artifact {
	return Artifact{Path: "...", Skipped: fmt.Sprintf("%d more entries not listed (at most %d are)", n, MaxArtifactEntries)}
}

// CutArtifact is the closing entry of a walk that stopped at MaxArtifactWalk entries read
// with more in the output directory, counting the n entries read but not listed.
func CutArtifact(n int) Artifact {
	return Artifact{Path: "...", Skipped: fmt.Sprintf("%d more entries not listed, and the walk stopped after reading %d entries: the output directory holds more", n, MaxArtifactWalk)}
}
