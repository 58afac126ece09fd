package linux

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/sandbox"
)

// initThreads is headroom in the process counts for the init's own threads, which share
// the sandbox uid (RLIMIT_NPROC) and the cgroup (pids.max) with the program.
const initThreads = 16

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
		{"nproc", unix.RLIMIT_NPROC, uint64(max(l.Pids, 1) + initThreads)},
		{"core", unix.RLIMIT_CORE, 0},
		{"memlock", unix.RLIMIT_MEMLOCK, 64 << 10},
		{"msgqueue", unix.RLIMIT_MSGQUEUE, 0},
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

// applyRlimits sets the plan on pid, which the init holds stopped before its first
// instruction. Lowering the limits of a process with the same uid needs no privilege.
func applyRlimits(pid int, plan []rlimit) error {
	for _, r := range plan {
		lim := unix.Rlimit{Cur: r.Value, Max: r.Value}
		if r.Resource == unix.RLIMIT_CPU {
			lim.Max = r.Value + 1
		}
		if err := unix.Prlimit(pid, r.Resource, &lim, nil); err != nil {
			return fmt.Errorf("prlimit %s=%d: %w", r.Name, r.Value, err)
		}
	}
	return nil
}

// lowerRlimits lowers a running interpreter's limits to the call's. Its CPU clock ran
// while it loaded, so the CPU limit is counted from now.
func lowerRlimits(pid int, l sandbox.Limits, applyAS bool) error {
	used, err := cpuUsed(pid)
	if err != nil {
		return err
	}
	for _, r := range rlimits(l, applyAS) {
		var cur unix.Rlimit
		if err := unix.Prlimit(pid, r.Resource, nil, &cur); err != nil {
			return fmt.Errorf("prlimit %s: %w", r.Name, err)
		}
		want := r.Value
		if r.Resource == unix.RLIMIT_CPU {
			want += uint64((used + time.Second - 1) / time.Second)
		}
		if want >= cur.Max {
			continue // never raise: the preloaded limits already bound the call
		}
		lim := unix.Rlimit{Cur: want, Max: want}
		if r.Resource == unix.RLIMIT_CPU {
			lim.Max = min(want+1, cur.Max)
		}
		if err := unix.Prlimit(pid, r.Resource, &lim, nil); err != nil {
			return fmt.Errorf("prlimit %s=%d: %w", r.Name, want, err)
		}
	}
	return nil
}

// cpuUsed reads a process's CPU time so far from /proc/<pid>/stat (fields 14 and 15, in
// clock ticks of 1/100 s on Linux).
func cpuUsed(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may contain spaces; fields are counted after its ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}
