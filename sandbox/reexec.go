package sandbox

import (
	"os"
	"path/filepath"
)

// inits maps a re-exec role (argv[0]) to its entrypoint. It is the only package-level
// mutable state in airlock, and it is written only from init functions.
var inits = map[string]func(){}

// RegisterInit registers fn as the entrypoint of the process role name. A backend starts
// its sandbox init by running /proc/self/exe (or os.Executable) with argv[0] = name.
// Call it only from a package init function.
func RegisterInit(name string, fn func()) {
	if _, dup := inits[name]; dup {
		panic("sandbox: init role registered twice: " + name)
	}
	inits[name] = fn
}

// Init runs the registered role named by argv[0], if any. Such a role never returns:
// it execs the sandboxed program or exits. Init returns false in the server itself.
// main (and TestMain of packages that start real sandboxes) calls it first.
func Init() bool {
	if len(os.Args) == 0 {
		return false
	}
	fn, ok := inits[filepath.Base(os.Args[0])]
	if !ok {
		return false
	}
	fn()
	os.Exit(127) // a role that returns is a bug; never fall through into the server
	return true
}
