//go:build unix

package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// RemoveTree deletes dir, a directory hostile code wrote in, with everything below it.
// The code may have made directories its owner cannot list, enter or write (mode 0300,
// 0, 0500: filled first, then locked) or, on darwin, immutable; where os.RemoveAll fails
// those are opened up and the removal retried. Root ignores modes, but a server of the
// program's own uid (darwin's; Linux's Landlock tier under an unprivileged server) needs
// this. Every change stays inside dir: modes are changed through a descriptor opened with
// os.Root and O_NOFOLLOW or, for a directory that cannot be opened, by os.Root's Chmod,
// which resolves nothing outside dir; never through a symlink the walk saw. clearFlags,
// when set, clears immutable flags on such a descriptor (fchflags on darwin).
func RemoveTree(dir string, clearFlags func(*os.File) error) error {
	err := os.RemoveAll(dir)
	if err == nil {
		return nil
	}
	root, rerr := os.OpenRoot(dir)
	if rerr != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	defer root.Close()
	_ = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return nil // flags and modes are never changed through a symlink
		}
		f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			// A directory made unreadable (mode 0, 0300) cannot be opened: its mode is
			// changed by name, inside the root, before the walk reads it.
			if d.IsDir() {
				_ = root.Chmod(p, 0o700)
			}
			return nil
		}
		defer f.Close()
		if clearFlags != nil {
			_ = clearFlags(f)
		}
		if d.IsDir() {
			// f is a descriptor opened inside dir through os.Root with O_NOFOLLOW:
			// fchmod resolves no path, so nothing can be swapped under it.
			_ = f.Chmod(0o700) //nolint:gosec // G122: see above
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}
