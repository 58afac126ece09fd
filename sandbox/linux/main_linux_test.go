package linux

import (
	"os"
	"testing"

	"github.com/airlock-mcp/airlock/sandbox"
)

// The test binary is its own sandbox init: re-executed with argv[0] = initName, it runs
// the init instead of the tests.
func TestMain(m *testing.M) {
	if sandbox.Init() {
		return
	}
	os.Exit(m.Run())
}
