package metrics

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// The patched client_golang (third_party/client_golang) registers the default
// registry's process and Go collectors on its first use rather than in its init. Whoever
// uses the default registry must still find them there, registered before anything of
// its own: their families in a gather, and a second Go collector refused as upstream's
// init registration would refuse it. process_max_fds is parsed with the limits pattern
// the patched procfs (third_party/procfs) compiles on first use.
func TestDefaultRegistryHasItsCollectors(t *testing.T) {
	err := prometheus.Register(collectors.NewGoCollector())
	var dup prometheus.AlreadyRegisteredError
	if !errors.As(err, &dup) {
		t.Fatalf("a second Go collector on the default registry: %v, want AlreadyRegisteredError", err)
	}
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
	}
	for _, name := range []string{"go_goroutines", "go_memstats_alloc_bytes", "process_cpu_seconds_total", "process_open_fds", "process_max_fds"} {
		if !have[name] {
			t.Errorf("the default registry gathers no %s (families: %v)", name, have)
		}
	}
}
