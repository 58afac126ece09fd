package linux

import (
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// A run's cgroup files are reached relative to a descriptor of the Sandbox's own dir,
// not by their whole path. cgroupfs (kernfs) walks a path by reference, revalidating
// every component: a v1 memory cgroup's path is nine components deep here
// (/sys/fs/cgroup/memory/<the host's slices>/airlock/<server>/<run>/<file>), and a run
// makes thirteen such walks in the server (three mkdirs, three limits, the CPU quota,
// three counters, three rmdirs). `link_path_walk` was 4.9 % of the server's CPU under
// eight clients (perf, 2026-12-01); a loop of mkdir, two opens and rmdir took 134 µs
// relative to the own dir against 168 µs by path (300 rounds each, alternating).
//
// The descriptors are O_PATH and close-on-exec, and never leave the server (the
// zygote is started with its socket alone; spawners are its children). A descriptor
// names the dir it was opened on even if that is removed and made again under the same
// path: an own dir that vanished (Close, a host's cleanup) is found by ENOENT as with
// paths, and replaced (setOwnFD) once it is made again. An own dir has a child for as
// long as any run's cgroup or spare is in it, so the kernel refuses to remove it
// (EBUSY) while a descriptor's user still needs it.
type ownFDs struct {
	mu  sync.RWMutex      // held for reading across each system call on a descriptor
	dir map[string]string // controller ("" on v2) → own dir the descriptor is of
	fd  map[string]int
}

// setOwnFD opens own, the own dir of controller ctrl, and makes it the descriptor runs'
// cgroups are reached through, closing the one it replaces. An own dir that cannot be
// opened leaves its cgroups reached by path.
func (m *cgroups) setOwnFD(ctrl, own string) {
	fd, err := unix.Open(own, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	f := &m.fds
	f.mu.Lock()
	defer f.mu.Unlock()
	if old, ok := f.fd[ctrl]; ok {
		unix.Close(old)
		delete(f.fd, ctrl)
		delete(f.dir, ctrl)
	}
	if err != nil {
		return
	}
	if f.fd == nil {
		f.fd, f.dir = map[string]int{}, map[string]string{}
	}
	f.fd[ctrl], f.dir[ctrl] = fd, own
}

// closeOwnFDs closes every own dir's descriptor (the own dirs were removed).
func (m *cgroups) closeOwnFDs() {
	f := &m.fds
	f.mu.Lock()
	defer f.mu.Unlock()
	for ctrl, fd := range f.fd {
		unix.Close(fd)
		delete(f.fd, ctrl)
		delete(f.dir, ctrl)
	}
}

// at runs op on the path p: relative to the descriptor of the own dir p lies in, or,
// for a path in none (or a Sandbox without cgroups), as it is with AT_FDCWD. The
// descriptor stays open until op returns.
func (m *cgroups) at(p string, op func(dirfd int, rel string) error) error {
	if m == nil {
		return op(unix.AT_FDCWD, p)
	}
	f := &m.fds
	f.mu.RLock()
	defer f.mu.RUnlock()
	for ctrl, own := range f.dir {
		if rel, ok := strings.CutPrefix(p, own+"/"); ok && rel != "" {
			return op(f.fd[ctrl], rel)
		}
	}
	return op(unix.AT_FDCWD, p)
}

// openCg opens a cgroup file (close-on-exec) relative to its own dir.
func (m *cgroups) openCg(p string, flags int) (int, error) {
	fd := -1
	err := m.at(p, func(dirfd int, rel string) error {
		var err error
		fd, err = unix.Openat(dirfd, rel, flags|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return fd, nil
}

// mkdirCg makes a run's cgroup dir relative to its own dir.
func (m *cgroups) mkdirCg(p string) error {
	if err := m.at(p, func(dirfd int, rel string) error { return unix.Mkdirat(dirfd, rel, 0o755) }); err != nil {
		return &os.PathError{Op: "mkdir", Path: p, Err: err}
	}
	return nil
}

// rmdirCg removes a run's cgroup dir relative to its own dir.
func (m *cgroups) rmdirCg(p string) error {
	return m.at(p, func(dirfd int, rel string) error { return unix.Unlinkat(dirfd, rel, unix.AT_REMOVEDIR) })
}
