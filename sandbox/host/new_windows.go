package host

import (
	"fmt"

	"github.com/airlock-mcp/airlock/sandbox"
)

// New fails closed on Windows: it has no sandbox airlock trusts with hostile code. The
// Linux backend runs inside WSL2, a real Linux kernel with user namespaces and seccomp.
func New(sandbox.Options) (sandbox.Sandbox, error) {
	return nil, fmt.Errorf("%w: airlock does not run code on Windows itself; run it inside WSL2, "+
		"where the Linux sandbox works: `wsl --install`, install airlock in the Linux distribution, "+
		"and have the MCP client start it with `wsl.exe -e /usr/local/bin/airlock serve` (see docs/windows.md)", sandbox.ErrUnavailable)
}
