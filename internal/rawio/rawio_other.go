//go:build !linux

package rawio

import (
	"io"
	"os"
)

// NewReader is f itself where reads are not made raw (rawio_linux.go says why Linux
// does).
func NewReader(f *os.File) (io.Reader, error) { return f, nil }
