//go:build unix

package serve

import "syscall"

// maxConns is half the process's soft limit on open files (see connLimit), or 0 when it
// cannot be read.
func maxConns() int {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) != nil || r.Cur > 1<<30 {
		return 0
	}
	return int(r.Cur / 2)
}
