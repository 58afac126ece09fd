package darwin

import (
	"context"
	"fmt"
	"github.com/airlock-mcp/airlock/internal/sandboxtest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/sandbox/linux"
)

// The test binary is its own sandbox spawner and init here too (see sandbox/linux's
// TestMain): the parity test below runs the Linux walker in a real sandbox.
func TestMain(m *testing.M) {
	if sandbox.Init() {
		return
	}
	os.Exit(m.Run())
}

// treeScript leaves, in out/ of its working directory, one of everything the artifact
// rules decide about: returned files, a hard link, a symlink, a FIFO, files over the
// size and total caps, a directory past the depth bound, and more entries than are
// listed.
const treeScript = `
import os
os.makedirs("out/zz_many", exist_ok=True)
open("out/a.txt", "w").write("a" * 10)
open("out/big.bin", "w").write("b" * 2000)
open("out/t1.bin", "w").write("t" * 900)
open("out/t2.bin", "w").write("t" * 900)
open("out/t3.bin", "w").write("t" * 900)
open("out/h.txt", "w").write("h" * 10)
os.link("out/h.txt", "out/hard")
os.symlink("a.txt", "out/link")
os.mkfifo("out/fifo")
deep = "out/" + "/".join("d%d" % i for i in range(1, 11))
os.makedirs(deep)
open(deep + "/f", "w").write("f")
open("out/d1/d2/near", "w").write("n")
for i in range(300):
    open("out/zz_many/f%03d" % i, "w").write("m")
`

// The Linux walker (C, in the sandbox's init) and this package's give the same list,
// entry for entry, with the same reasons, for the same tree: the rules are one
// (sandbox/artifacts.go), whichever OS ran the program.
func TestArtifactWalkersAgree(t *testing.T) {
	python, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		t.Skipf("SKIPPING: no /usr/bin/python3 to build the tree with: %v", err)
	}
	lim := sandbox.ArtifactLimits{MaxFiles: 5, MaxFileBytes: 1000, MaxTotal: 2000}

	sb, err := linux.New(sandbox.Options{})
	sandboxtest.Require(t, err)
	defer sb.Close()
	res, err := sb.Run(context.Background(), sandbox.Spec{Argv: []string{python, "-I", "-S", "-c", treeScript},
		OutDir: "out", Artifacts: lim, Limits: sandbox.SelfTestLimits()})
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("sandbox run: %v %s %s", err, res.Status, res.Stderr.Head)
	}

	ws, err := newWorkspace(t.TempDir(), sandbox.Spec{OutDir: "out"})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.remove(nil)
	cmd := exec.Command(python, "-I", "-S", "-c", treeScript)
	cmd.Dir = ws.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the tree on the host: %v %s", err, out)
	}
	local, err := ws.artifacts("out", lim)
	if err != nil {
		t.Fatal(err)
	}

	show := func(arts []sandbox.Artifact) string {
		var b strings.Builder
		for _, a := range arts {
			fmt.Fprintf(&b, "%s size=%d sha=%.8s data=%d skipped=%q\n", a.Path, a.Size, a.SHA256, len(a.Data), a.Skipped)
		}
		return b.String()
	}
	linuxList, darwinList := show(res.Artifacts), show(local)
	if linuxList != darwinList {
		t.Errorf("the walkers disagree:\nlinux:\n%s\ndarwin's:\n%s", linuxList, darwinList)
	}
	// The tree has what it is meant to have, so the agreement means something.
	for _, want := range []string{"a.txt size=10", `hard size=10 sha= data=0 skipped="hard link"`, `link size=0 sha= data=0 skipped="symlink"`,
		`fifo size=0 sha= data=0 skipped="not a regular file"`, `big.bin size=2000 sha= data=0 skipped="file too large"`,
		`t3.bin size=900 sha= data=0 skipped="total size cap reached"`, `skipped="directory too deep"`,
		`skipped="too many files"`, `... size=0 sha= data=0 skipped="`} {
		if !strings.Contains(linuxList, want) {
			t.Errorf("the list lacks %q:\n%s", want, linuxList)
		}
	}
}
