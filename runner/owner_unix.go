//go:build unix

package runner

import (
	"os"
	"syscall"
)

// ownedByMe reports whether fi belongs to this process's effective uid.
func ownedByMe(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}
