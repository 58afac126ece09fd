package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	_ "image/png"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/airlock-mcp/airlock/internal/sandboxtest"
	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/probe"
	"github.com/airlock-mcp/airlock/sandbox"
)

// The environments these tests build, the way an operator would: venvs made by the
// system python (one with the system's site packages, which hold Debian's numpy, pandas
// and matplotlib, plus a small package of its own), a venv whose preload list cannot
// import, a path that does not exist, and a node_modules directory.
const localPkgVersion = "0.1.0"

// requireHostModules skips (loudly; failing in CI) when the system python lacks the
// libraries the data environment is built on. CI installs them from Debian.
func requireHostModules(t *testing.T, mods ...string) {
	t.Helper()
	code := "import " + strings.Join(mods, ", ")
	if out, err := exec.Command("/usr/bin/python3", "-c", code).CombinedOutput(); err != nil {
		sandboxtest.SkipOrFail(t, "environment test: /usr/bin/python3 cannot %s: %v: %s (CI installs python3-numpy python3-pandas python3-matplotlib python3-venv)", code, err, out)
	}
}

// makeVenv makes a venv at dir from Debian's python3, with extra options of venv's
// (--system-site-packages, --copies), and returns its site-packages.
func makeVenv(t *testing.T, dir string, extra ...string) string {
	t.Helper()
	args := append([]string{"-m", "venv", "--without-pip"}, extra...)
	if out, err := exec.Command("/usr/bin/python3", append(args, dir)...).CombinedOutput(); err != nil {
		sandboxtest.SkipOrFail(t, "environment test: python3 -m venv: %v: %s (apt install python3-venv)", err, out)
	}
	site, _ := filepath.Glob(filepath.Join(dir, "lib", "python3*", "site-packages"))
	if len(site) != 1 {
		t.Fatalf("venv %s: site-packages %v", dir, site)
	}
	return site[0]
}

func writeFiles(t *testing.T, files map[string]string) {
	t.Helper()
	for p, content := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// nodePackage is the npm package of the node environment: CI installs one from the npm
// registry (AIRLOCK_TEST_NODE_ENV, AIRLOCK_TEST_NODE_PACKAGE); elsewhere the test writes
// a package of the same shape itself.
func nodeEnv(t *testing.T, root string) (dir, pkg string) {
	if d := os.Getenv("AIRLOCK_TEST_NODE_ENV"); d != "" {
		pkg = os.Getenv("AIRLOCK_TEST_NODE_PACKAGE")
		if pkg == "" {
			pkg = "is-number"
		}
		return d, pkg
	}
	dir = filepath.Join(root, "node")
	writeFiles(t, map[string]string{
		filepath.Join(dir, "node_modules/is-number/package.json"): `{"name": "is-number", "version": "7.0.0", "main": "index.js"}`,
		filepath.Join(dir, "node_modules/is-number/index.js"):     "module.exports = n => typeof n === 'number' && isFinite(n);\n",
	})
	return dir, "is-number"
}

type envFixture struct {
	deps    Deps
	nodePkg string
	data    string // host path of the data environment
}

func environmentDeps(t *testing.T) envFixture {
	t.Helper()
	requireHostModules(t, "numpy", "pandas", "matplotlib")
	d := realDeps(t)
	// Not under /tmp, which environments cannot be bound from (policy says why).
	root, err := os.MkdirTemp("/var/tmp", "airlock-env-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	// The sandbox runs as an unprivileged host user, which must be able to read them.
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(root, "data")
	site := makeVenv(t, data, "--system-site-packages")
	writeFiles(t, map[string]string{
		filepath.Join(site, "airlock_localpkg/__init__.py"): "VALUE = 42\n",
		filepath.Join(site, "airlock_localpkg-"+localPkgVersion+".dist-info/METADATA"): "Metadata-Version: 2.1\nName: airlock-localpkg\nVersion: " +
			localPkgVersion + "\n\nA package only the data environment has.\n",
		filepath.Join(site, "airlock_localpkg-"+localPkgVersion+".dist-info/top_level.txt"): "airlock_localpkg\n",
	})
	makeVenv(t, filepath.Join(root, "bare"))
	makeVenv(t, filepath.Join(root, "broken"))
	nodeDir, pkg := nodeEnv(t, root)

	cfgs := []policy.EnvironmentConfig{
		{Name: "bare", Language: "python", Path: filepath.Join(root, "bare"), Default: true},
		{Name: "broken", Language: "python", Path: filepath.Join(root, "broken"), Preload: []string{"airlock_not_installed"}},
		{Name: "data", Language: "python", Path: data, Preload: []string{"numpy", "pandas", "matplotlib.pyplot"}},
		{Name: "gone", Language: "python", Path: filepath.Join(root, "does-not-exist")},
		{Name: "node", Language: "javascript", Path: nodeDir, Preload: []string{pkg}},
	}
	reg, err := policy.Detect([]string{"python", "javascript"})
	if err != nil {
		t.Fatal(err)
	}
	var envs []policy.Environment
	for _, c := range cfgs {
		lang, _ := reg.Lookup(c.Language)
		envs = append(envs, policy.InspectEnvironment(c, lang))
	}
	d.Runner.Languages = reg
	d.Runner.Environments = policy.NewEnvironments(envs...)
	d.Runner.CheckEnvironments(context.Background())
	return envFixture{deps: d, nodePkg: pkg, data: data}
}

// TestRealEnvironments drives every environment feature through MCP against one set of
// environments, checked at startup once. The pooled cases come last: they start the pool.
func TestRealEnvironments(t *testing.T) {
	f := environmentDeps(t)
	t.Run("Config", func(t *testing.T) { testEnvironmentConfig(t, f) })
	t.Run("CSVPlot", func(t *testing.T) { testEnvironmentCSVPlot(t, f) })
	t.Run("LocalPackage", func(t *testing.T) { testEnvironmentLocalPackage(t, f) })
	t.Run("Node", func(t *testing.T) { testEnvironmentNode(t, f) })
	t.Run("Broken", func(t *testing.T) { testEnvironmentBroken(t, f) })
	t.Run("Show", func(t *testing.T) { testEnvironmentShow(t, f) })
	t.Run("Pooled", func(t *testing.T) { testEnvironmentPooled(t, f) })
}

func images(t *testing.T, r *mcp.CallToolResult) []image.Image {
	t.Helper()
	var out []image.Image
	for _, c := range r.Content {
		img, ok := c.(mcp.ImageContent)
		if !ok {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(img.Data)
		if err != nil {
			t.Fatal(err)
		}
		m, format, err := image.Decode(bytes.NewReader(raw))
		if err != nil || format != "png" || img.MIMEType != "image/png" {
			t.Fatalf("image %s: %v (%s)", img.MIMEType, err, format)
		}
		out = append(out, m)
	}
	return out
}

func sizes(imgs []image.Image) []string {
	var out []string
	for _, m := range imgs {
		out = append(out, strings.Join([]string{itoa(m.Bounds().Dx()), itoa(m.Bounds().Dy())}, "x"))
	}
	return out
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// testEnvironmentCSVPlot: a CSV sent as an input file, read with pandas, plotted
// with matplotlib and saved to out/: one PNG of the figure's size comes back.
func testEnvironmentCSVPlot(t *testing.T, f envFixture) {
	c := startClient(t, f.deps)
	code := `import pandas as pd
import matplotlib.pyplot as plt
df = pd.read_csv("data/points.csv")
print(int(df["y"].sum()))
fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
ax.plot(df["x"], df["y"])
fig.savefig("out/plot.png")
plt.close(fig)
`
	r := call(t, c, "run_code", map[string]any{"code": code, "environment": "data",
		"files": []map[string]any{{"path": "data/points.csv", "content": "x,y\n1,2\n2,4\n3,9\n"}}})
	out := structured(t, r)
	if r.IsError || strings.TrimSpace(out.Stdout) != "15" || out.Environment != "data" {
		t.Fatalf("%s", text(r))
	}
	if got := sizes(images(t, r)); !slices.Equal(got, []string{"400x300"}) {
		t.Fatalf("images %v, want one 400x300 PNG: %s", got, text(r))
	}
}

// testEnvironmentShow: plt.show() and a figure left open at exit both come back as
// PNG images, cold and from the warm pool alike.
func testEnvironmentShow(t *testing.T, f envFixture) {
	code := `import sys
print("preloaded" if "matplotlib.pyplot" in sys.modules else "cold")
import matplotlib.pyplot as plt
plt.figure(figsize=(3, 2), dpi=100)
plt.plot([1, 3, 2])
plt.show()
plt.figure(figsize=(1.6, 1.2), dpi=100)
plt.bar([1, 2], [3, 4])
`
	check := func(c interface {
		CallTool(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error)
	}, want string) {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name = "run_code"
		req.Params.Arguments = map[string]any{"code": code, "environment": "data"}
		r, err := c.CallTool(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		out := structured(t, r)
		if r.IsError || strings.TrimSpace(out.Stdout) != want {
			t.Fatalf("want %s: %s", want, text(r))
		}
		if got := sizes(images(t, r)); !slices.Equal(got, []string{"300x200", "160x120"}) {
			t.Fatalf("%s: images %v, want 300x200 (show) and 160x120 (left open): %s", want, got, text(r))
		}
		var paths []string
		for _, a := range out.Artifacts {
			paths = append(paths, a.Path)
		}
		if !slices.Equal(paths, []string{"figure-1.png", "figure-2.png"}) {
			t.Errorf("artifacts %v", paths)
		}
	}
	c := startClient(t, f.deps)
	check(c, "cold")
	w := warmPool(t, f.deps)
	check(c, "preloaded")
	if st := w.PoolStats(); st.Hits == 0 {
		t.Errorf("pool stats %+v: the call was not served from the pool", st)
	}
}

// warmPool starts the sandbox's pool from the runner's templates and waits until every
// template has a sandbox ready.
func warmPool(t *testing.T, d Deps) sandbox.Warmer {
	t.Helper()
	w, ok := d.Runner.Sandbox.(sandbox.Warmer)
	if !ok {
		t.Fatal("the sandbox has no warm pool")
	}
	tmpls := d.Runner.Templates()
	w.Warm(tmpls, 1)
	t.Cleanup(func() { w.Warm(nil, 0) })
	waitReady(t, w, len(tmpls))
	return w
}

// waitReady waits until n sandboxes are ready (a preloaded one takes a second or two).
func waitReady(t *testing.T, w sandbox.Warmer, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for w.PoolStats().Ready < n {
		if time.Now().After(deadline) {
			t.Fatalf("pool not ready: %+v, want %d ready", w.PoolStats(), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testEnvironmentPooled: in a pooled sandbox of a preloaded environment, the preload
// list is imported before the call, and what a program leaves to the interpreter's
// shutdown happens as in a cold run (the pooled one skips tearing down the preload).
func testEnvironmentPooled(t *testing.T, f envFixture) {
	c := startClient(t, f.deps)
	exit := func(want string) map[string]int64 {
		t.Helper()
		code := `import atexit, sys, threading, time, helper
print("preloaded" if "pandas" in sys.modules else "cold")
left_open = open("out/left-open.txt", "w")
left_open.write("buffered " * 1000)
class Last:
    def __del__(self, open=open):
        open("out/del.txt", "w").write("__del__ ran")
last = Last()
def late():
    time.sleep(0.2)
    open("out/thread.txt", "w").write("thread joined")
threading.Thread(target=late).start()
atexit.register(lambda: open("out/atexit.txt", "w").write("atexit ran"))
helper.keep("out/helper.txt")
raise SystemExit(3)
`
		files := []map[string]any{{"path": "helper.py", "content": "def keep(p):\n    global f\n    f = open(p, 'w')\n    f.write('helper ' * 1000)\n"}}
		r := call(t, c, "run_code", map[string]any{"code": code, "environment": "data", "files": files})
		out := structured(t, r)
		if out.ExitCode != 3 || strings.TrimSpace(out.Stdout) != want || out.Stderr != "" {
			t.Fatalf("want %s, exit 3: %s", want, text(r))
		}
		got := map[string]int64{}
		for _, a := range out.Artifacts {
			got[a.Path] = a.Size
		}
		return got
	}
	cold := exit("cold")
	want := map[string]int64{"left-open.txt": 9000, "del.txt": 11, "thread.txt": 13, "atexit.txt": 10, "helper.txt": 7000}
	if !maps.Equal(cold, want) {
		t.Fatalf("cold run left %v, want %v", cold, want)
	}

	w := warmPool(t, f.deps)
	before := w.PoolStats().Hits
	code := "import sys\nprint(all(m in sys.modules for m in ('numpy', 'pandas', 'matplotlib.pyplot')))\nimport pandas, matplotlib.pyplot\nprint(1)"
	r := call(t, c, "run_code", map[string]any{"code": code, "environment": "data"})
	if out := structured(t, r); r.IsError || out.Stdout != "True\n1\n" {
		t.Fatalf("%s", text(r))
	}
	if w.PoolStats().Hits != before+1 {
		t.Errorf("pool hits %d → %d, want one more", before, w.PoolStats().Hits)
	}
	waitReady(t, w, len(f.deps.Runner.Templates()))
	if pooled := exit("preloaded"); !maps.Equal(pooled, cold) {
		t.Errorf("pooled run left %v, the cold one %v", pooled, cold)
	}
}

// testEnvironmentLocalPackage: the data environment's own package imports there
// only; elsewhere the failure names the environment that has it.
func testEnvironmentLocalPackage(t *testing.T, f envFixture) {
	c := startClient(t, f.deps)
	code := "import airlock_localpkg\nprint(airlock_localpkg.VALUE)"
	r := call(t, c, "run_code", map[string]any{"code": code, "environment": "data"})
	if out := structured(t, r); r.IsError || strings.TrimSpace(out.Stdout) != "42" {
		t.Fatalf("data: %s", text(r))
	}
	hint := `environments that provide it: data (airlock-localpkg ` + localPkgVersion + `)`
	for _, env := range []string{"bare", ""} { // "" is the default environment, bare
		args := map[string]any{"code": code}
		if env != "" {
			args["environment"] = env
		}
		r := call(t, c, "run_code", args)
		out := structured(t, r)
		if !r.IsError || out.Status != "error" || out.Environment != "bare" ||
			!strings.Contains(out.Detail, `module "airlock_localpkg" is not installed in environment bare`) || !strings.Contains(out.Detail, hint) {
			t.Errorf("environment %q: %+v\n%s", env, out, text(r))
		}
		if !strings.Contains(out.Stderr, "ModuleNotFoundError") {
			t.Errorf("environment %q: stderr %q", env, out.Stderr)
		}
	}
	// A module no environment has: the hint says how an operator adds one.
	r = call(t, c, "run_code", map[string]any{"code": "import airlock_nowhere", "environment": "data"})
	if out := structured(t, r); !strings.Contains(out.Detail, `no environment of this server provides it`) ||
		!strings.Contains(out.Detail, "docs/environments.md") {
		t.Errorf("nowhere: %q", out.Detail)
	}
}

// testEnvironmentNode: a node_modules directory serves require() in its
// environment only.
func testEnvironmentNode(t *testing.T, f envFixture) {
	if _, err := f.deps.Runner.Languages.Lookup("javascript"); err != nil {
		t.Skipf("SKIPPING: no node: %v", err)
	}
	c := startClient(t, f.deps)
	code := "const m = require(" + strings.Join([]string{`"`, f.nodePkg, `"`}, "") + ");\nconsole.log(typeof m, m(5));"
	r := call(t, c, "run_code", map[string]any{"code": code, "environment": "node"})
	if out := structured(t, r); r.IsError || strings.TrimSpace(out.Stdout) != "function true" || out.Language != "javascript" {
		t.Fatalf("node: %s", text(r))
	}
	r = call(t, c, "run_code", map[string]any{"code": code, "language": "javascript"})
	if out := structured(t, r); !r.IsError || !strings.Contains(out.Detail, "environments that provide it: node ("+f.nodePkg) {
		t.Errorf("without the environment: %+v", out)
	}
	// The environment decides the language; naming another is refused.
	r = call(t, c, "run_code", map[string]any{"code": code, "language": "python", "environment": "node"})
	if !r.IsError || !strings.Contains(text(r), "environment node is javascript") {
		t.Errorf("mismatch: %s", text(r))
	}
}

// testEnvironmentBroken: an environment that fails its startup check, or whose
// path is missing, is reported and not offered; the others serve.
func testEnvironmentBroken(t *testing.T, f envFixture) {
	byName := map[string]policy.Environment{}
	for _, e := range f.deps.Runner.Environments.All() {
		byName[e.Name] = e
	}
	if e := byName["broken"]; e.Usable || !strings.Contains(e.Problem, "airlock_not_installed") {
		t.Errorf("broken: usable %t, problem %q", e.Usable, e.Problem)
	}
	if e := byName["gone"]; e.Usable || !strings.Contains(e.Problem, "no such file") {
		t.Errorf("gone: usable %t, problem %q", e.Usable, e.Problem)
	}
	for _, n := range []string{"bare", "data"} {
		if !byName[n].Usable {
			t.Errorf("%s not usable: %s", n, byName[n].Problem)
		}
	}
	c := startClient(t, f.deps)
	tools, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name != "run_code" {
			continue
		}
		var schema struct {
			InputSchema struct {
				Properties map[string]struct {
					Enum []string `json:"enum"`
				} `json:"properties"`
			} `json:"inputSchema"`
		}
		raw, _ := json.Marshal(tool)
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatal(err)
		}
		enum := schema.InputSchema.Properties["environment"].Enum
		slices.Sort(enum)
		want := []string{"bare", "data"}
		if _, err := f.deps.Runner.Languages.Lookup("javascript"); err == nil {
			want = append(want, "node")
		}
		if !slices.Equal(enum, want) {
			t.Errorf("environment enum %v, want %v", enum, want)
		}
		if !strings.Contains(tool.Description, "pandas ") || !strings.Contains(tool.Description, "airlock-localpkg "+localPkgVersion) ||
			strings.Contains(tool.Description, "broken") {
			t.Errorf("description:\n%s", tool.Description)
		}
	}
	r := call(t, c, "run_code", map[string]any{"code": "print(1)", "environment": "broken"})
	if !r.IsError || !strings.Contains(text(r), `environment "broken" is not available`) {
		t.Errorf("broken environment used: %s", text(r))
	}
	rep, err := probe.NewSuite(f.deps.Runner).Run(context.Background(), probe.Filter{Probes: []string{"read-shadow"}})
	if err != nil {
		t.Fatal(err)
	}
	var unusable []string
	for _, e := range rep.Environments {
		if !e.Usable {
			unusable = append(unusable, e.Name)
		}
	}
	if !slices.Equal(unusable, []string{"broken", "gone"}) || !strings.Contains(strings.Join(rep.Fixes, "\n"), "environment broken is not offered") {
		t.Errorf("probe environments %+v, fixes %v", rep.Environments, rep.Fixes)
	}
}

// testEnvironmentConfig: get_config lists each environment with its interpreter,
// version and packages, read from their metadata.
func testEnvironmentConfig(t *testing.T, f envFixture) {
	c := startClient(t, f.deps)
	r := call(t, c, "get_config", map[string]any{})
	b, _ := json.Marshal(r.StructuredContent)
	var v ConfigView
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	want, err := exec.Command("/usr/bin/python3", "-c", "import pandas, platform; print(pandas.__version__, platform.python_version())").Output()
	if err != nil {
		t.Fatal(err)
	}
	wantPandas, wantPython, _ := strings.Cut(strings.TrimSpace(string(want)), " ")
	for _, e := range v.Environments {
		if e.Name != "data" {
			continue
		}
		if e.Interpreter != sandbox.EnvironmentDir+"/bin/python3" || e.Version != wantPython || !e.SystemSitePackages || e.Path != f.data {
			t.Errorf("data: %+v", e)
		}
		got := map[string]policy.Package{}
		for _, p := range e.Packages {
			got[p.Name] = p
		}
		if p := got["pandas"]; p.Version != wantPandas || !p.System {
			t.Errorf("pandas: %+v, want %s from the system", p, wantPandas)
		}
		if p := got["airlock-localpkg"]; p.Version != localPkgVersion || p.System {
			t.Errorf("airlock-localpkg: %+v", p)
		}
		return
	}
	t.Fatalf("no data environment in %s", text(r))
}
