//go:build unix

package trust

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// openFlags: OpenAppend's open must not follow a symlink, wait for a FIFO's reader, or
// take a tty as the controlling terminal.
const openFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_NOCTTY

func isLoop(err error) bool { return errors.Is(err, syscall.ELOOP) }

// Owner reports whether fi belongs to root or to this process's effective uid.
func Owner(fi os.FileInfo) bool {
	_, foreign := foreignOwner(fi)
	return !foreign
}

func foreignOwner(fi os.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, true
	}
	return st.Uid, st.Uid != 0 && int(st.Uid) != os.Geteuid()
}

func writableByOthers(m fs.FileMode) bool { return m&0o022 != 0 }

// links is fi's number of hard links (1 where it cannot be told).
func links(fi os.FileInfo) uint64 {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 1
	}
	return uint64(st.Nlink) // uint16 on darwin, uint32 or uint64 elsewhere
}
