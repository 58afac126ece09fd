// Package fleet is the fleet test behind `make fleet-test`: three stateless airlock
// replicas behind HAProxy on loopback, a load of mixed run_code calls from many MCP
// clients, and during it a rolling restart of one replica (SIGTERM: drain, exit 0,
// start again) and a SIGKILL of another. It then checks that every call got its result
// (retrying only answers that say nothing ran, or that were lost), and that the
// replicas' audit logs show each call executed exactly once.
//
//	phase       replica r0          replica r1                 replica r2
//	start       ready               ready                      ready
//	25% done    serving             SIGTERM → drain → exit 0   serving
//	                                → start → ready
//	50% done    serving             serving                    SIGKILL → start → ready
//	end         SIGTERM             SIGTERM                    SIGTERM
package fleet

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a run.
type Options struct {
	Binary  string
	Calls   int
	Clients int
	Dir     string // work directory (logs, audit logs, haproxy.cfg); kept
	Node    bool   // mix node calls in
	Log     io.Writer
}

// Report is what a run measured.
type Report struct {
	Options    Options
	Elapsed    time.Duration
	Results    int
	Failures   []string
	Retried    int            // calls that needed more than one attempt
	Retries    map[string]int // attempts retried, by reason
	P50, P99   time.Duration
	Executions map[int]int // audit records per number of executions of one call
	Duplicates []string    // calls the audit logs show executed more than once
	// LostAnswers are the duplicates the SIGKILL explains: the killed replica finished
	// the call just before it died, so its answer was lost and the client's retry ran it
	// again (the window docs/deploy.md describes). Reported, not failed.
	LostAnswers []string
	KilledAt    time.Time // when r2 got its SIGKILL
	Missing     []string  // calls with a result but no execution in any audit log
	Drain       time.Duration
	Events      []string
}

// OK reports whether the run passed.
func (r Report) OK() bool {
	return len(r.Failures) == 0 && len(r.Duplicates) == 0 && len(r.Missing) == 0 && r.Results == r.Options.Calls
}

// Run runs the fleet test.
func Run(ctx context.Context, opt Options) (Report, error) {
	rep := Report{Options: opt, Retries: map[string]int{}, Executions: map[int]int{}}
	logf := func(format string, args ...any) {
		line := fmt.Sprintf("%s "+format, append([]any{time.Now().Format("15:04:05.000")}, args...)...)
		rep.Events = append(rep.Events, line)
		fmt.Fprintln(opt.Log, "fleet:", line)
	}
	if err := os.MkdirAll(opt.Dir, 0o700); err != nil {
		return rep, err
	}
	tokens, names := "", make([]string, opt.Clients)
	secrets := make([]string, opt.Clients)
	for i := range names {
		var b [24]byte
		_, _ = rand.Read(b[:])
		names[i], secrets[i] = fmt.Sprintf("agent-%02d", i), hex.EncodeToString(b[:])
		tokens += names[i] + " " + secrets[i] + "\n"
	}
	tokensFile := filepath.Join(opt.Dir, "tokens")
	if err := os.WriteFile(tokensFile, []byte(tokens), 0o600); err != nil {
		return rep, err
	}
	langs := "python"
	if opt.Node {
		langs = "python,node"
	}
	env := []string{"AIRLOCK_TOKENS_FILE=" + tokensFile, "AIRLOCK_LANGUAGES=" + langs, "AIRLOCK_DRAIN_GRACE=20s",
		"AIRLOCK_QUEUE_SIZE=64", "AIRLOCK_QUEUE_TIMEOUT=20s", "AIRLOCK_LOG_FORMAT=json"}
	var reps []*replica
	defer func() {
		for _, r := range reps {
			r.stop()
		}
	}()
	for i := range 3 {
		port, err := freePort()
		if err != nil {
			return rep, err
		}
		r := &replica{name: fmt.Sprintf("r%d", i), port: port, bin: opt.Binary, dir: opt.Dir, env: env}
		_ = os.Remove(r.audit())
		if err := r.launch(ctx); err != nil {
			return rep, err
		}
		reps = append(reps, r)
		logf("%s ready on %s", r.name, r.url())
	}
	lb, err := startHAProxy(ctx, opt.Dir, reps)
	if err != nil {
		return rep, err
	}
	defer lb.stop()
	logf("haproxy on %s in front of %d replicas", lb.url(), len(reps))

	jobs := make(chan job)
	var done atomic.Int64
	outcomes := make([]outcome, 0, opt.Calls)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for i := range opt.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &client{url: lb.url(), token: secrets[i], http: &http.Client{Timeout: 60 * time.Second}}
			if err := c.initialize(ctx); err != nil {
				mu.Lock()
				rep.Failures = append(rep.Failures, names[i]+": "+err.Error())
				mu.Unlock()
			}
			for j := range jobs {
				o := c.do(ctx, j)
				done.Add(1)
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
			}
		}()
	}
	chaos := make(chan error, 1)
	go func() { chaos <- disrupt(ctx, reps, &done, opt.Calls, &rep, logf) }()
	for n := range opt.Calls {
		select {
		case jobs <- mix(n, opt.Node):
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	rep.Elapsed = time.Since(start)
	if err := <-chaos; err != nil {
		rep.Failures = append(rep.Failures, "disruption: "+err.Error())
	}
	logf("load done: %d calls in %s", len(outcomes), rep.Elapsed.Round(time.Millisecond))
	for _, r := range reps {
		r.stop()
	}

	var lat []time.Duration
	want := map[string]outcome{}
	for _, o := range outcomes {
		for why, k := range o.retries {
			rep.Retries[why] += k
		}
		if o.attempts > 1 {
			rep.Retried++
		}
		if o.err != nil {
			rep.Failures = append(rep.Failures, o.err.Error())
			continue
		}
		rep.Results++
		lat = append(lat, o.latency)
		want[o.job.sha()] = o
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		rep.P50, rep.P99 = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]
	}
	ran, err := executions(reps)
	if err != nil {
		return rep, err
	}
	for sha, o := range want {
		runs := ran[sha]
		rep.Executions[len(runs)]++
		switch {
		case len(runs) == 0:
			rep.Missing = append(rep.Missing, fmt.Sprintf("call %d", o.job.n))
		case len(runs) > 1:
			if why, ok := lostAnswer(o, runs, reps[2].name, rep.KilledAt); ok {
				rep.LostAnswers = append(rep.LostAnswers, fmt.Sprintf("call %d ran %d times: %s", o.job.n, len(runs), why))
				continue
			}
			rep.Duplicates = append(rep.Duplicates, fmt.Sprintf("call %d ran %d times (%s)", o.job.n, len(runs), runsString(runs)))
		}
	}
	sort.Strings(rep.Duplicates)
	sort.Strings(rep.LostAnswers)
	return rep, nil
}

// disrupt does the rolling restart of r1 at a quarter of the calls and the SIGKILL of
// r2 at half, each followed by a start that must come back ready.
func disrupt(ctx context.Context, reps []*replica, done *atomic.Int64, calls int, rep *Report, logf func(string, ...any)) error {
	wait := func(n int) error {
		for done.Load() < int64(n) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
		return nil
	}
	if err := wait(calls / 4); err != nil {
		return err
	}
	r1 := reps[1]
	logf("%s: SIGTERM (rolling restart) after %d calls", r1.name, done.Load())
	d, err := r1.drain(40 * time.Second)
	if err != nil {
		return err
	}
	rep.Drain = d
	logf("%s: drained and exited 0 in %s", r1.name, d.Round(time.Millisecond))
	if err := r1.launch(ctx); err != nil {
		return err
	}
	logf("%s: restarted and ready", r1.name)
	if err := wait(calls / 2); err != nil {
		return err
	}
	r2 := reps[2]
	logf("%s: SIGKILL after %d calls", r2.name, done.Load())
	rep.KilledAt = time.Now()
	r2.kill()
	time.Sleep(500 * time.Millisecond)
	if err := r2.launch(ctx); err != nil {
		return err
	}
	logf("%s: restarted and ready", r2.name)
	return nil
}

// lostWindow bounds how long before the SIGKILL a run may have ended for its answer to
// count as lost in the kill: the audit line's write and fsync and the answer's write,
// a few milliseconds on a calm host, tens under a CI's load.
const lostWindow = 250 * time.Millisecond

// run is one execution of a call in an audit log: which replica, and when its call ended
// (the record's start plus its duration: the line is written right after).
type run struct {
	replica string
	ended   time.Time
}

func runsString(runs []run) string {
	parts := make([]string, len(runs))
	for i, r := range runs {
		parts[i] = r.replica + " at " + r.ended.Format("15:04:05.000")
	}
	return strings.Join(parts, ", ")
}

// lostAnswer reports whether the SIGKILL explains a call that ran twice: the client
// retried it, and exactly one of its two runs was on the killed replica and ended within
// lostWindow before the kill. Any other duplicate is a call run twice for no reason.
func lostAnswer(o outcome, runs []run, killed string, killedAt time.Time) (string, bool) {
	if len(runs) != 2 || o.attempts < 2 || killedAt.IsZero() {
		return "", false
	}
	onKilled := 0
	var gap time.Duration
	for _, r := range runs {
		if r.replica == killed && !r.ended.After(killedAt) && killedAt.Sub(r.ended) <= lostWindow {
			onKilled++
			gap = killedAt.Sub(r.ended)
		}
	}
	if onKilled != 1 {
		return "", false
	}
	return fmt.Sprintf("its run on %s ended %s before that replica's SIGKILL, so the answer was lost in the kill and the retry ran it again (%s)",
		killed, gap.Round(100*time.Microsecond), runsString(runs)), true
}

// executions lists, per code_sha256, the audit records of calls that ran: a record
// whose status is a sandbox outcome. Refusals (busy) and sandbox errors ran nothing.
func executions(reps []*replica) (map[string][]run, error) {
	ran := map[string][]run{}
	for _, r := range reps {
		for _, path := range []string{r.audit() + ".1", r.audit()} {
			f, err := os.Open(path)
			if os.IsNotExist(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var rec struct {
					Time       time.Time `json:"time"`
					DurationMS int64     `json:"duration_ms"`
					CodeSHA256 string    `json:"code_sha256"`
					Status     string    `json:"status"`
				}
				if json.Unmarshal(sc.Bytes(), &rec) != nil {
					continue // a line torn by the SIGKILL
				}
				if rec.Status != "refused" && rec.Status != "sandbox_error" {
					end := rec.Time.Add(time.Duration(rec.DurationMS) * time.Millisecond)
					ran[rec.CodeSHA256] = append(ran[rec.CodeSHA256], run{replica: r.name, ended: end})
				}
			}
			f.Close()
			if err := sc.Err(); err != nil {
				return nil, err
			}
		}
	}
	return ran, nil
}

// Print writes the summary.
func (r Report) Print(w io.Writer) {
	secs := r.Elapsed.Seconds()
	fmt.Fprintf(w, "fleet: %d calls from %d clients through HAProxy to 3 replicas in %.1f s: %.1f calls/s\n",
		r.Options.Calls, r.Options.Clients, secs, float64(r.Results)/max(secs, 1e-9))
	fmt.Fprintf(w, "fleet: latency per call (retries included): p50 %s, p99 %s\n", r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond))
	reasons := make([]string, 0, len(r.Retries))
	total := 0
	for why, n := range r.Retries {
		reasons = append(reasons, fmt.Sprintf("%s %d", why, n))
		total += n
	}
	sort.Strings(reasons)
	fmt.Fprintf(w, "fleet: %d calls retried (%d retries: %s)\n", r.Retried, total, strings.Join(reasons, ", "))
	fmt.Fprintf(w, "fleet: drain of r1 took %s\n", r.Drain.Round(time.Millisecond))
	fmt.Fprintf(w, "fleet: results %d/%d; audit: executed once %d, twice or more %d (and %d lost in the SIGKILL), never %d\n",
		r.Results, r.Options.Calls, r.Executions[1], len(r.Duplicates), len(r.LostAnswers), len(r.Missing))
	if len(r.LostAnswers) > 0 {
		fmt.Fprintf(w, "fleet: LOST IN THE SIGKILL: %d call(s) ran twice because their answer died with the killed replica (docs/deploy.md, \"Retries and exactly-once\"):\n", len(r.LostAnswers))
	}
	for _, list := range [][]string{r.Failures, r.Duplicates, r.Missing, r.LostAnswers} {
		for i, s := range list {
			if i == 10 {
				fmt.Fprintf(w, "  ... and %d more\n", len(list)-10)
				break
			}
			fmt.Fprintln(w, "  "+s)
		}
	}
	if r.OK() {
		fmt.Fprintln(w, "PASS")
	} else {
		fmt.Fprintln(w, "FAIL")
	}
}
