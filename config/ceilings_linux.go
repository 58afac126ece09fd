package config

import "golang.org/x/sys/unix"

// hostCeilings reads this process's hard rlimits; one that cannot be read bounds nothing
// (the sandbox's setup still fails closed on it).
func hostCeilings() Ceilings {
	hard := func(res int) uint64 {
		var r unix.Rlimit
		if err := unix.Getrlimit(res, &r); err != nil {
			return Unlimited
		}
		return r.Max
	}
	return Ceilings{OpenFiles: hard(unix.RLIMIT_NOFILE), Procs: hard(unix.RLIMIT_NPROC), FileSize: hard(unix.RLIMIT_FSIZE),
		CPU: hard(unix.RLIMIT_CPU), AddressSpace: hard(unix.RLIMIT_AS)}
}
