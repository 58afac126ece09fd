//go:build !unix

package serve

// maxConns is 0 (no cap) where there is no file descriptor limit to read.
func maxConns() int { return 0 }
