package host

import (
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/sandbox/linux"
)

// New returns the Linux namespaces + seccomp backend, or an error wrapping
// sandbox.ErrUnavailable that names the missing piece and its fix.
func New(opts sandbox.Options) (sandbox.Sandbox, error) { return linux.New(opts) }
