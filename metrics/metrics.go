// Package metrics exposes airlock's counters in the Prometheus text format, for a
// fleet's scraper and autoscaler: runs by status and language, how long they took, the
// queue, busy refusals, the warm pool and sandbox setup failures, beside the Go runtime's
// and the process's own families (go_*, process_*).
//
// The format is written here by hand rather than through prometheus/client_golang: the
// client linked protobuf, client_model, prometheus/common and procfs into every airlock
// process, `airlock run` included, whose inits ran at every start (issue 24, goal 4).
// The names, labels, HELP and TYPE lines are client_golang's, so dashboards and alerts
// read /metrics as before.
package metrics

import (
	"compress/gzip"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

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

// Buckets from 5 ms (a warm pooled run) to a minute (the default maximum wall).
var durationBuckets = [...]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

type histogram struct {
	counts [len(durationBuckets)]uint64 // per bucket, not cumulative
	count  uint64
	sum    float64
}

// Metrics is one server's counters. It implements runner.Observer.
type Metrics struct {
	src Sources

	mu        sync.Mutex
	runs      map[[2]string]uint64 // by language, status
	durations map[string]*histogram
	busy      uint64
	setup     uint64
}

// New makes the counters; src is read at each scrape.
func New(src Sources) *Metrics {
	return &Metrics{src: src, runs: map[[2]string]uint64{}, durations: map[string]*histogram{}}
}

// ObserveRun counts one call (runner.Observer).
func (m *Metrics) ObserveRun(language, status string, d time.Duration) {
	if language == "" {
		language = "unknown"
	}
	s := d.Seconds()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runs[[2]string{language, status}]++
	h := m.durations[language]
	if h == nil {
		h = &histogram{}
		m.durations[language] = h
	}
	// A value on a bucket's bound counts in that bucket (le is "less or equal").
	if i, _ := slices.BinarySearch(durationBuckets[:], s); i < len(h.counts) {
		h.counts[i]++
	}
	h.count++
	h.sum += s
	switch status {
	case "busy":
		m.busy++
	case string(sandbox.StatusSandboxError):
		m.setup++
	}
}

// Handler serves the metrics in the Prometheus text format, gzipped for a scraper that
// asks (Prometheus always does), as client_golang's handler served them.
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := m.expose()
		w.Header().Set("Content-Type", contentType)
		if !acceptsGzip(r.Header.Get("Accept-Encoding")) {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			_, _ = w.Write(body)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		z := gzip.NewWriter(w)
		_, _ = z.Write(body)
		_ = z.Close()
	})
}

func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		if strings.TrimSpace(coding) == "gzip" && strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0" {
			return true
		}
	}
	return false
}

// expose writes one scrape.
func (m *Metrics) expose() []byte {
	var fs []family
	m.mu.Lock()
	fs = append(fs, m.own()...)
	m.mu.Unlock()
	// The sources take their own locks; none is called with m.mu held.
	gauge := func(name, help string, v func() int) {
		n := float64(v())
		fs = append(fs, family{name, help, "gauge", func(e *exposition) { e.sample(name, n) }})
	}
	if m.src.Queued != nil {
		gauge("airlock_queue_depth", "Calls waiting for a sandbox slot.", m.src.Queued)
	}
	if m.src.Running != nil {
		gauge("airlock_runs_in_flight", "Sandboxes running now.", m.src.Running)
	}
	if m.src.Pool != nil {
		p := m.src.Pool()
		counter := func(name, help string, v int64) {
			fs = append(fs, family{name, help, "counter", func(e *exposition) { e.sample(name, float64(v)) }})
		}
		counter("airlock_pool_hits_total", "Calls served by a prepared sandbox from the warm pool.", p.Hits)
		counter("airlock_pool_misses_total", "Calls built cold although the pool had a template for them.", p.Misses)
		gauge("airlock_pool_ready", "Prepared sandboxes waiting now.", func() int { return p.Ready })
	}
	fs = append(fs, goFamilies()...)
	fs = append(fs, processFamilies()...)
	e := exposition{b: make([]byte, 0, 16<<10)}
	e.families(fs)
	return e.b
}

// own copies the counters (under m.mu) into families that write the copies.
func (m *Metrics) own() []family {
	type run struct {
		key [2]string
		n   uint64
	}
	runs := make([]run, 0, len(m.runs))
	for k, n := range m.runs {
		runs = append(runs, run{k, n})
	}
	// Samples in label order, language then status, as client_golang sorted them.
	slices.SortFunc(runs, func(a, b run) int {
		if c := strings.Compare(a.key[0], b.key[0]); c != 0 {
			return c
		}
		return strings.Compare(a.key[1], b.key[1])
	})
	langs := make([]string, 0, len(m.durations))
	hists := map[string]histogram{}
	for l, h := range m.durations {
		langs = append(langs, l)
		hists[l] = *h
	}
	slices.Sort(langs)
	busy, setup := m.busy, m.setup
	version := m.src.Version
	fs := []family{
		{"airlock_runs_total", "Calls to run code, by language and how they ended (a sandbox status, or refused, busy, cancelled).", "counter",
			func(e *exposition) {
				for _, r := range runs {
					e.sample("airlock_runs_total", float64(r.n), "language", r.key[0], "status", r.key[1])
				}
			}},
		{"airlock_run_duration_seconds", "Time from a call's arrival to its result, queueing included.", "histogram",
			func(e *exposition) {
				for _, l := range langs {
					h := hists[l]
					var cum uint64
					for i, le := range durationBuckets {
						cum += h.counts[i]
						e.sample("airlock_run_duration_seconds_bucket", float64(cum), "language", l, "le", string(appendFloat(nil, le)))
					}
					e.sample("airlock_run_duration_seconds_bucket", float64(h.count), "language", l, "le", "+Inf")
					e.sample("airlock_run_duration_seconds_sum", h.sum, "language", l)
					e.sample("airlock_run_duration_seconds_count", float64(h.count), "language", l)
				}
			}},
		{"airlock_busy_refusals_total", "Calls refused because every sandbox slot (or the client's own limit) was taken.", "counter",
			func(e *exposition) { e.sample("airlock_busy_refusals_total", float64(busy)) }},
		{"airlock_sandbox_setup_failures_total", "Calls whose sandbox could not be set up (nothing ran).", "counter",
			func(e *exposition) { e.sample("airlock_sandbox_setup_failures_total", float64(setup)) }},
		{"airlock_build_info", "Always 1; the labels say which build is running.", "gauge",
			func(e *exposition) {
				e.sample("airlock_build_info", 1, "goversion", runtime.Version(), "version", version)
			}},
	}
	// Before the first call the two vectors have no samples: left out, as client_golang
	// left out a vector without children (ObserveRun fills both or neither).
	if len(runs) == 0 {
		fs = fs[2:]
	}
	return fs
}
