package metrics

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// airlock's /metrics is its own registry, never the default one: the patched
// client_golang and procfs (third_party/) must leave what it serves as it was, airlock's
// families beside client_golang's go_* and process_* (issue 20), process_max_fds
// parsed through procfs's limits regexp, compiled on first use now.
func TestHandlerServesGoAndProcessFamilies(t *testing.T) {
	m := New(Sources{Version: "test", Queued: func() int { return 0 }})
	m.ObserveRun("python", "ok", time.Millisecond)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{`airlock_runs_total{language="python",status="ok"} 1`, "airlock_queue_depth 0",
		"go_goroutines ", "go_gc_duration_seconds", "process_cpu_seconds_total ", "process_max_fds ", "process_open_fds "} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
