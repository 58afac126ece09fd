package linux

// The zygote, the spawners and the sandbox's init are C (init_linux.c and the files it
// names, one per job; cgo compiles every .c file here), run from an ELF constructor
// before the Go runtime starts in a process started as initName "zygote"; this import
// compiles them into every binary that links this package.

// #cgo CFLAGS: -O2 -Wall -Wextra -Wno-unused-parameter -Werror
import "C"
