//go:build !unix

package runner

import "os"

// ownedBySelf cannot tell a file's owner here (Windows builds only compile; airlock runs
// under WSL2 there): no directory is taken for private, and audit records go to the log
// stream instead.
func ownedBySelf(os.FileInfo) bool { return false }
