//go:build unix

package policy

import "syscall"

// Flags of the inspection's opens: never block on a FIFO or become its controlling
// terminal, and list only what is a directory.
const (
	fileOpenFlags = syscall.O_NONBLOCK | syscall.O_NOCTTY
	dirOpenFlags  = syscall.O_DIRECTORY | syscall.O_NONBLOCK
)
