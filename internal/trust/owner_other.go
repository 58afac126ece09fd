//go:build !unix

package trust

import (
	"io/fs"
	"os"
)

// Owner cannot tell a file's owner here, so none is trusted (airlock serves environments
// only on unix systems).
func Owner(os.FileInfo) bool { return false }

// foreignOwner: Windows has no owner uid to compare, and its files' mode bits say
// nothing of other users (Go reports 0666 for any writable file): the settings files
// are taken as they are there.
func foreignOwner(os.FileInfo) (uint32, bool) { return 0, false }

func writableByOthers(fs.FileMode) bool { return false }

// openFlags: no O_NOFOLLOW, O_NONBLOCK or O_NOCTTY here; the settings' paths are taken as
// they are.
const openFlags = 0

// links: Windows' FileInfo does not carry a link count.
func links(os.FileInfo) uint64 { return 1 }

func isLoop(error) bool { return false }
