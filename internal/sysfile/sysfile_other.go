//go:build !unix

package sysfile

import "os"

// Read returns the whole content of the file at path: os.ReadFile where there is no
// poller to skip.
func Read(path string) ([]byte, error) { return os.ReadFile(path) }
