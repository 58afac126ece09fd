package soak

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The concurrent-tenant mode: several airlock servers on one host (one per MCP client,
// as desktop clients start them), each serving calls at once. Some calls exhaust a
// per-user kernel budget and hold it; the others, and a host process of root, check
// that they still get theirs. Before each sandbox had a host uid of its own, every
// check failed while a hog ran (docs/tenants.md).

// budgetCheck uses a little of each budget the hogs take and prints "budgets ok" or
// what failed. It runs in sandboxes and, unsandboxed, on the host as root.
const budgetCheck = `
import ctypes, fcntl, os, resource, signal, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
bad = []
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
for _ in range(16):
    if libc.sigqueue(os.getpid(), signal.SIGRTMIN, ctypes.c_void_p(0)) != 0:
        bad.append("sigqueue: " + os.strerror(ctypes.get_errno()))
        break
r, w = os.pipe()
if fcntl.fcntl(w, 1032) != 65536:
    bad.append("new pipe of %d bytes" % fcntl.fcntl(w, 1032))
try:
    fcntl.fcntl(w, 1031, 1 << 20)
except OSError as e:
    bad.append("F_SETPIPE_SZ: " + e.strerror)
resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
a, b = socket.socketpair()
try:
    socket.send_fds(a, [b"x"], [r])
except OSError as e:
    bad.append("SCM_RIGHTS: " + e.strerror)
print("budgets " + ("ok" if not bad else "starved: " + "; ".join(bad)), sys.argv[1] if len(sys.argv) > 1 else "")
`

// hold keeps what a hog took for a second, then reports.
const hold = "import time, sys\ntime.sleep(1)\nprint('held', sys.argv[1])\n"

// TenantKinds is the mix of the tenant mode.
var TenantKinds = []Kind{
	{Name: "sig_hog", Weight: 1, Want: "ok", WantExit: exit(0), WantStdout: "held MARKER",
		code: "import ctypes, os, signal\nlibc = ctypes.CDLL(None, use_errno=True)\n" +
			"sigs = list(range(signal.SIGRTMIN, signal.SIGRTMAX + 1))\nsignal.pthread_sigmask(signal.SIG_BLOCK, sigs)\n" +
			"n = 0\nwhile n < 200000 and libc.sigqueue(os.getpid(), sigs[n % len(sigs)], ctypes.c_void_p(0)) == 0:\n    n += 1\n" + hold},
	{Name: "pipe_hog", Weight: 1, Want: "ok", WantExit: exit(0), WantStdout: "held MARKER",
		code: "import os, fcntl\nkeep = []\nfor _ in range(100):\n    r, w = os.pipe()\n    keep.append((r, w))\n" +
			"    try:\n        fcntl.fcntl(w, 1031, 1 << 20)\n    except OSError:\n        pass\n" + hold},
	{Name: "fd_hog", Weight: 1, Want: "ok", WantExit: exit(0), WantStdout: "held MARKER",
		code: "import os, socket\na, b = socket.socketpair()\nfds = [os.open('/dev/null', os.O_RDONLY) for _ in range(16)]\n" +
			"try:\n    while True:\n        socket.send_fds(a, [b'x'], fds)\nexcept OSError:\n    pass\n" + hold},
	{Name: "budgets", Weight: 3, Want: "ok", WantExit: exit(0), WantStdout: "budgets ok MARKER", code: budgetCheck},
}

func tenantKindOf(i int) Kind {
	n := 0
	for _, k := range TenantKinds {
		n += k.Weight
	}
	slot := i % n
	for _, k := range TenantKinds {
		if slot < k.Weight {
			return k
		}
		slot -= k.Weight
	}
	return TenantKinds[0]
}

// TenantReport is the outcome of a tenant soak.
type TenantReport struct {
	Tenants, Calls, Parallel int
	Took                     time.Duration
	Kinds                    map[string]*KindStats
	HostChecks, HostStarved  int
	HostStarvedWhy           []string
	// UIDsLeft: processes of the default block's host ids still alive after every
	// server has exited (any server's: see RunTenants).
	UIDsLeft []string
	Problems []string
}

// Pass reports whether every check held.
func (r *TenantReport) Pass() bool { return len(r.Problems) == 0 }

func (r *TenantReport) fail(format string, a ...any) {
	if len(r.Problems) < 50 {
		r.Problems = append(r.Problems, fmt.Sprintf(format, a...))
	}
}

// RunTenants starts tenants servers and sends calls run_code calls across them, Parallel
// at a time per server, while a host process of root checks its budgets.
func RunTenants(ctx context.Context, o Options, tenants int) (*TenantReport, error) {
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "airlock-tenants-")
		if err != nil {
			return nil, err
		}
		o.Dir = d
	}
	r := &TenantReport{Tenants: tenants, Calls: o.Calls, Parallel: o.Parallel, Kinds: map[string]*KindStats{}}
	for _, k := range TenantKinds {
		r.Kinds[k.Name] = &KindStats{Statuses: map[string]int{}}
	}
	marker := fmt.Sprintf("airlock-tenants-%d-%d", os.Getpid(), time.Now().UnixNano())
	var servers []*Server
	defer func() {
		for _, s := range servers {
			select {
			case <-s.Exited():
			default:
				s.Kill()
			}
		}
	}()
	for i := range tenants {
		dir := filepath.Join(o.Dir, fmt.Sprintf("tenant-%d", i))
		if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o750); err != nil {
			return nil, err
		}
		env := ServerEnv(dir, fmt.Sprintf("AIRLOCK_MAX_PARALLEL=%d", o.Parallel), "AIRLOCK_QUEUE_SIZE=64",
			"AIRLOCK_QUEUE_TIMEOUT=120s", "AIRLOCK_AUDIT="+filepath.Join(dir, "audit.jsonl"), fmt.Sprintf("AIRLOCK_POOL_SIZE=%d", o.Pool))
		s, err := StartServer(ctx, o.Binary, env, filepath.Join(dir, "server.log"))
		if err != nil {
			return nil, fmt.Errorf("tenant %d: %w", i, err)
		}
		servers = append(servers, s)
	}

	// The host observer: root, unsandboxed, checking while the tenants run.
	stop := make(chan struct{})
	var obs sync.WaitGroup
	obs.Add(1)
	go func() {
		defer obs.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			out, err := exec.CommandContext(ctx, "/usr/bin/python3", "-I", "-S", "-c", budgetCheck).Output()
			r.HostChecks++
			if line := strings.TrimSpace(string(out)); err != nil || !strings.HasPrefix(line, "budgets ok") {
				r.HostStarved++
				if len(r.HostStarvedWhy) < 5 {
					r.HostStarvedWhy = append(r.HostStarvedWhy, fmt.Sprintf("%s %v", line, err))
				}
			}
		}
	}()

	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for _, s := range servers {
		for range o.Parallel {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= o.Calls || ctx.Err() != nil {
						return
					}
					k := tenantKindOf(i)
					m := fmt.Sprintf("%s-%d", marker, i)
					c0 := time.Now()
					res, err := call(ctx, s, k, m, nil)
					ms := time.Since(c0).Milliseconds()
					mu.Lock()
					ks := r.Kinds[k.Name]
					ks.Calls++
					ks.TotalMs += ms
					ks.MaxMs = max(ks.MaxMs, ms)
					switch {
					case err != nil:
						ks.Wrong++
						ks.Statuses["no_answer"]++
						r.fail("call %d (%s): no answer: %v", i, k.Name, err)
					default:
						ks.Statuses[res.Status]++
						if why := k.mismatch(res, m); why != "" {
							ks.Wrong++
							r.fail("call %d (%s): %s", i, k.Name, why)
						}
					}
					mu.Unlock()
					if o.Progress != nil && (i+1)%100 == 0 {
						fmt.Fprintf(o.Progress, "tenants: %d/%d calls\n", i+1, o.Calls)
					}
				}
			}()
		}
	}
	wg.Wait()
	r.Took = time.Since(t0)
	close(stop)
	obs.Wait()
	if r.HostStarved > 0 {
		r.fail("a host process of root was starved in %d of %d checks: %v", r.HostStarved, r.HostChecks, r.HostStarvedWhy)
	}
	for i, s := range servers {
		if code, _, err := s.CloseStdin(10 * time.Second); err != nil || code != 0 {
			r.fail("tenant %d exit on stdin EOF: code %d: %v", i, code, err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if marked, _ := Procs(marker, 0); len(marked) > 0 {
		r.fail("%d marked processes outlived their servers", len(marked))
	}
	// Not a failure here: other servers on the host (tests alongside) use the block too;
	// airlock-soak, run alone, fails on it.
	r.UIDsLeft = sandboxUIDProcs()
	return r, nil
}

// sandboxUIDProcs lists host processes whose real uid is in the default sandbox block
// (sandbox/linux.DefaultUIDRange: 1879048192 and the 65535 after it).
func sandboxUIDProcs() []string {
	const first, size = 1879048192, 65536
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(l, "Uid:"); ok {
				if f := strings.Fields(rest); len(f) > 0 {
					if uid, _ := strconv.Atoi(f[0]); uid >= first && uid < first+size {
						out = append(out, e.Name()+" uid "+f[0])
					}
				}
			}
		}
	}
	return out
}

// Print writes the summary table and the PASS/FAIL line.
func (r *TenantReport) Print(w io.Writer) {
	fmt.Fprintf(w, "airlock tenant soak: %d servers, %d calls, %d at a time per server, in %s\n", r.Tenants, r.Calls, r.Parallel, r.Took.Round(time.Millisecond))
	fmt.Fprintf(w, "%-13s %6s %6s %8s %8s  %s\n", "kind", "calls", "wrong", "avg_ms", "max_ms", "statuses")
	for _, k := range TenantKinds {
		ks := r.Kinds[k.Name]
		var st []string
		for s, n := range ks.Statuses {
			st = append(st, fmt.Sprintf("%s=%d", s, n))
		}
		sort.Strings(st)
		avg := int64(0)
		if ks.Calls > 0 {
			avg = ks.TotalMs / int64(ks.Calls)
		}
		fmt.Fprintf(w, "%-13s %6d %6d %8d %8d  %s\n", k.Name, ks.Calls, ks.Wrong, avg, ks.MaxMs, strings.Join(st, " "))
	}
	fmt.Fprintf(w, "host (root) budget checks: %d, starved %d; sandbox-uid processes left: %d\n", r.HostChecks, r.HostStarved, len(r.UIDsLeft))
	for _, p := range r.Problems {
		fmt.Fprintln(w, "  problem:", p)
	}
	if r.Pass() {
		fmt.Fprintln(w, "PASS")
	} else {
		fmt.Fprintf(w, "FAIL (%d problems)\n", len(r.Problems))
	}
}
