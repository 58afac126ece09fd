package linux

import (
	"slices"

	"golang.org/x/sys/unix"
)

// airlock's base cgroup ("airlock", in each controller's cgroup of the process) is
// removed when the backend closes, if this process made it and no sandbox of anyone's
// is left in it: a one-shot `airlock run` would otherwise leave an empty cgroup in its
// caller's (a login session's memory cgroup gained one per shell). A base found in
// place belongs to whoever made it (a running server of an older airlock would not make
// it again), and one with children is in use (rmdir fails with EBUSY). A backend that
// finds its base gone when it makes its own dir makes the base again (ownDir).

// removeBases removes the base dirs this process made, if they are empty.
func (m *cgroups) removeBases() {
	m.ownMu.Lock()
	defer m.ownMu.Unlock()
	for _, b := range m.created {
		_ = unix.Rmdir(b)
	}
}

// baseTries bounds how often a Sandbox's own dir is tried again after its base vanished
// under it (another airlock process removed it, empty, in between).
const baseTries = 4

// removeAll removes the own dirs, then the bases this process made (a New that fails,
// Close): what is left is only what others use.
func (m *cgroups) removeAll() error {
	err := m.removeOwn()
	m.removeBases()
	return err
}

// teardownDirs are what a one-shot run's zygote removes after the run has exited
// (zygote.leaveBehind): this Sandbox's own dirs, with whatever sandbox cgroups are still
// in them, then the bases this process made, if empty by then.
func (m *cgroups) teardownDirs() (trees, bases []string) {
	m.ownMu.Lock()
	defer m.ownMu.Unlock()
	return m.ownDirs(), slices.Clone(m.created)
}
