package metrics

import (
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

// series is one parsed sample: its name, labels and value.
type series struct {
	name   string
	labels map[string]string
	value  float64
}

type parsedFamily struct {
	help, typ string
	samples   []series
}

var (
	metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// parseStrict reads text format 0.0.4 and refuses anything a scraper could read two
// ways: a sample before its family's HELP and TYPE, a family twice, a sample name that
// is not its family's (histogram: _bucket, _sum, _count; summary: the quantiles, _sum,
// _count), an escape other than \\ \" \n, a series twice, a value ParseFloat refuses.
func parseStrict(text string) (map[string]*parsedFamily, error) {
	fams := map[string]*parsedFamily{}
	var cur string
	seen := map[string]bool{}
	if !strings.HasSuffix(text, "\n") {
		return nil, fmt.Errorf("the text does not end in a line feed")
	}
	for n, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		fail := func(f string, a ...any) error { return fmt.Errorf("line %d %q: %s", n+1, line, fmt.Sprintf(f, a...)) }
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, help, _ := strings.Cut(rest, " ")
			if !metricName.MatchString(name) || fams[name] != nil {
				return nil, fail("a bad or repeated family")
			}
			h, err := unescape(help, false)
			if err != nil {
				return nil, fail("%v", err)
			}
			fams[name], cur = &parsedFamily{help: h}, name
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			if name != cur || fams[name].typ != "" || fams[name].samples != nil {
				return nil, fail("TYPE not right after its HELP")
			}
			if !slices.Contains([]string{"counter", "gauge", "histogram", "summary", "untyped"}, typ) {
				return nil, fail("type %q", typ)
			}
			fams[name].typ = typ
			continue
		}
		if line == "" || line[0] == '#' {
			return nil, fail("a line this writer never writes")
		}
		s, key, err := parseSample(line)
		if err != nil {
			return nil, fail("%v", err)
		}
		f := fams[cur]
		if f == nil || f.typ == "" {
			return nil, fail("a sample before any HELP and TYPE")
		}
		ok := s.name == cur
		switch f.typ {
		case "histogram":
			ok = s.name == cur+"_sum" || s.name == cur+"_count" || s.name == cur+"_bucket" && s.labels["le"] != ""
		case "summary":
			ok = ok && s.labels["quantile"] != "" || s.name == cur+"_sum" || s.name == cur+"_count"
		}
		if !ok {
			return nil, fail("sample %s in family %s (%s)", s.name, cur, f.typ)
		}
		if seen[key] {
			return nil, fail("the same series twice")
		}
		seen[key] = true
		f.samples = append(f.samples, s)
	}
	return fams, nil
}

func parseSample(line string) (series, string, error) {
	s := series{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, "", fmt.Errorf("no value")
	}
	s.name, line = line[:i], line[i:]
	if !metricName.MatchString(s.name) {
		return s, "", fmt.Errorf("name %q", s.name)
	}
	var keys []string
	if line[0] == '{' {
		line = line[1:]
		for {
			eq := strings.Index(line, `="`)
			if eq < 0 {
				return s, "", fmt.Errorf("a label without =\"")
			}
			name := line[:eq]
			if !labelName.MatchString(name) {
				return s, "", fmt.Errorf("label name %q", name)
			}
			line = line[eq+2:]
			// The value ends at the first quote no backslash escapes.
			j := 0
			for ; j < len(line) && line[j] != '"'; j++ {
				if line[j] == '\\' {
					j++
				}
			}
			if j >= len(line) {
				return s, "", fmt.Errorf("an unterminated label value")
			}
			v, err := unescape(line[:j], true)
			if err != nil {
				return s, "", err
			}
			if _, dup := s.labels[name]; dup {
				return s, "", fmt.Errorf("label %s twice", name)
			}
			s.labels[name] = v
			keys = append(keys, name+"="+strconv.Quote(v))
			line = line[j+1:]
			if strings.HasPrefix(line, ",") {
				line = line[1:]
				continue
			}
			if !strings.HasPrefix(line, "}") {
				return s, "", fmt.Errorf("labels not closed")
			}
			line = line[1:]
			break
		}
	}
	v, ok := strings.CutPrefix(line, " ")
	if !ok || strings.ContainsAny(v, " \t") {
		return s, "", fmt.Errorf("not one space and one value: %q", line)
	}
	var err error
	if s.value, err = strconv.ParseFloat(v, 64); err != nil {
		return s, "", err
	}
	slices.Sort(keys)
	return s, s.name + "{" + strings.Join(keys, ",") + "}", nil
}

func unescape(s string, quote bool) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\n':
			return "", fmt.Errorf("a raw line feed")
		case c == '"' && quote:
			return "", fmt.Errorf("an unescaped quote")
		case c == '\\':
			if i++; i == len(s) {
				return "", fmt.Errorf("a trailing backslash")
			}
			switch s[i] {
			case '\\':
				b.WriteByte('\\')
			case 'n':
				b.WriteByte('\n')
			case '"':
				if !quote {
					return "", fmt.Errorf(`\" in HELP`)
				}
				b.WriteByte('"')
			default:
				return "", fmt.Errorf(`escape \%c`, s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func scrape(t *testing.T, m *Metrics, acceptEncoding string) (*http.Response, string) {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	// Set by hand, the transport leaves a gzipped body as it came.
	req.Header.Set("Accept-Encoding", acceptEncoding)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := io.Reader(resp.Body)
	if resp.Header.Get("Content-Encoding") == "gzip" {
		z, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		body = z
	}
	b, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// A language name comes from the client (a refused call counts under whatever it
// asked for): one holding a quote, a backslash and a line feed must stay one label
// value, not end the sample and forge another.
const hostile = "py\"} 1\nairlock_busy_refusals_total 1e9\n\\"

// The names, types and HELP lines client_golang wrote (the go_* and process_* sets of
// its default Go and process collectors, v1.25), which dashboards and alerts read.
var clientGolangFamilies = []string{
	"airlock_build_info gauge", "airlock_busy_refusals_total counter", "airlock_pool_hits_total counter",
	"airlock_pool_misses_total counter", "airlock_pool_ready gauge", "airlock_queue_depth gauge",
	"airlock_run_duration_seconds histogram", "airlock_runs_in_flight gauge", "airlock_runs_total counter",
	"airlock_sandbox_setup_failures_total counter",
	"go_gc_duration_seconds summary", "go_gc_gogc_percent gauge", "go_gc_gomemlimit_bytes gauge", "go_goroutines gauge",
	"go_info gauge", "go_memstats_alloc_bytes gauge", "go_memstats_alloc_bytes_total counter",
	"go_memstats_buck_hash_sys_bytes gauge", "go_memstats_frees_total counter", "go_memstats_gc_sys_bytes gauge",
	"go_memstats_heap_alloc_bytes gauge", "go_memstats_heap_idle_bytes gauge", "go_memstats_heap_inuse_bytes gauge",
	"go_memstats_heap_objects gauge", "go_memstats_heap_released_bytes gauge", "go_memstats_heap_sys_bytes gauge",
	"go_memstats_last_gc_time_seconds gauge", "go_memstats_mallocs_total counter", "go_memstats_mcache_inuse_bytes gauge",
	"go_memstats_mcache_sys_bytes gauge", "go_memstats_mspan_inuse_bytes gauge", "go_memstats_mspan_sys_bytes gauge",
	"go_memstats_next_gc_bytes gauge", "go_memstats_other_sys_bytes gauge", "go_memstats_stack_inuse_bytes gauge",
	"go_memstats_stack_sys_bytes gauge", "go_memstats_sys_bytes gauge", "go_sched_gomaxprocs_threads gauge",
	"go_threads gauge",
	"process_cpu_seconds_total counter", "process_max_fds gauge", "process_open_fds gauge", "process_resident_memory_bytes gauge",
	"process_start_time_seconds gauge", "process_virtual_memory_bytes gauge", "process_virtual_memory_max_bytes gauge",
}

func TestExpositionParsesStrictly(t *testing.T) {
	m := New(Sources{Version: "v1 \"quoted\"\\", Queued: func() int { return 3 }, Running: func() int { return 2 },
		Pool: func() sandbox.PoolStats { return sandbox.PoolStats{Hits: 7, Misses: 4, Ready: 1} }})
	m.ObserveRun("python", "ok", 5*time.Millisecond) // on a bound: counts in le="0.005"
	m.ObserveRun("python", "ok", 2*time.Second)
	m.ObserveRun("python", "timeout", 2*time.Minute) // above every bound: only +Inf
	m.ObserveRun("", "busy", time.Millisecond)
	m.ObserveRun(hostile, string(sandbox.StatusSandboxError), 0)

	resp, body := scrape(t, m, "")
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	fams, err := parseStrict(body)
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	var have []string
	for name, f := range fams {
		have = append(have, name+" "+f.typ)
	}
	slices.Sort(have)
	if !slices.Equal(have, clientGolangFamilies) {
		t.Errorf("families:\n%v\nwant client_golang's:\n%v", have, clientGolangFamilies)
	}
	if h := fams["go_gc_duration_seconds"].help; h != "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles." {
		t.Errorf("go_gc_duration_seconds HELP %q", h)
	}

	value := func(name string, labels ...string) float64 {
		t.Helper()
		want := map[string]string{}
		for i := 0; i+1 < len(labels); i += 2 {
			want[labels[i]] = labels[i+1]
		}
		for _, f := range fams {
			for _, s := range f.samples {
				if s.name == name && fmt.Sprint(s.labels) == fmt.Sprint(want) {
					return s.value
				}
			}
		}
		t.Errorf("no sample %s%v", name, want)
		return math.NaN()
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"airlock_runs_total", []string{"language", "python", "status", "ok"}, 2},
		{"airlock_runs_total", []string{"language", "python", "status", "timeout"}, 1},
		{"airlock_runs_total", []string{"language", "unknown", "status", "busy"}, 1},
		{"airlock_runs_total", []string{"language", hostile, "status", "sandbox_error"}, 1},
		{"airlock_busy_refusals_total", nil, 1},
		{"airlock_sandbox_setup_failures_total", nil, 1},
		{"airlock_queue_depth", nil, 3},
		{"airlock_runs_in_flight", nil, 2},
		{"airlock_pool_hits_total", nil, 7},
		{"airlock_pool_misses_total", nil, 4},
		{"airlock_pool_ready", nil, 1},
		{"airlock_build_info", []string{"goversion", runtime.Version(), "version", "v1 \"quoted\"\\"}, 1},
		{"airlock_run_duration_seconds_bucket", []string{"language", "python", "le", "0.005"}, 1},
		{"airlock_run_duration_seconds_bucket", []string{"language", "python", "le", "1"}, 1},
		{"airlock_run_duration_seconds_bucket", []string{"language", "python", "le", "2.5"}, 2},
		{"airlock_run_duration_seconds_bucket", []string{"language", "python", "le", "60"}, 2},
		{"airlock_run_duration_seconds_bucket", []string{"language", "python", "le", "+Inf"}, 3},
		{"airlock_run_duration_seconds_count", []string{"language", "python"}, 3},
		{"airlock_run_duration_seconds_sum", []string{"language", "python"}, 122.005},
		{"go_goroutines", nil, -1},
		{"process_open_fds", nil, -1},
		{"process_max_fds", nil, -1},
		{"process_cpu_seconds_total", nil, -1},
	} {
		got := value(c.name, c.labels...)
		if c.want >= 0 && got != c.want {
			t.Errorf("%s%q = %v, want %v", c.name, c.labels, got, c.want)
		}
		if c.want < 0 && !(got >= 0) {
			t.Errorf("%s = %v, want a reading", c.name, got)
		}
	}
	// Buckets are cumulative, in ascending le, per language.
	byLang := map[string][]series{}
	for _, s := range fams["airlock_run_duration_seconds"].samples {
		if s.name == "airlock_run_duration_seconds_bucket" {
			byLang[s.labels["language"]] = append(byLang[s.labels["language"]], s)
		}
	}
	for lang, bs := range byLang {
		if len(bs) != len(durationBuckets)+1 {
			t.Errorf("%q: %d buckets", lang, len(bs))
		}
		for i := 1; i < len(bs); i++ {
			lo, _ := strconv.ParseFloat(bs[i-1].labels["le"], 64)
			hi, _ := strconv.ParseFloat(bs[i].labels["le"], 64)
			if !(lo < hi) || bs[i].value < bs[i-1].value {
				t.Errorf("%q: bucket %v then %v", lang, bs[i-1], bs[i])
			}
		}
	}
	if open := value("process_open_fds"); open < 3 || open > value("process_max_fds") {
		t.Errorf("process_open_fds %v (max %v)", open, value("process_max_fds"))
	}
}

// Before the first call the runs vector and the histogram have no samples: their
// families are left out rather than written empty, as client_golang left them out.
func TestExpositionBeforeAnyCall(t *testing.T) {
	_, body := scrape(t, New(Sources{Version: "v"}), "")
	fams, err := parseStrict(body)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"airlock_runs_total", "airlock_run_duration_seconds", "airlock_queue_depth", "airlock_pool_ready"} {
		if fams[name] != nil {
			t.Errorf("%s is written before any call (or without its source)", name)
		}
	}
	if fams["airlock_busy_refusals_total"] == nil || fams["go_goroutines"] == nil {
		t.Errorf("the counters and Go families are missing:\n%s", body)
	}
}

// Prometheus asks for gzip; the body is then compressed, and the same text.
func TestHandlerGzipsWhenAsked(t *testing.T) {
	m := New(Sources{Version: "v"})
	for _, c := range []struct {
		accept string
		gzip   bool
	}{{"", false}, {"gzip", true}, {"deflate, gzip;q=1.0, *;q=0.5", true}, {"gzip;q=0", false}, {"identity", false}} {
		resp, body := scrape(t, m, c.accept)
		if got := resp.Header.Get("Content-Encoding") == "gzip"; got != c.gzip {
			t.Errorf("Accept-Encoding %q: gzipped %v, want %v", c.accept, got, c.gzip)
		}
		if _, err := parseStrict(body); err != nil {
			t.Errorf("Accept-Encoding %q: %v", c.accept, err)
		}
	}
}

func TestAppendFloatAndEscaped(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 1: "1", 0.005: "0.005", 2.5: "2.5", 1e21: "1e+21", 1.40264e+06: "1.40264e+06",
		math.Inf(1): "+Inf", math.Inf(-1): "-Inf", float64(^uint64(0)): "1.8446744073709552e+19"} {
		if got := string(appendFloat(nil, v)); got != want {
			t.Errorf("appendFloat(%v) = %q, want %q", v, got, want)
		}
	}
	if got := string(appendFloat(nil, math.NaN())); got != "NaN" {
		t.Errorf("appendFloat(NaN) = %q", got)
	}
	for _, c := range []struct {
		in    string
		quote bool
		want  string
	}{
		{`plain`, true, `plain`},
		{"a\"b\\c\nd", true, `a\"b\\c\nd`},
		{"a\"b\\c\nd", false, `a"b\\c\nd`},
		{"tab\tand ünïcode", true, "tab\tand ünïcode"},
	} {
		if got := string(appendEscaped(nil, c.in, c.quote)); got != c.want {
			t.Errorf("appendEscaped(%q, %v) = %q, want %q", c.in, c.quote, got, c.want)
		}
	}
}

// The server shares the host's network namespace: /proc/self/net/dev is the whole host's
// traffic, and a scrape must not carry it (a side channel on other tenants' egress).
func TestNoHostWideNetworkCounters(t *testing.T) {
	_, body := scrape(t, New(Sources{}), "")
	if strings.Contains(body, "process_network_") {
		t.Errorf("the exposition carries a network namespace's counters:\n%s", body)
	}
}
