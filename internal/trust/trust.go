// Package trust says whether a file the server takes its settings from (the
// configuration file, the tokens file) could have been written by a user of the host
// other than root and the server's own: whoever may write it chooses the server's
// isolation, or its clients.
package trust

import (
	"errors"
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

// ErrNotRegular: a file the server reads its settings from or appends to is not a regular
// file (a FIFO, a device, a directory, a socket).
var ErrNotRegular = errors.New("not a regular file")

// Regular refuses fi unless it is a regular file, naming what it is instead. what names
// the file in the error; the error wraps ErrNotRegular.
func Regular(what string, fi os.FileInfo) error {
	if fi.Mode().IsRegular() {
		return nil
	}
	return fmt.Errorf("%s is %s, %w", what, Kind(fi.Mode()), ErrNotRegular)
}

// Kind names what a file that is not a regular file is, for an error.
func Kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeSymlink != 0:
		return "a symlink"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
}

// OpenAppend opens path for appending, creating it 0600. The server (root, often) appends
// its log and audit lines there, and the audit log reopens its path at each rotation, so
// whoever could choose what the path names would choose where those lines land, or stop
// the server. The opened file must therefore be
//   - not a symlink at its last component (O_NOFOLLOW): one planted in the file's
//     directory chose the file (/etc/passwd, a cron file);
//   - a regular file: opened without O_NONBLOCK a FIFO blocked the server's start for
//     ever, and a device (/dev/sda) was appended to;
//   - Private: a file of another user's, or one group or world writable, lets that user
//     forge or truncate the audit trail;
//   - of one link: a hard link planted to another file (/etc/shadow) would make the
//     server append there, whatever the name says.
//
// A file it has just created passes all four. The checks are made on the opened file
// (fstat), so a path swapped after the open changes nothing; they are made on the path
// (lstat) before the open too, only so that a device is never opened at all: opening is
// an act of its own for some (a watchdog is armed by its open, and may reboot the host
// when closed without its magic close; a tape rewinds; a tty may become the server's
// controlling terminal, hence O_NOCTTY).
//
// /dev/null is refused like any device: logging nowhere is leaving log.file unset and
// sending stderr where one likes, and keeping no audit log is audit.path = "off", which
// the server names among the settings that weaken it; a /dev/null path would hide that.
func OpenAppend(path string) (*os.File, error) {
	if fi, err := os.Lstat(path); err == nil {
		if err := appendable(path, fi); err != nil {
			return nil, err
		}
	}
	// O_NONBLOCK stays set: regular files ignore it, and the open above was the one
	// place it mattered.
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|openFlags, 0o600)
	if err != nil {
		if isLoop(err) {
			return nil, symlinkError(path, err)
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = appendable(path, fi)
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// appendable refuses a file OpenAppend must not append to (see there).
func appendable(path string, fi os.FileInfo) error {
	if fi.Mode()&os.ModeSymlink != 0 {
		return symlinkError(path, nil)
	}
	if err := Regular(path, fi); err != nil {
		return fmt.Errorf("%w: the server appends only to a regular file: give the path of one", err)
	}
	if err := Private(path, fi); err != nil {
		return err
	}
	if n := links(fi); n > 1 {
		return fmt.Errorf("%s has %d hard links: the server would append to a file that has other names, which may be anyone's (/etc/shadow): remove the other links or give a file of its own", path, n)
	}
	return nil
}

func symlinkError(path string, err error) error {
	const msg = "%s is a symlink, which the server does not follow to append to: give the file's own path"
	if err == nil {
		return fmt.Errorf(msg, path)
	}
	return fmt.Errorf(msg+": %w", path, err)
}
