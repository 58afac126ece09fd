// Package trust says whether a file the server takes its settings from (the
// configuration file, the tokens file) could have been written by a user of the host
// other than root and the server's own: whoever may write it chooses the server's
// isolation, or its clients.
package trust

import (
	"fmt"
	"os"
)

// Private refuses fi when a user other than root or this process's effective user
// could change its content: it belongs to another user, or its group or every user may
// write it. what names the file in the error, which says the fix. fi must be the
// opened file's (f.Stat), so a path swapped after the open changes nothing.
func Private(what string, fi os.FileInfo) error {
	if uid, ok := foreignOwner(fi); ok {
		return fmt.Errorf("%s belongs to uid %d, who may change it: it must be root's or this server's user's (chown it)", what, uid)
	}
	if m := fi.Mode().Perm(); writableByOthers(m) {
		return fmt.Errorf("%s: mode %04o lets other users change it: chmod go-w it", what, m)
	}
	return nil
}

// OpenAppend opens path for appending, creating it 0600, and never through a symlink at
// its last component: the server (root, often) appends its log and audit lines there, and
// whoever could plant a symlink in the file's directory would choose the file they land
// in (/etc/passwd, a cron file). A path that is a symlink fails with ELOOP, named.
func OpenAppend(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|noFollow, 0o600)
	if err != nil && isLoop(err) {
		return nil, fmt.Errorf("%s is a symlink, which the server does not follow to append to: give the file's own path: %w", path, err)
	}
	return f, err
}
