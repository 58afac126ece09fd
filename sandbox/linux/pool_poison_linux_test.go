package linux

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/sandbox"
)

// poisonPlant is a pooled run that tries to leave something for the runs after it, of
// any tenant: matplotlib's font cache (its fontlist names the fonts every later plot
// loads) rewritten in MPLCONFIGDIR and in HOME's default config dir, fontconfig's user
// cache, files in every writable directory, a .pth and a sitecustomize in each of
// python's import directories (imported at every interpreter start), and bytecode
// beside matplotlib's own modules. Then it stays in flight while the next run probes.
const poisonPlant = `import json, os, sys, time
os.environ["MPLCONFIGDIR"] = os.path.join(os.environ["TMPDIR"], "matplotlib")
out = {"fontlist": None}
try:
    import matplotlib, matplotlib.font_manager as fm
except ImportError:
    matplotlib = None
for d in () if matplotlib is None else (os.environ["MPLCONFIGDIR"], os.path.join(os.environ["HOME"], ".config", "matplotlib")):
    os.makedirs(d, exist_ok=True)
    for n in os.listdir(os.environ["MPLCONFIGDIR"]):
        if n.startswith("fontlist"):
            out["fontlist"] = n
            open(os.path.join(d, n), "w").write(json.dumps({"_version": fm.FontManager.__version__, "MARK": 1, "ttflist": [], "afmlist": []}))
    open(os.path.join(d, "matplotlibrc"), "w").write("backend: MARK\n")
writable = [os.environ["HOME"], os.environ["TMPDIR"], "/dev/shm", os.path.join(os.environ["HOME"], ".cache", "fontconfig")]
for d in writable:
    try:
        os.makedirs(d, exist_ok=True)
        open(os.path.join(d, "MARK"), "w").write("MARK")
    except OSError as e:
        pass
refused = {}
targets = [os.path.join(p, "MARK.pth") for p in sys.path if p.startswith("/usr")]
targets += [os.path.join(p, "sitecustomize.py") for p in sys.path if p.startswith("/usr")]
if matplotlib is not None:
    targets += [os.path.join(os.path.dirname(matplotlib.__file__), "__pycache__", "MARK.pyc"),
                os.path.join(os.path.dirname(matplotlib.__file__), "MARK.py")]
targets += ["/usr/lib/python3/dist-packages/MARK.py",
            "/usr/local/lib/python3.11/dist-packages/MARK.pth", "/var/cache/fontconfig/MARK"]
for p in targets:
    try:
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "a") as f:
            f.write("import os; open('/dev/null').write('MARK')\n")
        refused[p] = "written"
    except OSError as e:
        refused[p] = e.__class__.__name__
print(json.dumps({"fontlist": out["fontlist"], "writes": refused}), flush=True)
os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(8)", "MARK-held"])
`

// poisonProbe is a later pooled run looking for anything of the plant.
const poisonProbe = `import json, os, sys
os.environ["MPLCONFIGDIR"] = os.path.join(os.environ["TMPDIR"], "matplotlib")
found = []
for d in (os.environ["HOME"], os.environ["TMPDIR"], "/dev/shm"):
    for root, dirs, files in os.walk(d):
        for n in files:
            p = os.path.join(root, n)
            if p == os.path.abspath(__file__):
                continue  # this probe's own code names the marker
            try:
                if "MARK" in n or "MARK" in open(p, errors="replace").read():
                    found.append(p)
            except OSError:
                pass
found += [m for m in sys.modules if "MARK" in m]
found += [p for p in sys.path if "MARK" in p]
try:
    import matplotlib, matplotlib.font_manager as fm
except ImportError:
    matplotlib = None
if matplotlib is not None and (matplotlib.get_backend() == "MARK" or not fm.fontManager.ttflist):
    found.append("matplotlib: backend %s, %d fonts" % (matplotlib.get_backend(), len(fm.fontManager.ttflist)))
print(json.dumps(found))
`

// TestPooledRunsPoisonNothing: a warm pool's sandboxes are prepared ahead and handed to
// whichever tenant calls next, each to exactly one call. One pooled run plants what it
// can (poisonPlant) and stays in flight; a second pooled run at the same time and a
// third after it has ended find none of it, and every write outside the run's own
// directories was refused.
func TestPooledRunsPoisonNothing(t *testing.T) {
	recordTier(t)
	py := poolLanguages(t)["python"]
	warm := testSandbox(t)
	limits := sandbox.Limits{Wall: 30 * time.Second, Memory: 512 << 20, Pids: 32, Output: 1 << 20}
	warm.Warm([]sandbox.Spec{withDefaults(py.Spec(nil, nil, limits, policy.BoundByRlimit))}, 2)
	t.Cleanup(func() { warm.Close() })
	marker := newMarker()
	pooled := func(code string) sandbox.Result {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for warm.PoolStats().Ready < 1 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		hits := warm.PoolStats().Hits
		spec := py.Spec([]byte(strings.ReplaceAll(code, "MARK", marker)), nil, limits, policy.BoundByRlimit)
		res, err := warm.Run(context.Background(), withDefaults(spec))
		if err != nil {
			t.Fatal(err)
		}
		if warm.PoolStats().Hits <= hits {
			t.Fatalf("the run was not served from the pool: %+v", warm.PoolStats())
		}
		return res
	}
	// The host's python is the sandbox's: without matplotlib here (a container image
	// without it) its caches cannot be attacked, and the test says so.
	mpl := exec.Command(python, "-c", "import matplotlib").Run() == nil
	if !mpl {
		t.Log("MATPLOTLIB IS NOT INSTALLED HERE: ITS FONT CACHE AND CONFIG ARE NOT ATTACKED (the other plants are)")
	}
	var plant sandbox.Result
	planted := make(chan struct{})
	go func() {
		defer close(planted)
		plant = pooled(poisonPlant)
	}()
	for deadline := time.Now().Add(25 * time.Second); len(hostProcsWith(marker+"-held")) == 0; time.Sleep(10 * time.Millisecond) {
		select {
		case <-planted:
			t.Fatalf("the plant ended before it was in flight: %s", brief(plant))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the plant never got in flight")
		}
	}
	probe := func(who string) {
		t.Helper()
		res := pooled(poisonProbe)
		var found []string
		if err := json.Unmarshal(res.Stdout.Bytes(), &found); res.Status != sandbox.StatusOK || err != nil {
			t.Fatalf("%s: %v %s", who, err, brief(res))
		}
		if len(found) > 0 {
			t.Errorf("%s finds what an earlier pooled run planted: %v", who, found)
		}
	}
	probe("a pooled run in flight beside the plant")
	<-planted
	out, _, _ := strings.Cut(string(plant.Stdout.Bytes()), "\n")
	var got struct {
		Fontlist string
		Writes   map[string]string
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Writes) == 0 || mpl && got.Fontlist == "" {
		t.Fatalf("the plant did not run as meant (matplotlib here %v, no font cache to poison?): %v %s", mpl, err, brief(plant))
	}
	for p, r := range got.Writes {
		if r == "written" {
			t.Errorf("a pooled run wrote %s", p)
		}
	}
	probe("a pooled run after the plant")
}
