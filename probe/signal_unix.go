//go:build unix

package probe

import "syscall"

// sigRelease is what the credentials probe's program waits for (SIGUSR1).
const sigRelease = syscall.SIGUSR1

func signalPid(pid int, sig syscall.Signal) { _ = syscall.Kill(pid, sig) }
