//go:build unix

package policy

import (
	"os"
	"syscall"
)

// trustedOwner reports whether fi belongs to root or to this process's effective uid.
func trustedOwner(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && (st.Uid == 0 || int(st.Uid) == os.Geteuid())
}
