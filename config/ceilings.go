package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/airlock-mcp/airlock/policy"
)

// Unlimited is a ceiling that bounds nothing (RLIM_INFINITY).
const Unlimited = ^uint64(0)

// Ceilings are the server's own hard rlimits, which every sandbox inherits: a sandbox
// sets each limit as an rlimit with soft = hard, and cannot raise a hard limit above the
// server's (that takes CAP_SYS_RESOURCE in the host's user namespace, which no sandbox
// has, even under a root server).
type Ceilings struct {
	OpenFiles, Procs, FileSize, CPU, AddressSpace uint64
}

// validateCeilings refuses a limit a sandbox would have to set above the server's hard
// rlimit: every run failed at setup with a bare "setrlimit: operation not permitted"
// (open_files = 30000 under a server started with ulimit -Hn 20000), and the startup
// probes only said they "could not run". The values are the ones the backend sets
// (sandbox/linux/rlimit_linux.go): the defaults for what a call cannot ask for, the
// largest a call can ask for otherwise.
func (c Config) validateCeilings(h Ceilings) error {
	b := c.PolicyBounds()
	l := b.Clamp(policy.Request{Timeout: b.Max.Wall, CPU: b.Max.CPU, Memory: b.Max.Memory})
	cpu := nonNegative(int64((l.CPU+time.Second-1)/time.Second)) + 1 // RLIMIT_CPU's hard limit is a second above
	var errs []error
	for _, r := range []struct {
		setting, rlimit, ulimit, item string
		need, ceil                    uint64
	}{
		{"limits.default.open_files", "RLIMIT_NOFILE", "-Hn", "nofile", uint64(max(l.OpenFiles, 16)), h.OpenFiles},
		{"limits.default.pids", "RLIMIT_NPROC", "-Hu", "nproc", uint64(max(l.Pids, 1)) + 2, h.Procs}, // + init and spawner
		{"limits.default.file_size", "RLIMIT_FSIZE", "-Hf", "fsize", nonNegative(l.FileSize), h.FileSize},
		{"limits.max.cpu", "RLIMIT_CPU", "-Ht", "cpu", cpu, h.CPU},
		{"limits.max.memory (or limits.max.address_space)", "RLIMIT_AS", "-Hv", "as", nonNegative(l.AddressSpace), h.AddressSpace},
	} {
		if r.ceil != Unlimited && r.need > r.ceil {
			errs = append(errs, fmt.Errorf("%s: a sandbox would set %s to %d, above this server's hard limit of %d, which a sandbox cannot raise: "+
				"lower the setting, or raise the server's hard limit (ulimit %s; systemd %s; docker/podman --ulimit %s=N:N)",
				r.setting, r.rlimit, r.need, r.ceil, r.ulimit, systemdKey[r.item], r.item))
		}
	}
	return errors.Join(errs...)
}

var systemdKey = map[string]string{"nofile": "LimitNOFILE=", "nproc": "LimitNPROC=", "fsize": "LimitFSIZE=", "cpu": "LimitCPU=", "as": "LimitAS="}

// nonNegative converts a limit Clamp made positive.
func nonNegative(n int64) uint64 {
	if n <= 0 {
		return 0
	}
	return uint64(n)
}
