//go:build !linux

package config

// hostCeilings: only the Linux backends are known to fail on a limit above the server's
// hard rlimit; elsewhere nothing is checked here.
func hostCeilings() Ceilings {
	return Ceilings{OpenFiles: Unlimited, Procs: Unlimited, FileSize: Unlimited, CPU: Unlimited, AddressSpace: Unlimited}
}
