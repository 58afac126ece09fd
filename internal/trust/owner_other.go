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

// noFollow: no O_NOFOLLOW here; the settings' paths are taken as they are.
const noFollow = 0

func isLoop(error) bool { return false }
