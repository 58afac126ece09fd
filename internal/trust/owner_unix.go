//go:build unix

package trust

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

const noFollow = syscall.O_NOFOLLOW

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
