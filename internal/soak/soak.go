// Package soak drives a real `airlock serve` over stdio with thousands of hostile and
// ordinary run_code calls, then checks from the host that nothing was left behind. The
// airlock-soak command and the short soak test both use it.
package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Options configure a soak run.
type Options struct {
	Binary string
	// Calls is the number of measured calls: the first half one at a time, the second
	// half Parallel at a time.
	Calls    int
	Parallel int
	// Memory is the server's per-run memory limit (see Kinds).
	Memory string
	// MaxRSSGrowth bounds how much the server's resident memory may grow from the
	// warmed-up baseline to the end.
	MaxRSSGrowth int64
	// GoroutineSlack is how many more goroutines than a freshly warmed-up twin server the
	// soaked server may end with; 0 skips the goroutine check (it costs a second server).
	GoroutineSlack int
	// Pool is the server's warm pool size per language; its idle sandboxes are allowed
	// to remain while the server runs (at most Pool inits and cgroups).
	Pool int
	// Dir holds the server's log, audit log and TMPDIR; empty makes a temporary one.
	Dir string
	// Isolation is the server's sandbox.isolation ("" for its default).
	Isolation string
	// Progress, when set, gets a line every few hundred calls.
	Progress io.Writer
	// Sessions sends every call in a run_code session: each sequence of calls (the
	// sequential half, each parallel worker) keeps one open, closing it and starting
	// another every LaneCalls calls and at its end, so hostile calls run as the n-th call
	// of a session beside the state earlier calls left.
	Sessions bool
}

// LaneCalls is how many calls a soak session takes before it is closed.
const LaneCalls = 20

// lane is one sequence of calls in sessions mode: the session it is in.
type lane struct {
	id    string
	calls int
}

// KindStats are the figures for one kind of call.
type KindStats struct {
	Calls    int
	Wrong    int
	Statuses map[string]int
	TotalMs  int64
	MaxMs    int64
}

// Report is the outcome of a soak run.
type Report struct {
	Options        Options
	ServerPID      int
	Marker         string
	Kinds          map[string]*KindStats
	Warmup         int
	Sequential     time.Duration
	ParallelTime   time.Duration
	Sent           int
	Answered       int
	Duplicates     int
	NonJSON        int
	AuditLines     int
	AuditMissing   int
	AuditOther     int
	IdleProcs      int
	IdleInits      int
	IdleCgroups    int
	ExitProcs      int
	ExitInits      int
	ExitCgroups    int
	StaleRemoved   string
	NextLog        string // the restarted server's log, for a failure's evidence
	CgroupBases    []string
	MountsAdded    []string
	TempLeft       []string
	Before, After  Stats
	GoroutinesTwin int
	GoroutinesEnd  int
	ExitCode       int
	Problems       []string
	// extra counts the calls beyond the measured ones (sessions mode: the closing calls).
	extra atomic.Int64
}

// Pass reports whether every check held.
func (r *Report) Pass() bool { return len(r.Problems) == 0 }

func (r *Report) fail(format string, a ...any) {
	if len(r.Problems) < 50 {
		r.Problems = append(r.Problems, fmt.Sprintf(format, a...))
	}
}

// Run performs the soak. An error means the soak itself could not run; a failed check is
// in Report.Problems.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Parallel <= 0 {
		o.Parallel = 8
	}
	if o.Memory == "" {
		o.Memory = "128MiB"
	}
	if o.MaxRSSGrowth <= 0 {
		o.MaxRSSGrowth = 32 << 20
	}
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "airlock-soak-")
		if err != nil {
			return nil, fmt.Errorf("work dir: %w", err)
		}
		o.Dir = d
	}
	if err := os.MkdirAll(filepath.Join(o.Dir, "tmp"), 0o750); err != nil {
		return nil, fmt.Errorf("tmp dir: %w", err)
	}
	r := &Report{Options: o, Kinds: map[string]*KindStats{}, Marker: fmt.Sprintf("airlock-soak-%d-%d", os.Getpid(), time.Now().UnixNano())}
	for _, k := range Kinds {
		r.Kinds[k.Name] = &KindStats{Statuses: map[string]int{}}
	}
	// The restart after SIGQUIT must find the dead server's cgroups itself.
	restore, err := PrivateCgroup(fmt.Sprintf("airlock-soak-%d", os.Getpid()))
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := restore(); err != nil {
			r.fail("private cgroup: %v", err)
		}
	}()
	env := func(audit string) []string {
		extra := []string{"AIRLOCK_MEMORY=" + o.Memory,
			fmt.Sprintf("AIRLOCK_MAX_PARALLEL=%d", o.Parallel), "AIRLOCK_QUEUE_SIZE=64", "AIRLOCK_QUEUE_TIMEOUT=120s",
			"AIRLOCK_AUDIT=" + filepath.Join(o.Dir, audit), "GOTRACEBACK=all",
			fmt.Sprintf("AIRLOCK_POOL_SIZE=%d", o.Pool)}
		if o.Isolation != "" {
			extra = append(extra, "AIRLOCK_ISOLATION="+o.Isolation)
		}
		return ServerEnv(o.Dir, extra...)
	}
	mounts0 := Mounts()

	if o.GoroutineSlack > 0 {
		twin, err := StartServer(ctx, o.Binary, env("twin-audit.jsonl"), filepath.Join(o.Dir, "twin.log"))
		if err != nil {
			return nil, fmt.Errorf("twin server: %w", err)
		}
		for i := 0; i < Weights(); i++ {
			_, _ = call(ctx, twin, kindOf(i), r.Marker+"-twin-"+fmt.Sprint(i), nil)
		}
		// Only waiting for the twin to go quiet; its counts are not compared.
		_, _ = settle(twin.PID(), r.Marker, Stats{FDs: 1 << 30}, o.Pool)
		n, err := twin.Goroutines(10 * time.Second)
		if err != nil {
			return nil, fmt.Errorf("twin goroutines: %w", err)
		}
		r.GoroutinesTwin = n
	}

	srv, err := StartServer(ctx, o.Binary, env("audit.jsonl"), filepath.Join(o.Dir, "server.log"))
	if err != nil {
		return nil, err
	}
	defer func() {
		select {
		case <-srv.Exited():
		default:
			srv.Kill()
		}
	}()
	r.ServerPID = srv.PID()
	handshake, _, _, _ := srv.Wire.Counts()
	r.CgroupBases = CgroupBases(r.ServerPID)

	// Warm up: the first calls open files and start threads the server keeps for good.
	var ids sync.Map
	n := 0
	next := func() int { n++; return n - 1 }
	warm := r.newLane()
	for i := 0; i < Weights(); i++ {
		r.one(ctx, srv, next(), &ids, warm)
	}
	r.endLane(ctx, srv, warm, &ids)
	r.Warmup = Weights()
	if r.Before, err = settle(r.ServerPID, r.Marker, Stats{FDs: 1 << 30}, o.Pool); err != nil {
		return nil, err
	}

	seq := o.Calls / 2
	t0 := time.Now()
	seqLane := r.newLane()
	for i := 0; i < seq; i++ {
		r.one(ctx, srv, next(), &ids, seqLane)
		r.progress(i+1, o.Calls)
	}
	r.endLane(ctx, srv, seqLane, &ids)
	r.Sequential = time.Since(t0)

	work := make(chan int)
	var wg sync.WaitGroup
	var done atomic.Int64
	for w := 0; w < o.Parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ln := r.newLane()
			for i := range work {
				r.one(ctx, srv, i, &ids, ln)
				r.progress(seq+int(done.Add(1)), o.Calls)
			}
			r.endLane(ctx, srv, ln, &ids)
		}()
	}
	t0 = time.Now()
	for i := seq; i < o.Calls; i++ {
		work <- next()
	}
	close(work)
	wg.Wait()
	r.ParallelTime = time.Since(t0)
	r.Sent = handshake + n + int(r.extra.Load())

	// Idle: every sandbox of the soak must be gone while the server still runs.
	r.After, err = settle(r.ServerPID, r.Marker, r.Before, o.Pool)
	if err != nil {
		return nil, err
	}
	marked, inits := Procs(r.Marker, r.ServerPID)
	r.IdleProcs, r.IdleInits = len(marked), len(inits)
	r.IdleCgroups = len(names(Cgroups(r.CgroupBases, r.ServerPID)))
	r.Answered, r.Duplicates, r.NonJSON, _ = srv.Wire.Counts()

	servers := []int{r.ServerPID}
	if o.GoroutineSlack > 0 {
		r.GoroutinesEnd, err = srv.Goroutines(10 * time.Second)
		if err != nil {
			r.fail("goroutine dump: %v", err)
		}
		// SIGQUIT is a crash: the warm pool's cgroups stay on disk. The next server start
		// must remove them and say so.
		if next, err := StartServer(ctx, o.Binary, env("next-audit.jsonl"), filepath.Join(o.Dir, "next.log")); err != nil {
			r.fail("restart after SIGQUIT: %v", err)
		} else {
			servers = append(servers, next.PID())
			if code, _, err := next.CloseStdin(10 * time.Second); err != nil || code != 0 {
				r.fail("restarted server exit on stdin EOF: code %d: %v", code, err)
			}
			r.NextLog = next.Log()
			for _, line := range strings.Split(r.NextLog, "\n") {
				if strings.Contains(line, "removed stale sandbox cgroups") {
					r.StaleRemoved = line
				}
			}
		}
	} else {
		code, took, err := srv.CloseStdin(10 * time.Second)
		r.ExitCode = code
		if err != nil || code != 0 {
			r.fail("server exit on stdin EOF: code %d after %s: %v", code, took.Round(time.Millisecond), err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	marked, inits = Procs(r.Marker, r.ServerPID)
	r.ExitProcs, r.ExitInits = len(marked), len(inits)
	r.ExitCgroups = len(names(AllCgroups(r.CgroupBases, r.ServerPID)))
	for _, m := range MountDiff(mounts0, Mounts()) {
		if (strings.Contains(m, "airlock") || strings.Contains(m, o.Dir)) && !otherLandlockServer(m, servers) {
			r.MountsAdded = append(r.MountsAdded, m)
		}
	}
	r.TempLeft = Entries(filepath.Join(o.Dir, "tmp"))
	r.checkAudit(filepath.Join(o.Dir, "audit.jsonl"), &ids)
	r.check()
	return r, nil
}

// names is the set of cgroup names in dirs (one per sandbox; cgroup v1 has a dir per
// controller).
func names(dirs []string) map[string]bool {
	out := map[string]bool{}
	for _, d := range dirs {
		out[filepath.Base(d)] = true
	}
	return out
}

// settle waits up to 5 s for the marked processes to go, the server's sandboxes to be
// exactly its full warm pool and its fd count to fall to want's, then returns the
// server's stats.
func settle(pid int, marker string, want Stats, pool int) (Stats, error) {
	deadline := time.Now().Add(5 * time.Second)
	steady := 0
	for {
		st, err := StatsOf(pid)
		if err != nil {
			return st, err
		}
		marked, inits, spawners := scan(marker, pid)
		cgs := names(Cgroups(CgroupBases(pid), pid))
		// The warm pool must be full again, and no sandbox coming or going (a finished
		// one lingers a few milliseconds), so that the fds count the same in the baseline
		// and at the end: the same state twice in a row.
		if len(marked) == 0 && len(inits) == pool && len(cgs) == pool && len(spawners) == pool && st.FDs <= want.FDs {
			steady++
		} else {
			steady = 0
		}
		if steady == 2 || time.Now().After(deadline) {
			return st, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *Report) progress(i, total int) {
	if r.Options.Progress != nil && (i%250 == 0 || i == total) {
		fmt.Fprintf(r.Options.Progress, "soak: %d/%d calls\n", i, total)
	}
}

var kindMu sync.Mutex

// one sends call i and checks its answer against its kind.
func (r *Report) one(ctx context.Context, srv *Server, i int, ids *sync.Map, ln *lane) {
	k := kindOf(i)
	marker := fmt.Sprintf("%s-%d", r.Marker, i)
	t0 := time.Now()
	res, err := call(ctx, srv, k, marker, ln)
	ms := time.Since(t0).Milliseconds()
	kindMu.Lock()
	defer kindMu.Unlock()
	ks := r.Kinds[k.Name]
	ks.Calls++
	ks.TotalMs += ms
	ks.MaxMs = max(ks.MaxMs, ms)
	if err != nil {
		ks.Wrong++
		ks.Statuses["no_answer"]++
		r.fail("call %d (%s): no answer: %v", i, k.Name, err)
		return
	}
	ks.Statuses[res.Status]++
	if res.ID != "" {
		ids.Store(res.ID, res.Status)
	}
	if why := k.mismatch(res, marker); why != "" {
		ks.Wrong++
		r.fail("call %d (%s): %s", i, k.Name, why)
	}
	if ln != nil && res.SessionID == "" {
		ks.Wrong++
		r.fail("call %d (%s) in a session: no session_id in the answer", i, k.Name)
	}
}

func indent(code string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(code, "\n"), "\n") {
		b.WriteString("    " + line + "\n")
	}
	return b.String()
}

// endLane closes ln's session, if it has one, with a last call of its own.
func (r *Report) endLane(ctx context.Context, srv *Server, ln *lane, ids *sync.Map) {
	if ln == nil || ln.id == "" {
		return
	}
	ln.calls = LaneCalls
	res, err := call(ctx, srv, Kind{Name: "close", code: "pass\n"}, r.Marker+"-close", ln)
	r.extra.Add(1)
	if err == nil && res.ID != "" {
		ids.Store(res.ID, res.Status)
	}
	switch {
	case err != nil:
		r.fail("closing a session: no answer: %v", err)
	case res.Status != "ok" || !res.SessionClosed:
		r.fail("closing a session: status %s, closed %v: %.200q", res.Status, res.SessionClosed, res.Text)
	}
}

// newLane is a lane in sessions mode, nil otherwise.
func (r *Report) newLane() *lane {
	if !r.Options.Sessions {
		return nil
	}
	return &lane{}
}

// Answer is the part of a run_code result the soak checks.
type Answer struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Detail   string `json:"detail"`
	IsError  bool   `json:"-"`
	Text     string `json:"-"`
	// In sessions mode.
	SessionID     string `json:"session_id"`
	SessionClosed bool   `json:"session_closed"`
}

func call(ctx context.Context, srv *Server, k Kind, marker string, ln *lane) (Answer, error) {
	args := map[string]any{"code": k.Code(marker), "language": "python", "args": []string{marker}}
	if ln != nil {
		// A session's program is its driver: the marker goes where the programs read it.
		delete(args, "args")
		args["code"] = "import sys\nsys.argv = ['main.py', " + fmt.Sprintf("%q", marker) + "]\n" + k.Code(marker)
		if k.Name == "disk_fill" {
			// A session's files stay, and a full workspace is memory the session holds
			// (tmpfs): the next calls would meet the memory limit.
			args["code"] = "import atexit, os\ntry:\n" + indent(args["code"].(string)) + "finally:\n    os.remove('fill')\n"
		}
		args["session"] = "new"
		if ln.id != "" {
			args["session"] = ln.id
		}
		ln.calls++
		if ln.calls >= LaneCalls {
			args["close_session"] = true
		}
	}
	if k.Timeout > 0 {
		args["timeout_seconds"] = k.Timeout
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_code"
	req.Params.Arguments = args
	cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	res, err := srv.Client.CallTool(cctx, req)
	if err != nil {
		return Answer{}, err
	}
	a := AnswerOf(res)
	if ln != nil {
		ln.id = a.SessionID
		if a.SessionClosed || ln.calls >= LaneCalls {
			ln.id, ln.calls = "", 0
		}
	}
	return a, nil
}

// AnswerOf reads a run_code result; a result without structured content (a refusal) has
// status "tool_error".
func AnswerOf(res *mcp.CallToolResult) Answer {
	var a Answer
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			a.Text += tc.Text
		}
	}
	a.IsError = res.IsError
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &a)
	}
	if a.Status == "" {
		a.Status = "tool_error"
	}
	return a
}

func (k Kind) mismatch(a Answer, marker string) string {
	switch {
	case a.Status != k.Want && (k.OrWant == "" || a.Status != k.OrWant):
		want := k.Want
		if k.OrWant != "" {
			want += " or " + k.OrWant
		}
		return fmt.Sprintf("status %s, want %s (detail %q, text %.600q)", a.Status, want, a.Detail, a.Text)
	case k.WantExit != nil && a.ExitCode != *k.WantExit:
		return fmt.Sprintf("exit code %d, want %d", a.ExitCode, *k.WantExit)
	case k.WantStdout != "" && !strings.Contains(a.Stdout, strings.ReplaceAll(k.WantStdout, "MARKER", marker)):
		return fmt.Sprintf("stdout %.100q lacks %q", a.Stdout, k.WantStdout)
	case a.IsError != (a.Status != "ok"):
		return fmt.Sprintf("isError %v with status %s", a.IsError, a.Status)
	}
	return ""
}

// checkAudit checks that the audit log has exactly one line per answered run, with the
// status the client saw.
func (r *Report) checkAudit(path string, ids *sync.Map) {
	f, err := os.Open(path)
	if err != nil {
		r.fail("audit log: %v", err)
		return
	}
	defer f.Close()
	seen := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var rec struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			r.fail("audit line %d is not JSON: %v", r.AuditLines+1, err)
			continue
		}
		if _, ours := ids.Load(rec.ID); !ours {
			r.AuditOther++ // the startup probes run through the runner too
			continue
		}
		r.AuditLines++
		if _, dup := seen[rec.ID]; dup {
			r.fail("audit id %s appears twice", rec.ID)
		}
		seen[rec.ID] = rec.Status
	}
	ids.Range(func(k, v any) bool {
		st, ok := seen[k.(string)]
		switch {
		case !ok:
			r.AuditMissing++
		case st != v.(string):
			r.fail("audit says %s for run %s, the client got %s", st, k, v)
		}
		return true
	})
}

func (r *Report) check() {
	o := r.Options
	if r.Answered != r.Sent || r.Duplicates != 0 || r.NonJSON != 0 {
		r.fail("wire: %d requests, %d answered ids, %d answered twice, %d non-JSON stdout lines", r.Sent, r.Answered, r.Duplicates, r.NonJSON)
	}
	if r.AuditMissing != 0 || r.AuditLines != r.Sent-1 {
		r.fail("audit: %d lines for %d runs, %d runs missing", r.AuditLines, r.Sent-1, r.AuditMissing)
	}
	if r.IdleProcs != 0 || r.IdleInits > o.Pool || r.IdleCgroups > o.Pool || r.ExitProcs+r.ExitInits+r.ExitCgroups != 0 {
		r.fail("leftovers: idle %d marked processes, %d inits, %d cgroups (pool %d); after exit %d, %d, %d",
			r.IdleProcs, r.IdleInits, r.IdleCgroups, o.Pool, r.ExitProcs, r.ExitInits, r.ExitCgroups)
	}
	if o.GoroutineSlack > 0 && o.Pool > 0 && len(r.CgroupBases) > 0 && r.StaleRemoved == "" {
		r.fail("the server started after the SIGQUIT did not log removing the pool's stale cgroups; its log:\n%s", r.NextLog)
	}
	if len(r.MountsAdded) > 0 {
		r.fail("mounts left: %v", r.MountsAdded)
	}
	if len(r.TempLeft) > 0 {
		r.fail("temp entries left in the server's TMPDIR: %v", r.TempLeft)
	}
	if r.After.FDs > r.Before.FDs {
		r.fail("server fds: %d after, %d at the warmed-up baseline", r.After.FDs, r.Before.FDs)
	}
	if g := r.After.RSS - r.Before.RSS; g > o.MaxRSSGrowth {
		r.fail("server RSS grew %d MiB, the bound is %d MiB", g>>20, o.MaxRSSGrowth>>20)
	}
	// Go parks idle OS threads instead of ending them, so the thread count is bounded by
	// the peak concurrency, not restored: a leak of one thread per call would still show.
	if bound := r.Before.Threads + 2*o.Parallel + 8; r.After.Threads > bound {
		r.fail("server threads: %d after, bound %d", r.After.Threads, bound)
	}
	if o.GoroutineSlack > 0 && r.GoroutinesEnd > r.GoroutinesTwin+o.GoroutineSlack {
		r.fail("goroutines: %d at the end, a warmed-up twin has %d (slack %d)", r.GoroutinesEnd, r.GoroutinesTwin, o.GoroutineSlack)
	}
}

// Print writes the summary table and the PASS/FAIL line.
func (r *Report) Print(w io.Writer) {
	mode := ""
	if r.Options.Sessions {
		mode = fmt.Sprintf(" in sessions (%d calls each)", LaneCalls)
	}
	fmt.Fprintf(w, "airlock soak%s: %d calls (%d sequential in %s, %d at %d-parallel in %s) + %d warm-up, server pid %d\n",
		mode, r.Options.Calls, r.Options.Calls/2, r.Sequential.Round(time.Millisecond), r.Options.Calls-r.Options.Calls/2,
		r.Options.Parallel, r.ParallelTime.Round(time.Millisecond), r.Warmup, r.ServerPID)
	fmt.Fprintf(w, "%-13s %6s %6s %8s %8s  %s\n", "kind", "calls", "wrong", "avg_ms", "max_ms", "statuses")
	names := make([]string, 0, len(r.Kinds))
	for _, k := range Kinds {
		names = append(names, k.Name)
	}
	for _, name := range names {
		ks := r.Kinds[name]
		var st []string
		for s, n := range ks.Statuses {
			st = append(st, fmt.Sprintf("%s=%d", s, n))
		}
		sort.Strings(st)
		avg := int64(0)
		if ks.Calls > 0 {
			avg = ks.TotalMs / int64(ks.Calls)
		}
		fmt.Fprintf(w, "%-13s %6d %6d %8d %8d  %s\n", name, ks.Calls, ks.Wrong, avg, ks.MaxMs, strings.Join(st, " "))
	}
	fmt.Fprintf(w, "wire: %d requests, %d answered, %d duplicate answers, %d non-JSON lines\n", r.Sent, r.Answered, r.Duplicates, r.NonJSON)
	fmt.Fprintf(w, "audit: %d lines for the soak's runs, %d answered runs missing, %d other lines (startup probes)\n", r.AuditLines, r.AuditMissing, r.AuditOther)
	fmt.Fprintf(w, "leftovers idle: %d marked procs, %d sandbox inits, %d cgroups (warm pool %d allowed); after exit: %d, %d, %d; mounts %d; temp %d\n",
		r.IdleProcs, r.IdleInits, r.IdleCgroups, r.Options.Pool, r.ExitProcs, r.ExitInits, r.ExitCgroups, len(r.MountsAdded), len(r.TempLeft))
	if r.StaleRemoved != "" {
		fmt.Fprintf(w, "next start after SIGQUIT logged: %s\n", r.StaleRemoved)
	}
	fmt.Fprintf(w, "server fds %d -> %d, threads %d -> %d, RSS %.1f -> %.1f MiB (bound +%d MiB)\n",
		r.Before.FDs, r.After.FDs, r.Before.Threads, r.After.Threads, float64(r.Before.RSS)/(1<<20), float64(r.After.RSS)/(1<<20), r.Options.MaxRSSGrowth>>20)
	if r.Options.GoroutineSlack > 0 {
		fmt.Fprintf(w, "goroutines (SIGQUIT dump): %d at the end, warmed-up twin %d (slack %d)\n", r.GoroutinesEnd, r.GoroutinesTwin, r.Options.GoroutineSlack)
	}
	for _, p := range r.Problems {
		fmt.Fprintln(w, "  problem:", p)
	}
	if r.Pass() {
		fmt.Fprintln(w, "PASS")
	} else {
		fmt.Fprintf(w, "FAIL (%d problems)\n", len(r.Problems))
	}
}

// landlockRunDir matches a Landlock-tier server's directory of run directories
// (landlock-<pid>.<pid ns>.<time ns>.<start>-…, named in sandbox/linux/owner_linux.go;
// older versions: landlock-<pid>-…), under which it mounts each run's workspace on the
// host.
var landlockRunDir = regexp.MustCompile(`/landlock-([0-9]+)[.-][^/]*/`)

// otherLandlockServer reports whether mount point m is a run mount of a Landlock-tier
// server that is not one of the soak's: another test or server on the host, whose runs
// come and go while the soak runs and are not the soak's leftovers.
func otherLandlockServer(m string, servers []int) bool {
	sub := landlockRunDir.FindStringSubmatch(m + "/")
	if sub == nil {
		return false
	}
	pid, err := strconv.Atoi(sub[1])
	return err == nil && !slices.Contains(servers, pid)
}
