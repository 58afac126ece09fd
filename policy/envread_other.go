//go:build !unix

package policy

// Windows has no FIFOs to block on nor a controlling terminal; the server does not run
// there (airlock builds for windows only to say so), so plain opens do.
const (
	fileOpenFlags = 0
	dirOpenFlags  = 0
)
