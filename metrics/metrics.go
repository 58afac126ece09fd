// Package metrics exposes airlock's counters in the Prometheus text format, for a
// fleet's scraper and autoscaler: runs by status and language, how long they took, the
// queue, busy refusals, the warm pool and sandbox setup failures.
package metrics

import (
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/airlock-mcp/airlock/sandbox"
)

// Sources are the live values the metrics read when scraped.
type Sources struct {
	Version string
	// Queued and Running are the calls waiting for a sandbox slot and holding one.
	Queued, Running func() int
	// Pool is the warm pool's state; nil when the backend has none.
	Pool func() sandbox.PoolStats
}

// Metrics is one server's registry. It implements runner.Observer.
type Metrics struct {
	reg      *prometheus.Registry
	runs     *prometheus.CounterVec
	duration *prometheus.HistogramVec
	busy     prometheus.Counter
	setup    prometheus.Counter
}

// New registers every metric; src is read at each scrape.
func New(src Sources) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		reg: reg,
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "airlock_runs_total",
			Help: "Calls to run code, by language and how they ended (a sandbox status, or refused, busy, cancelled)."},
			[]string{"language", "status"}),
		// Buckets from 5 ms (a warm pooled run) to a minute (the default maximum wall).
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "airlock_run_duration_seconds",
			Help:    "Time from a call's arrival to its result, queueing included.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}},
			[]string{"language"}),
		busy: prometheus.NewCounter(prometheus.CounterOpts{Name: "airlock_busy_refusals_total",
			Help: "Calls refused because every sandbox slot (or the client's own limit) was taken."}),
		setup: prometheus.NewCounter(prometheus.CounterOpts{Name: "airlock_sandbox_setup_failures_total",
			Help: "Calls whose sandbox could not be set up (nothing ran)."}),
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "airlock_build_info",
		Help: "Always 1; the labels say which build is running."}, []string{"version", "goversion"})
	build.WithLabelValues(src.Version, runtime.Version()).Set(1)
	reg.MustRegister(m.runs, m.duration, m.busy, m.setup, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if src.Queued != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "airlock_queue_depth",
			Help: "Calls waiting for a sandbox slot."}, func() float64 { return float64(src.Queued()) }))
	}
	if src.Running != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "airlock_runs_in_flight",
			Help: "Sandboxes running now."}, func() float64 { return float64(src.Running()) }))
	}
	if src.Pool != nil {
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "airlock_pool_hits_total",
				Help: "Calls served by a prepared sandbox from the warm pool."}, func() float64 { return float64(src.Pool().Hits) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "airlock_pool_misses_total",
				Help: "Calls built cold although the pool had a template for them."}, func() float64 { return float64(src.Pool().Misses) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "airlock_pool_ready",
				Help: "Prepared sandboxes waiting now."}, func() float64 { return float64(src.Pool().Ready) }))
	}
	return m
}

// ObserveRun counts one call (runner.Observer).
func (m *Metrics) ObserveRun(language, status string, d time.Duration) {
	if language == "" {
		language = "unknown"
	}
	m.runs.WithLabelValues(language, status).Inc()
	m.duration.WithLabelValues(language).Observe(d.Seconds())
	switch status {
	case "busy":
		m.busy.Inc()
	case string(sandbox.StatusSandboxError):
		m.setup.Inc()
	}
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
