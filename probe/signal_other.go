//go:build !unix

package probe

import (
	"os"
	"syscall"
)

// sigRelease has SIGUSR1's number; the probes that send it run only on Linux, and no
// sandbox backend exists here (airlock runs on Windows inside WSL2).
const sigRelease = syscall.Signal(10)

// signalPid can only kill here: Windows has no signals.
func signalPid(pid int, sig syscall.Signal) {
	if sig != syscall.SIGKILL {
		return
	}
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
