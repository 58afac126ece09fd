//go:build unix

package darwin

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock-mcp/airlock/sandbox"
)

func TestWorkspaceFill(t *testing.T) {
	spec := sandbox.Spec{
		CodeFile: "main.py", Code: []byte("print(1)"), OutDir: "out",
		Files: []sandbox.File{{Path: "data/in.csv", Data: []byte("a,b"), Mode: 0o600}},
	}
	ws, err := newWorkspace(t.TempDir(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.remove(nil)
	if b, err := os.ReadFile(filepath.Join(ws.dir, "main.py")); err != nil || string(b) != "print(1)" {
		t.Errorf("code file: %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(ws.dir, "data", "in.csv")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("input file: %v, %v", fi, err)
	}
	for _, d := range []string{ws.tmp, filepath.Join(ws.dir, "out")} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			t.Errorf("%s: %v", d, err)
		}
	}
	if real, _ := filepath.EvalSymlinks(ws.dir); real != ws.dir {
		t.Errorf("workspace %q is not canonical (%q)", ws.dir, real)
	}
}

func TestWorkspaceRejectsEscapes(t *testing.T) {
	for _, name := range []string{"../x", "/etc/passwd", "a/../../x", "", "a//b", "./a"} {
		parent := t.TempDir()
		_, err := newWorkspace(parent, sandbox.Spec{Files: []sandbox.File{{Path: name}}})
		if !errors.Is(err, sandbox.ErrInvalidSpec) {
			t.Errorf("%q: err = %v, want ErrInvalidSpec", name, err)
		}
		if left, _ := os.ReadDir(parent); len(left) != 0 {
			t.Errorf("%q: a refused workspace was left behind", name)
		}
	}
	// Two files with the same name: the second must not overwrite the first (O_EXCL).
	_, err := newWorkspace(t.TempDir(), sandbox.Spec{CodeFile: "main.py", Files: []sandbox.File{{Path: "main.py", Data: []byte("evil")}}})
	if err == nil {
		t.Error("a file over the code file was accepted")
	}
}

func TestArtifacts(t *testing.T) {
	ws, err := newWorkspace(t.TempDir(), sandbox.Spec{OutDir: "out"})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.remove(nil)
	out := filepath.Join(ws.dir, "out")
	secret := filepath.Join(t.TempDir(), "secret")
	must(t, os.WriteFile(secret, []byte("host secret"), 0o600))
	must(t, os.WriteFile(filepath.Join(out, "plot.png"), []byte("png"), 0o644))
	must(t, os.MkdirAll(filepath.Join(out, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(out, "sub", "big.bin"), []byte(strings.Repeat("x", 100)), 0o644))
	must(t, os.Symlink(secret, filepath.Join(out, "link")))
	must(t, os.Link(secret, filepath.Join(out, "hard")))
	must(t, syscall.Mkfifo(filepath.Join(out, "fifo"), 0o644))

	arts, err := ws.artifacts("out", sandbox.ArtifactLimits{MaxFiles: 10, MaxFileBytes: 50, MaxTotal: 1000})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]sandbox.Artifact{}
	for _, a := range arts {
		got[a.Path] = a
		if strings.Contains(string(a.Data), "host secret") {
			t.Errorf("%s: host file content returned", a.Path)
		}
	}
	if a := got["plot.png"]; string(a.Data) != "png" || a.Skipped != "" || len(a.SHA256) != 64 {
		t.Errorf("plot.png = %+v", a)
	}
	for name, reason := range map[string]string{"sub/big.bin": "file too large", "link": "symlink", "hard": "hard link", "fifo": "not a regular file"} {
		if a, ok := got[name]; !ok || a.Skipped != reason || a.Data != nil {
			t.Errorf("%s = %+v, want skipped %q", name, a, reason)
		}
	}

	// The output dir replaced by a symlink to a host directory yields nothing.
	must(t, os.RemoveAll(out))
	must(t, os.Symlink(filepath.Dir(secret), out))
	arts, err = ws.artifacts("out", sandbox.ArtifactLimits{})
	if err != nil || len(arts) != 0 {
		t.Errorf("symlinked out dir: %+v, %v", arts, err)
	}
}

func TestArtifactCaps(t *testing.T) {
	ws, err := newWorkspace(t.TempDir(), sandbox.Spec{OutDir: "out"})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.remove(nil)
	for _, n := range []string{"a", "b", "c", "d"} {
		must(t, os.WriteFile(filepath.Join(ws.dir, "out", n), []byte("0123456789"), 0o644))
	}
	arts, err := ws.artifacts("out", sandbox.ArtifactLimits{MaxFiles: 3, MaxFileBytes: 10, MaxTotal: 25})
	if err != nil {
		t.Fatal(err)
	}
	var kept, total int
	for _, a := range arts {
		if a.Data != nil {
			kept++
			total += len(a.Data)
		}
	}
	// The reasons are the ones every OS gives (sandbox/artifacts.go): c and d would both
	// take the total past 25.
	if kept != 2 || total > 25 || len(arts) != 4 || arts[2].Skipped != "total size cap reached" || arts[3].Skipped != "total size cap reached" {
		t.Errorf("caps not applied: %+v", arts)
	}
	arts, err = ws.artifacts("out", sandbox.ArtifactLimits{MaxFiles: 1, MaxFileBytes: 10, MaxTotal: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(arts) != 4 || arts[0].Data == nil || arts[1].Skipped != "too many files" || arts[3].Skipped != "too many files" {
		t.Errorf("max_files not applied: %+v", arts)
	}
}

func TestWorkspaceRemoveUnwritable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores directory permissions, so this cannot fail as root")
	}
	ws, err := newWorkspace(t.TempDir(), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	locked := filepath.Join(ws.dir, "locked")
	must(t, os.MkdirAll(filepath.Join(locked, "inner"), 0o755))
	must(t, os.Chmod(locked, 0o500))
	// Filled, then made unlistable (0300) or unenterable (0).
	for _, mode := range []os.FileMode{0o300, 0} {
		d := filepath.Join(ws.dir, mode.String())
		must(t, os.MkdirAll(filepath.Join(d, "inner"), 0o755))
		must(t, os.WriteFile(filepath.Join(d, "inner", "f"), []byte("x"), 0o600))
		must(t, os.Chmod(d, mode))
	}
	if err := ws.remove(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(ws.dir); !os.IsNotExist(err) {
		t.Errorf("workspace still there: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The usual macOS TMPDIR is too deep for Python's multiprocessing sockets; the short
// private parent is not.
func TestWorkspaceFits(t *testing.T) {
	if workspaceFits("/private/var/folders/zz/zyxvpxvq6csfxvn_n0000000000000/T") {
		t.Error("a workspace under /var/folders/…/T leaves room for Manager's socket path")
	}
	if !workspaceFits("/private/tmp/airlock-501") {
		t.Error("a workspace under /private/tmp/airlock-501 is too deep")
	}
}

func TestPrivateDir(t *testing.T) {
	root := t.TempDir()
	uid := os.Getuid()
	ok := filepath.Join(root, "ok")
	if err := privateDir(ok, uid); err != nil {
		t.Fatalf("fresh dir: %v", err)
	}
	if err := privateDir(ok, uid); err != nil {
		t.Fatalf("existing private dir: %v", err)
	}
	if fi, _ := os.Stat(ok); fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v", fi.Mode().Perm())
	}
	// Made first by someone else: a symlink, a loose mode, another owner.
	link := filepath.Join(root, "link")
	must(t, os.Symlink(ok, link))
	loose := filepath.Join(root, "loose")
	must(t, os.Mkdir(loose, 0o700))
	must(t, os.Chmod(loose, 0o777))
	for _, dir := range []string{link, loose} {
		if err := privateDir(dir, uid); err == nil {
			t.Errorf("%s accepted", dir)
		}
	}
	if err := privateDir(ok, uid+1); err == nil {
		t.Error("a directory of another uid accepted")
	}
}
