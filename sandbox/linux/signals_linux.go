package linux

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A program may signal its pid 1. The kernel delivers to a pid-namespace init only the
// signals it handles, and Go's runtime handles most of them by exiting (SIGTERM) or
// crashing (SIGABRT, or SIGSEGV and SIGILL sent with kill). The init therefore sets them
// to SIG_IGN in the kernel directly, once its only child is forked. Not through
// os/signal: signal.Notify enables signals one at a time through a round trip with a
// locked runtime thread, which cost milliseconds per sandbox.

// kernelSigaction is struct sigaction as rt_sigaction takes it on 64-bit Linux.
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

const sigIgn = 1

// keptSignals keep their disposition: SIGKILL and SIGSTOP cannot change, the init reaps
// through SIGCHLD, and Go's runtime needs SIGURG (preemption) and SIGPROF; SIGCONT and
// SIGWINCH do nothing to it.
var keptSignals = map[unix.Signal]bool{
	unix.SIGKILL: true, unix.SIGSTOP: true, unix.SIGCHLD: true, unix.SIGURG: true,
	unix.SIGPROF: true, unix.SIGCONT: true, unix.SIGWINCH: true,
}

// ignoreSignals ignores every signal the program could use to end or crash its init:
// the standard ones and the real-time ones from SIGRTMIN+2 (Go's runtime dies of an
// unexpected real-time signal; glibc keeps the first two for itself and checks their
// sender).
func ignoreSignals() error {
	act := kernelSigaction{handler: sigIgn}
	for sig := unix.Signal(1); sig <= 64; sig++ {
		if keptSignals[sig] || sig == 32 || sig == 33 {
			continue
		}
		_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig),
			uintptr(unsafe.Pointer(&act)), 0, unsafe.Sizeof(act.mask), 0, 0)
		if errno != 0 {
			return fmt.Errorf("rt_sigaction %s: %w", unix.SignalName(sig), errno)
		}
	}
	return nil
}
