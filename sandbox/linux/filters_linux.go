package linux

import (
	"fmt"
	"slices"
	"sync"

	"github.com/airlock-mcp/airlock/sandbox"
)

// Compiling one network mode's seccomp filter costs ~2.7 ms of CPU here (libseccomp's
// optimiser over a few hundred rules), the largest piece of a one-shot run's start-up
// after the self-check. New compiles only the modes calls will use (Options.Networks,
// plus "none" for the self-check), each on its own thread while the rest of New runs.

// allNetworks are the modes a backend prepares when Options.Networks is empty.
var allNetworks = []sandbox.Network{sandbox.NetworkNone, sandbox.NetworkHost, sandbox.NetworkAllowlist}

// compileFilters starts compiling the filters of networks (and "none"); the function it
// returns waits for them.
func compileFilters(networks []sandbox.Network, landlock bool) func() (map[sandbox.Network]*bpf, error) {
	networks = filterNetworks(networks)
	filters := make([]*bpf, len(networks))
	errs := make([]error, len(networks))
	var wg sync.WaitGroup
	for i, n := range networks {
		wg.Go(func() {
			filters[i], errs[i] = compileFilter(filterPlan{network: n == sandbox.NetworkHost, loopback: n == sandbox.NetworkAllowlist, landlock: landlock})
		})
	}
	return func() (map[sandbox.Network]*bpf, error) {
		wg.Wait()
		m := map[sandbox.Network]*bpf{}
		for i, n := range networks {
			if errs[i] != nil {
				return nil, fmt.Errorf("%w: %w (install libseccomp: apt-get install libseccomp2)", sandbox.ErrUnavailable, errs[i])
			}
			m[n] = filters[i]
		}
		return m, nil
	}
}

// filterNetworks are the modes New prepares a filter for, given Options.Networks.
func filterNetworks(networks []sandbox.Network) []sandbox.Network {
	if len(networks) == 0 {
		networks = allNetworks
	}
	if !slices.Contains(networks, sandbox.NetworkNone) {
		networks = append(slices.Clone(networks), sandbox.NetworkNone)
	}
	return networks
}

// prepared refuses a spec whose network mode this backend has no filter for.
func (s *Sandbox) prepared(n sandbox.Network) error {
	if s.filters[n] == nil {
		return fmt.Errorf("%w: network mode %q was not prepared (sandbox.Options.Networks)", sandbox.ErrInvalidSpec, n)
	}
	return nil
}
