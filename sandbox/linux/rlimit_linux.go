package linux

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/sandbox"
)

// initProcs is headroom in the process counts for the init and its spawner, two
// single-threaded processes that may share the sandbox uid (RLIMIT_NPROC) and the
// cgroup (pids.max, v2) with the program.
const initProcs = 2

type rlimit struct {
	Name     string
	Resource int
	Value    uint64 // soft and hard, except RLIMIT_CPU (see rlimits)
}

// rlimits is the rlimit plan for the program. Soft and hard limits are equal so the
// program cannot raise them; RLIMIT_CPU's hard limit is one second above the soft one,
// so SIGXCPU arrives first and SIGKILL backs it up.
func rlimits(l sandbox.Limits, applyAS bool) []rlimit {
	cpu := uint64((l.CPU + time.Second - 1) / time.Second)
	if cpu == 0 {
		cpu = 1
	}
	out := []rlimit{
		{"cpu", unix.RLIMIT_CPU, cpu},
		{"fsize", unix.RLIMIT_FSIZE, positive(l.FileSize)},
		{"nofile", unix.RLIMIT_NOFILE, uint64(max(l.OpenFiles, 16))},
		{"nproc", unix.RLIMIT_NPROC, uint64(max(l.Pids, 1) + initProcs)},
		{"core", unix.RLIMIT_CORE, 0},
		{"memlock", unix.RLIMIT_MEMLOCK, 64 << 10},
		// Per user and up the namespace chain like sigpending; no program needs a
		// POSIX message queue here.
		{"msgqueue", unix.RLIMIT_MSGQUEUE, 0},
		{"sigpending", unix.RLIMIT_SIGPENDING, sigPendingLimit},
		// Never inherited from the server: a service started with LimitRTPRIO (systemd)
		// or --ulimit rtprio (a container engine) would let the program take SCHED_FIFO
		// and, spinning on every CPU its threads reach, starve the host and every other
		// run (the kernel's RT throttling leaves them 5%); RLIMIT_NICE would let it raise
		// its priority above theirs. Zero: only the default policy, and niceness only
		// lowered.
		{"rtprio", unix.RLIMIT_RTPRIO, 0},
		{"nice", unix.RLIMIT_NICE, 0},
	}
	if applyAS {
		as := l.AddressSpace
		if as <= 0 {
			as = l.Memory
		}
		out = append(out, rlimit{"as", unix.RLIMIT_AS, positive(as)})
	}
	return out
}

func positive(n int64) uint64 {
	if n <= 0 {
		return unix.RLIM_INFINITY
	}
	return uint64(n)
}

// sigPendingLimit is RLIMIT_SIGPENDING for the program. Queued signals are charged to
// the sandbox's user in its namespace and then, up the chain, to the namespace's
// creator, whose limit is the whole host's (96,364 here): one run that queued that many
// made sigqueue fail for every other run and for host processes of root. The sandbox's
// processes share one count, so this bounds the whole sandbox; interpreters queue none.
const sigPendingLimit = 256
