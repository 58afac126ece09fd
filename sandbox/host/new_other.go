//go:build !linux && !darwin && !windows

package host

import (
	"fmt"
	"runtime"

	"github.com/airlock-mcp/airlock/sandbox"
)

// New fails closed: there is no sandbox backend for this operating system.
func New(opts sandbox.Options) (sandbox.Sandbox, error) {
	return nil, fmt.Errorf("%w: no sandbox backend for %s; airlock runs code only on linux and darwin", sandbox.ErrUnavailable, runtime.GOOS)
}
