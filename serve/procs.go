package serve

import (
	"os"
	"runtime"
)

// LimitProcs sets how many threads run the server's Go code at once (GOMAXPROCS) to a
// quarter of the CPUs it may use, at least one, unless the GOMAXPROCS environment
// variable chooses. The server's own work is small next to its sandboxes' (≈ 2 ms of
// CPU per call against ≈ 18 ms for the sandbox of a python print(1)), and the sandboxes
// are other processes, which this does not limit. With as many Ps as CPUs, the runtime
// spent a sixth of the server's CPU under 8 concurrent calls on idle Ps looking for work,
// waking each other and retaking Ps from blocking system calls: 2.1 → 1.8 ms per call
// with one P on 2 CPUs, at the same throughput (make bench). Blocking system calls still
// run in parallel on threads of their own. It returns the value set.
func LimitProcs() int {
	if os.Getenv("GOMAXPROCS") != "" {
		return runtime.GOMAXPROCS(0)
	}
	runtime.SetDefaultGOMAXPROCS() // the CPUs usable here (affinity, cgroup quota); again if called twice
	n := procsFor(runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(n)
	return n
}

// procsFor is the server's GOMAXPROCS for cpus usable CPUs.
func procsFor(cpus int) int { return max(1, (cpus+3)/4) }
