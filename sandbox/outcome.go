package sandbox

import (
	"fmt"
	"strings"
	"time"
)

// OutputCeiling × Limits.Output is how much a program may write to one stream before
// the backend kills it for flooding (the capture keeps only Limits.Output of it).
const OutputCeiling = 16

// Outcome is what a backend saw of a run's end, as data. Classify turns it into the
// Result's Status and Detail, the same way on every backend.
type Outcome struct {
	// Setup says why the sandbox was not built or the program not started (the stage
	// and the cause): nothing of the program ran.
	Setup string
	// Stopped is why the supervisor ended the run (timeout, output_limit, cancelled, or
	// sandbox_error for a setup that did not finish in time), StopDetail how; empty
	// when the supervisor did not end it.
	Stopped    Status
	StopDetail string
	// Ended says the program's own end was observed: Exited and Code, or Signal, hold.
	Ended  bool
	Exited bool
	Code   int
	Signal string // "SIGKILL": the signal that ended the program
	CPU    time.Duration
	Stderr Stream // where interpreters write their out-of-memory messages
	// OOMKills and PidsMaxHit are what a cgroup counted: OOM kills, and forks the pids
	// limit refused. Zero where no cgroup counts them.
	OOMKills, PidsMaxHit int64
	// RlimitMemory says memory is bounded by an address-space rlimit, not a memory
	// cgroup: a program past it fails with its interpreter's message, not an OOM kill.
	RlimitMemory bool
	// Seccomp says a seccomp filter is loaded, so a SIGSYS is the filter's kill.
	Seccomp bool
	// Refused is the sandbox tool's own refusal to start the program (sandbox-exec's
	// message), which outranks the exit code it left.
	Refused string
}

// Own reports whether the program's own end (its exit code or signal) explains the
// result: nothing failed or stopped it first.
func (o Outcome) Own() bool { return o.Setup == "" && o.Stopped == "" && o.Ended }

// Classify maps an outcome to a Status and a one-line detail. The order of the checks is
// the order of precedence: a setup failure explains everything; a kill by the
// supervisor explains the signal that did the killing; what the kernel counted explains
// a plain SIGKILL.
func Classify(o Outcome, l Limits) (Status, string) {
	switch {
	case o.Setup != "":
		return StatusSandboxError, o.Setup
	case o.Stopped != "":
		if o.OOMKills > 0 && o.Stopped == StatusSandboxError {
			// The setup "did not finish" because the kernel killed it at the memory limit.
			return StatusMemoryLimit, o.StopDetail
		}
		return o.Stopped, o.StopDetail
	case !o.Ended:
		switch {
		case o.OOMKills > 0:
			return StatusMemoryLimit, fmt.Sprintf("the sandbox ran out of memory (limit %d bytes)", l.Memory)
		case o.PidsMaxHit > 0:
			return StatusKilled, fmt.Sprintf("the sandbox ended at its process limit (%d)", l.Pids)
		}
		return StatusSandboxError, "sandbox init ended without a report"
	}
	killed := !o.Exited
	switch {
	case killed && o.Signal == "SIGKILL" && o.OOMKills > 0:
		return StatusMemoryLimit, fmt.Sprintf("killed at the memory limit of %d bytes", l.Memory)
	case killed && (o.Signal == "SIGXCPU" || (o.Signal == "SIGKILL" && o.CPU >= l.CPU)):
		// SIGXCPU at the soft RLIMIT_CPU, SIGKILL at the hard one a second later.
		return StatusTimeout, fmt.Sprintf("killed at the CPU-time limit of %s", l.CPU)
	case o.Refused != "":
		return StatusSandboxError, o.Refused
	case o.Exited:
		return exited(o, l)
	case o.Signal == "SIGXFSZ":
		return StatusKilled, fmt.Sprintf("killed for writing a file larger than %d bytes", l.FileSize)
	case o.Signal == "SIGSYS" && o.Seccomp:
		return StatusKilled, "killed by the seccomp filter (a syscall from a foreign architecture)"
	case o.Signal == "SIGABRT" && outOfMemoryMessage(o.Stderr):
		return StatusMemoryLimit, fmt.Sprintf("aborted when out of memory (limit %d bytes)", l.Memory)
	}
	return StatusKilled, "killed by " + o.Signal
}

// exited classifies a program that exited on its own.
func exited(o Outcome, l Limits) (Status, string) {
	if o.Code == 0 {
		return StatusOK, ""
	}
	status, detail := StatusError, fmt.Sprintf("exited with code %d", o.Code)
	if o.RlimitMemory && outOfMemoryMessage(o.Stderr) {
		status, detail = StatusMemoryLimit, fmt.Sprintf("ran out of memory (address-space limit %d bytes)", l.Memory)
	}
	if o.PidsMaxHit > 0 {
		detail += fmt.Sprintf("; the process limit (%d) was reached", l.Pids)
	}
	return status, detail
}

// outOfMemoryMessage recognises interpreters' own out-of-memory messages at the end of
// stderr, for where no cgroup counts OOM kills. A program can fake one, but only about
// itself.
func outOfMemoryMessage(s Stream) bool {
	tail := s.Tail
	if len(tail) == 0 {
		tail = s.Head
	}
	if len(tail) > 4096 {
		tail = tail[len(tail)-4096:]
	}
	for _, m := range []string{"MemoryError", "heap out of memory", "Cannot allocate memory", "std::bad_alloc"} {
		if strings.Contains(string(tail), m) {
			return true
		}
	}
	return false
}
