//go:build unix

package stamp

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

const oNoFollow = syscall.O_NOFOLLOW

// private reports whether fi belongs to the effective uid and no one else may write it
// (a directory: nor enter it).
func private(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) != os.Geteuid() {
		return false
	}
	if fi.IsDir() {
		return fi.Mode().Perm()&0o077 == 0
	}
	return fi.Mode().Perm()&0o022 == 0
}

// fileID is path's identity (following symlinks): what changes when it is replaced or
// rewritten.
func fileID(path string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d:%d:%d:%d.%d:%d.%d", st.Dev, st.Ino, st.Size,
		st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec), nil
}
