package linux

import (
	"os"
	"testing"

	"github.com/airlock-mcp/airlock/sandbox"
)

// The test binary is its own sandbox spawner and init: re-executed with the init's
// argv[0], its C constructor (sandbox/linux/zygote_linux.c) runs them before the Go runtime
// starts, so the tests never run there. sandbox.Init dispatches the roles other backends
// register.
func TestMain(m *testing.M) {
	if sandbox.Init() {
		return
	}
	code := m.Run()
	printTierTable(os.Stdout)
	// The shared Sandbox's cgroup dirs go with it (a dead test binary's would be removed
	// as stale by the next airlock start).
	if sbInst != nil {
		_ = sbInst.Close()
	}
	os.Exit(code)
}
