package tools

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/airlock-mcp/airlock/session"
)

// tenantPlant is tenant a's call in the data environment (numpy, pandas and
// matplotlib.pyplot preloaded in its pool): it tries to leave something for whichever
// call of another tenant comes next, in every place an environment's python reads or
// writes. Into the environment: a .pth file, sitecustomize and usercustomize, a module
// and bytecode in each of its import directories (the venv's own and the system's it
// sees), beside matplotlib's and pandas' own modules. Into the caches: matplotlib's font
// list and matplotlibrc (MPLCONFIGDIR, its cache dir, HOME's default config dir),
// fontconfig's user and system caches, python's user site. Into the kernel: SysV shared
// memory, a POSIX message queue, a listening abstract unix socket, a memfd, held by a
// setsid daemon (which holds 192 MiB too, so that its end takes the kernel a while). Into its own interpreter: the environment, a signal handler, rcParams.
// It prints what each write did and stays in flight (HOLD: seconds) so that the other
// tenant's calls run beside it. MARK is the run's marker.
const tenantPlant = `import ctypes, json, os, signal, site, socket, subprocess, sys, time
import matplotlib, matplotlib.font_manager as fm, matplotlib.pyplot as plt, pandas
libc = ctypes.CDLL(None, use_errno=True)
writes = {}
def attempt(what, fn):
    try:
        fn()
        writes[what] = "written"
    except OSError as e:
        writes[what] = e.__class__.__name__
def put(p, text="import os; os.environ['MARK'] = '1'\n"):
    def fn():
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "a") as f:
            f.write(text)
    return fn
dirs = [p for p in sys.path if p.startswith(("/env", "/usr")) and os.path.isdir(p)]
dirs += [site.getusersitepackages()]
for d in dirs:
    for n in ("MARK.pth", "sitecustomize.py", "usercustomize.py", "MARK.py", "__pycache__/MARK.cpython-311.pyc"):
        attempt(os.path.join(d, n), put(os.path.join(d, n)))
for m in (matplotlib, pandas, fm):
    d = os.path.dirname(m.__file__)
    attempt(os.path.join(d, "__pycache__", "MARK.pyc"), put(os.path.join(d, "__pycache__", "MARK.pyc")))
    attempt(m.__file__, put(m.__file__, "\nMARK = 1\n"))
fontlists = []
for d in {matplotlib.get_configdir(), matplotlib.get_cachedir(), os.path.join(os.environ["HOME"], ".config", "matplotlib"),
          os.path.join(os.environ["HOME"], ".cache", "matplotlib")}:
    for n in os.listdir(d) if os.path.isdir(d) else []:
        if n.startswith("fontlist"):
            fontlists.append(os.path.join(d, n))
    attempt(os.path.join(d, "fontlist-MARK.json"), put(os.path.join(d, "fontlist-MARK.json"), "{}"))
    attempt(os.path.join(d, "matplotlibrc"), put(os.path.join(d, "matplotlibrc"), "backend: MARK\n"))
for p in fontlists:
    attempt(p, lambda p=p: open(p, "w").write(json.dumps({"_version": fm.FontManager.__version__, "MARK": 1, "ttflist": [], "afmlist": []})))
for p in (os.path.join(os.environ["HOME"], ".cache", "fontconfig", "MARK-le64.cache-9"), "/var/cache/fontconfig/MARK-le64.cache-9",
          "/etc/fonts/conf.d/99-MARK.conf", "/usr/share/fonts/MARK.ttf"):
    attempt(p, put(p, "MARK"))
for d in (os.environ["HOME"], os.environ["TMPDIR"], "/tmp", "/dev/shm", "/workspace", "/workspace/out"):
    attempt(os.path.join(d, "MARK"), put(os.path.join(d, "MARK"), "MARK"))
shm = libc.shmget(0x41524d4b, 4096, 0o1666)
writes["shm"] = "written" if shm >= 0 else os.strerror(ctypes.get_errno())
mq = libc.mq_open(b"/MARK", os.O_CREAT | os.O_RDWR, 0o666, None)
writes["mq"] = "written" if mq >= 0 else os.strerror(ctypes.get_errno())
fd = os.memfd_create("MARK")
os.write(fd, b"MARK")
os.environ["MARK"] = "1"
os.putenv("PYTHONSTARTUP", "/tmp/MARK")
signal.signal(signal.SIGTERM, lambda *a: None)
signal.signal(signal.SIGINT, signal.SIG_IGN)
plt.rcParams["font.family"] = "MARK"
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0MARK")
s.listen()
bg = subprocess.Popen([sys.executable, "-c", "import os, socket, time\nheld = b'x' * (192 << 20)\ns = socket.socket(socket.AF_UNIX)\ns.bind('\\0MARK-bg')\ns.listen()\ntime.sleep(120)", "MARK-bg"],
                      pass_fds=[fd], start_new_session=True)
for _ in range(500):
    try:
        socket.socket(socket.AF_UNIX).connect("\0MARK-bg")
        break
    except OSError:
        time.sleep(0.01)
print(json.dumps({"fontlists": fontlists, "writes": writes}), flush=True)
time.sleep(HOLD)
`

// tenantProbe is another tenant's call looking for anything of the plant, and rendering
// a figure with the preloaded matplotlib (whose font list the plant tried to empty).
const tenantProbe = `import ctypes, json, os, socket, sys
import matplotlib, matplotlib.font_manager as fm, matplotlib.pyplot as plt
libc = ctypes.CDLL(None, use_errno=True)
found = []
me = os.path.abspath(globals().get("__file__", "/nonexistent"))
for top in ("/env", os.environ["HOME"], os.environ["TMPDIR"], "/tmp", "/dev/shm", "/workspace",
            matplotlib.get_configdir(), matplotlib.get_cachedir(), os.path.dirname(matplotlib.__file__)):
    for root, dirs, files in os.walk(top):
        for n in files + dirs:
            p = os.path.join(root, n)
            if "MARK" in n:
                found.append(p)
            elif top not in ("/env", os.path.dirname(matplotlib.__file__)) and p != me and n in files and os.path.getsize(p) < 1 << 20:
                try:
                    if "MARK" in open(p, errors="replace").read():
                        found.append(p)
                except OSError:
                    pass
found += ["module " + m for m in sys.modules if "MARK" in m]
found += ["path " + p for p in sys.path if "MARK" in p]
found += ["env " + k for k, v in os.environ.items() if "MARK" in k + v]
if libc.shmget(0x41524d4b, 0, 0o666) >= 0:
    found.append("shm")
if libc.mq_open(b"/MARK", os.O_RDWR) >= 0:
    found.append("mq")
for name in ("\0MARK", "\0MARK-bg"):
    try:
        socket.socket(socket.AF_UNIX).connect(name)
        found.append("abstract socket " + name[1:])
    except OSError:
        pass
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) != os.getpid():
        try:
            if "MARK" in open("/proc/%s/cmdline" % p).read():
                found.append("process " + p)
        except OSError:
            pass
if matplotlib.get_backend() == "MARK" or plt.rcParams["font.family"] == ["MARK"] or not fm.fontManager.ttflist:
    found.append("matplotlib: backend %s, font %s, %d fonts" % (matplotlib.get_backend(), plt.rcParams["font.family"], len(fm.fontManager.ttflist)))
fig = plt.figure()
plt.plot([1, 2, 3], [3, 1, 2])
plt.title("tenant b")
fig.savefig("out/b.png")
print(json.dumps({"found": found, "pandas": "pandas" in sys.modules}))
`

// TestRealTenantsPooledEnvironment: two tenants (two MCP sessions) share one server and
// its warm pool of the data environment, whose sandboxes are prepared ahead with
// pandas and matplotlib.pyplot imported and handed to whichever call comes next. Tenant
// a's pooled call plants what it can (tenantPlant) and stays in flight; tenant b's
// pooled call beside it, and another after it has ended (a sandbox the pool prepared
// again meanwhile), find none of it, and render a figure with the fonts intact. Every
// write outside the call's own directories is refused. Then the same between two
// sessions in the environment: a's session keeps its plant across its own calls (the
// probe sees it there, so it can see at all), b's session and a pooled single-use call,
// in flight with it, see nothing, and after a's close_session returns no process of it
// is left.
func TestRealTenantsPooledEnvironment(t *testing.T) {
	f := environmentDeps(t)
	f.deps.Runner.Sessions = session.New(testSessionLimits, nil)
	t.Cleanup(f.deps.Runner.Sessions.Close)
	// The environment's own directories wide open to every host user, as in
	// TestEnvironmentReadOnly: only the read-only bind may stop the plant's writes there.
	err := filepath.WalkDir(filepath.Join(f.data, "lib"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		mode := fs.FileMode(0o666)
		if d.IsDir() {
			mode = 0o777
		}
		return os.Chmod(p, mode)
	})
	if err != nil {
		t.Fatal(err)
	}
	w := warmPool(t, f.deps)
	// Two of each ready: the plant and the probe in flight at once are both pooled.
	w.Warm(f.deps.Runner.Templates(), 2)
	waitReady(t, w, 2*len(f.deps.Runner.Templates()))
	cs := clients(t, f.deps, 2)
	a, b := cs[0], cs[1]
	marker := "airlock-mark-" + randomHex(t)
	mark := func(code string, hold int) string {
		return strings.ReplaceAll(strings.ReplaceAll(code, "HOLD", fmt.Sprint(hold)), "MARK", marker)
	}
	pooled := func(t *testing.T, c *client.Client, args map[string]any) (RunCodeResult, string, error) {
		// Every template's sandboxes: sessions in the environment take its pooled ones.
		waitReady(t, w, 2*len(f.deps.Runner.Templates()))
		hits := w.PoolStats().Hits
		out, txt, err := callCtx(c, args)
		if err == nil && w.PoolStats().Hits <= hits {
			err = fmt.Errorf("the call was not served from the pool: %+v", w.PoolStats())
		}
		return out, txt, err
	}
	probe := func(t *testing.T, who string, c *client.Client, args map[string]any) {
		t.Helper()
		args["code"] = mark(tenantProbe, 0)
		args["environment"] = "data"
		var out RunCodeResult
		var txt string
		var err error
		if args["session"] == nil {
			out, txt, err = pooled(t, c, args)
		} else {
			out, txt, err = callCtx(c, args)
		}
		if err != nil || out.Status != "ok" {
			t.Fatalf("%s: %v %s", who, err, txt)
		}
		var got struct {
			Found  []string
			Pandas bool
		}
		if err := json.Unmarshal([]byte(out.Stdout), &got); err != nil {
			t.Fatalf("%s: %v: %s", who, err, txt)
		}
		if len(got.Found) > 0 {
			t.Errorf("%s finds what tenant a planted: %v", who, got.Found)
		}
		if args["session"] == nil && !got.Pandas {
			t.Errorf("%s: pandas was not preloaded: not the environment's pooled sandbox", who)
		}
		figure := false
		for _, art := range out.Artifacts {
			figure = figure || art.Path == "b.png" && art.Size > 1000
		}
		if !figure {
			t.Errorf("%s: the figure did not come back: %+v", who, out.Artifacts)
		}
	}
	checkPlant := func(t *testing.T, who, stdout string) {
		t.Helper()
		line, _, _ := strings.Cut(stdout, "\n")
		var got struct {
			Fontlists []string
			Writes    map[string]string
		}
		if err := json.Unmarshal([]byte(line), &got); err != nil || len(got.Writes) < 20 || len(got.Fontlists) == 0 {
			t.Fatalf("%s: the plant did not run as meant (no font cache to poison?): %v %q", who, err, stdout)
		}
		own := []string{"/tmp/", "/dev/shm/", "/workspace/", "shm"}
		for p, r := range got.Writes {
			mine := false
			for _, o := range own {
				mine = mine || strings.HasPrefix(p, o) || p == o
			}
			if !mine && r == "written" {
				t.Errorf("%s wrote %s", who, p)
			}
		}
	}

	t.Run("Pooled", func(t *testing.T) {
		planted := make(chan error, 1)
		var plant RunCodeResult
		waitReady(t, w, 2*len(f.deps.Runner.Templates()))
		hits := w.PoolStats().Hits
		go func() {
			var err error
			plant, _, err = callCtx(a, map[string]any{"code": mark(tenantPlant, 8), "environment": "data", "timeout_seconds": 30})
			planted <- err
		}()
		waitTenantProc(t, marker+"-bg", planted)
		if w.PoolStats().Hits <= hits {
			t.Fatalf("tenant a's plant was not served from the pool: %+v", w.PoolStats())
		}
		probe(t, "tenant b's pooled call, in flight beside a's", b, map[string]any{})
		if err := <-planted; err != nil || plant.Status != "ok" {
			t.Fatalf("tenant a's plant: %v %+v", err, plant)
		}
		checkPlant(t, "tenant a's pooled call", plant.Stdout)
		probe(t, "tenant b's pooled call, after a's", b, map[string]any{})
	})

	t.Run("Sessions", func(t *testing.T) {
		// Only the daemon is run in the background: the session's call itself returns.
		out, txt, err := callCtx(a, map[string]any{"code": mark(tenantPlant, 0), "environment": "data", "session": "new"})
		if err != nil || out.Status != "ok" || out.SessionID == "" {
			t.Fatalf("tenant a's session: %v %s", err, txt)
		}
		checkPlant(t, "tenant a's session", out.Stdout)
		sa := out.SessionID
		// The probe sees the plant where it is (a's own session), or it proves nothing.
		self, txt, err := callCtx(a, map[string]any{"code": mark(tenantProbe, 0), "session": sa})
		if err != nil || self.Status != "ok" || !strings.Contains(self.Stdout, "abstract socket "+marker+"-bg") ||
			!strings.Contains(self.Stdout, "fontlist-"+marker) || !strings.Contains(self.Stdout, `"shm"`) {
			t.Fatalf("tenant a's session does not see its own plant: %v %s", err, txt)
		}
		out, txt, err = callCtx(b, map[string]any{"code": "print(1)", "environment": "data", "session": "new"})
		if err != nil || out.SessionID == "" {
			t.Fatalf("tenant b's session: %v %s", err, txt)
		}
		sb := out.SessionID
		probe(t, "tenant b's session, open beside a's", b, map[string]any{"session": sb})
		probe(t, "tenant b's pooled call, beside a's session", b, map[string]any{})
		// b names a's session: the answer an id that never existed gets.
		for _, args := range []map[string]any{{"code": "print(1)", "session": sa}, {"code": "print(1)", "session": sa, "close_session": true}} {
			r, err := b.CallTool(context.Background(), toolRequest(args))
			if err != nil || !r.IsError || !strings.Contains(text(r), "unknown session") {
				t.Errorf("tenant b calling a's session %v: %v %s", args, err, text(r))
			}
		}
		out, txt, err = callCtx(a, map[string]any{"code": "print(2)", "session": sa, "close_session": true})
		if err != nil || out.Stdout != "2\n" || !out.SessionClosed {
			t.Fatalf("tenant a's close: %v %s", err, txt)
		}
		// The close has been answered: no code of a's session may run any more (its
		// daemon ran on for 0.14-0.26 s after the answer, before the runner waited).
		if left := hostProcs(marker); len(left) > 0 {
			t.Errorf("tenant a's session still runs processes %v once its close is answered", left)
		}
		probe(t, "tenant b's session, after a's closed", b, map[string]any{"session": sb})
	})
}

func toolRequest(args map[string]any) mcp.CallToolRequest {
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_code"
	req.Params.Arguments = args
	return req
}

// callCtx is call for any goroutine: run_code's structured result, its text, and an
// error for a protocol error.
func callCtx(c *client.Client, args map[string]any) (RunCodeResult, string, error) {
	r, err := c.CallTool(context.Background(), toolRequest(args))
	if err != nil {
		return RunCodeResult{}, "", err
	}
	var out RunCodeResult
	raw, _ := json.Marshal(r.StructuredContent)
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, text(r), fmt.Errorf("structuredContent: %w", err)
	}
	return out, text(r), nil
}

// hostProcs are the host's processes whose command line holds marker.
func hostProcs(marker string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.Contains(string(b), marker) {
			out = append(out, e.Name())
		}
	}
	return out
}

// waitTenantProc waits until a process carrying marker runs on the host, failing if
// the call that should start it ends first.
func waitTenantProc(t *testing.T, marker string, ended <-chan error) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); len(hostProcs(marker)) == 0; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-ended:
			t.Fatalf("the plant ended before it was in flight: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the plant never got in flight")
		}
	}
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
