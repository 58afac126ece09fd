package host

import (
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/sandbox/darwin"
)

// New returns the macOS Seatbelt backend, or an error wrapping sandbox.ErrUnavailable.
func New(opts sandbox.Options) (sandbox.Sandbox, error) { return darwin.New(opts) }
