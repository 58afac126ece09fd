package linux

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// airlock's base cgroup ("airlock", in each controller's cgroup of the process) is
// removed when the backend closes, if this process made it and no sandbox of anyone's
// is left in it: a one-shot `airlock run` would otherwise leave an empty cgroup in its
// caller's (a login session's memory cgroup gained one per shell). A base found in
// place belongs to whoever made it (a running server of an older airlock would not make
// it again), and one with children is in use (rmdir fails with EBUSY). A backend that
// finds its base gone when it creates a sandbox's cgroup makes it again (makeIn).

// removeBases removes the base dirs this process made, if they are empty.
func (m *cgroups) removeBases() {
	for _, b := range m.created {
		_ = unix.Rmdir(b)
	}
}

// baseTries bounds how often a sandbox's cgroup is tried again after its base vanished
// under it (another airlock process removed it, empty, in between).
const baseTries = 4

// makeIn creates the cgroup dir in base, making base again (with its controllers
// enabled, on v2) if another process removed it.
func (m *cgroups) makeIn(base, dir string) error {
	for try := 1; ; try++ {
		err := os.Mkdir(dir, 0o755)
		if err == nil || !errors.Is(err, os.ErrNotExist) || try == baseTries {
			return err
		}
		if err := os.Mkdir(base, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create %s again: %w", base, err)
		}
		if m.version == 2 {
			// Without its controllers a cgroup made in it has no memory.max or pids.max
			// (create refuses such a cgroup: fail closed, never a sandbox without limits).
			if err := enableV2(base, m.ctrls); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
}
