package linux

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

var sessionArtLimits = sandbox.ArtifactLimits{MaxFiles: 3, MaxFileBytes: 100, MaxTotal: 150}

// listing is an artifact list without the data, for comparing two walks.
func listing(arts []sandbox.Artifact) string {
	var b strings.Builder
	for _, a := range arts {
		fmt.Fprintf(&b, "%s size=%d sha=%s skipped=%q\n", a.Path, a.Size, a.SHA256, a.Skipped)
	}
	return b.String()
}

// Each call of a session returns what is in out/ when it ends, with its sha256: call 1
// its file, call 2 its own list.
func TestSessionArtifactsPerCall(t *testing.T) {
	spec := sessionSpec(t, "python")
	spec.OutDir, spec.Artifacts = "out", sessionArtLimits
	ss := openSession(t, spec)
	res := call(t, ss, "open('out/a.txt', 'w').write('hello')")
	sum := sha256.Sum256([]byte("hello"))
	if len(res.Artifacts) != 1 || res.Artifacts[0].Path != "a.txt" || string(res.Artifacts[0].Data) != "hello" ||
		res.Artifacts[0].SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("call 1's artifacts:\n%s", listing(res.Artifacts))
	}
	res = call(t, ss, "import os; os.remove('out/a.txt'); os.makedirs('out/d'); open('out/d/b.txt', 'w').write('bye')")
	if got := listing(res.Artifacts); len(res.Artifacts) != 1 || res.Artifacts[0].Path != "d/b.txt" || string(res.Artifacts[0].Data) != "bye" {
		t.Fatalf("call 2's artifacts:\n%s", got)
	}
	if res = call(t, ss, "import shutil; shutil.rmtree('out/d')"); len(res.Artifacts) != 0 {
		t.Fatalf("call 3 emptied out/, got:\n%s", listing(res.Artifacts))
	}
}

// The caps and skip reasons of a session's artifacts are a single-use call's: the same
// program's out/ gives the same list from the init's C walker (single use) and from the
// server's walk of the session's workspace.
func TestSessionArtifactsMatchSingleUse(t *testing.T) {
	code := `import os
os.makedirs('out/deep/1/2/3/4/5/6/7/8', exist_ok=True)
for i in range(5): open('out/f%d' % i, 'w').write('x' * (10 * i))
open('out/big', 'w').write('y' * 101)
open('out/orig', 'w').write('o')
os.link('out/orig', 'out/hard')
os.symlink('/etc/shadow', 'out/shadow')
os.symlink('../main.py', 'out/rel')
os.mkfifo('out/fifo')
`
	s := testSandbox(t)
	res := singleUseArtifacts(t, s, code)
	want := listing(res.Artifacts)
	for _, reason := range []string{"too many files", "file too large", "symlink", "hard link", "not a regular file", "directory too deep"} {
		if !strings.Contains(want, reason) {
			t.Fatalf("the single-use list has no %q entry:\n%s", reason, want)
		}
	}
	spec := sessionSpec(t, "python")
	spec.OutDir, spec.Artifacts = "out", sessionArtLimits
	ss := openSession(t, spec)
	got := call(t, ss, code)
	if got.Status != sandbox.StatusOK {
		t.Fatalf("session: %s", brief(got))
	}
	if listing(got.Artifacts) != want {
		t.Fatalf("a session's artifacts differ from a single-use call's:\nsession:\n%s\nsingle use:\n%s", listing(got.Artifacts), want)
	}
}

// The session's code plants symlinks to host files in out/ (absolute ones, through
// /proc/1/root and the server's /proc, relative ones climbing out) and, from a
// background process, swaps out/ itself for such symlinks again and again while the
// server walks it after each call: nothing of the host comes back.
func TestSessionArtifactsHostileLinks(t *testing.T) {
	secretDir := t.TempDir()
	secret := "host-secret-" + randHex(8)
	if err := os.WriteFile(filepath.Join(secretDir, "secret.txt"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	server := fmt.Sprintf("/proc/%d/root", os.Getpid())
	targets := []string{"/etc/shadow", "/etc", "/proc/1/root/etc/shadow", "/proc/1/root" + secretDir,
		secretDir, secretDir + "/secret.txt", server + secretDir, server + "/etc/shadow",
		"../../../../../../../.." + secretDir, "../../../../../../../../etc", "/proc/self/root/etc"}
	spec := sessionSpec(t, "python")
	spec.OutDir, spec.Artifacts = "out", sandbox.ArtifactLimits{MaxFiles: 64, MaxFileBytes: 1 << 20, MaxTotal: 4 << 20}
	ss := openSession(t, spec)
	plant := fmt.Sprintf(`import os, subprocess
targets = %s
for i, t in enumerate(targets):
    os.symlink(t, 'out/link%%d' %% i)
open('out/mine.txt', 'w').write('mine')
swapper = '''
import os, time
targets = %s
end = time.time() + 20
i = 0
while time.time() < end:
    t = targets[i %% len(targets)]; i += 1
    try:
        os.rename('out', 'out.real')
        os.symlink(t, 'out')
        os.remove('out')
        os.rename('out.real', 'out')
    except OSError:
        pass
'''
subprocess.Popen(['/usr/bin/python3', '-c', swapper], start_new_session=True)
`, pyList(targets), pyList(targets))
	wantOut(t, call(t, ss, plant), sandbox.StatusOK, "")
	mine, walks := 0, 200
	for i := 0; i < walks; i++ {
		res := call(t, ss, "pass")
		for _, a := range res.Artifacts {
			data := string(a.Data)
			if strings.Contains(data, secret) || strings.Contains(data, "root:") || a.Path == "secret.txt" ||
				strings.HasPrefix(a.Path, "link") && a.Skipped != "symlink" {
				t.Fatalf("call %d returned a host file: %+v", i, a)
			}
			if a.Path == "mine.txt" && data == "mine" {
				mine++
			}
		}
	}
	if mine == 0 {
		t.Fatal("no walk saw the session's own out/mine.txt: the walks did not run")
	}
	t.Logf("%d of %d walks found out/ in place (the others raced the swapper)", mine, walks)
}

// Two sessions with calls in flight at once: one plants symlinks to the other's output
// files through the host's /proc (the path the server itself reads them by), and gets
// none of them back, while the other gets its own.
func TestSessionArtifactsOtherSession(t *testing.T) {
	spec := sessionSpec(t, "python")
	spec.OutDir, spec.Artifacts = "out", sessionArtLimits
	victim, thief := openSession(t, spec), openSession(t, spec)
	secret := "victim-secret-" + randHex(8)
	wantOut(t, call(t, victim, fmt.Sprintf("open('out/secret.txt', 'w').write(%q)", secret)), sandbox.StatusOK, "")
	vws := fmt.Sprintf("/proc/%d/root/workspace", victim.(*session).init)
	targets := []string{vws + "/out/secret.txt", vws + "/out", vws, "/proc/self/root" + vws}
	plant := fmt.Sprintf(`import os
for i, t in enumerate(%s):
    os.symlink(t, 'out/l%%d' %% i)
os.symlink(%q, 'o2')`, pyList(targets), vws+"/out")
	wantOut(t, call(t, thief, plant), sandbox.StatusOK, "")
	// out/ and o2 (a symlink to the victim's out/) trade places at each call.
	swap := "import os; os.rename('out', 'o3'); os.rename('o2', 'out'); os.rename('o3', 'o2')"
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := 0; i < 10; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if res, err := victim.Call(context.Background(), sandbox.SessionCall{Code: []byte("pass"), Limits: filled(sandbox.Limits{Wall: 10 * time.Second})}); err != nil ||
				len(res.Artifacts) != 1 || string(res.Artifacts[0].Data) != secret {
				errs <- fmt.Sprintf("the victim's own call: %v\n%s", err, listing(res.Artifacts))
			}
		}()
		go func() {
			defer wg.Done()
			res, err := thief.Call(context.Background(), sandbox.SessionCall{Code: []byte(swap), Limits: filled(sandbox.Limits{Wall: 10 * time.Second})})
			if err != nil {
				errs <- err.Error()
				return
			}
			for _, a := range res.Artifacts {
				if strings.Contains(string(a.Data), secret) || a.Path == "secret.txt" || a.Skipped != "symlink" {
					errs <- fmt.Sprintf("the thief got %+v", a)
				}
			}
		}()
		wg.Wait()
	}
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func pyList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// BenchmarkSessionCallArtifacts is BenchmarkSessionCall with an output directory holding
// one small file, which each call walks and returns: the cost of a session's artifacts.
func BenchmarkSessionCallArtifacts(b *testing.B) {
	s := benchSandbox(b)
	if err := s.sessionUnavailable(); err != nil {
		b.Skip(err)
	}
	spec := sessionSpec(b, "python")
	spec.OutDir, spec.Artifacts = "out", sessionArtLimits
	ss, err := s.OpenSession(context.Background(), withDefaults(spec))
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Close()
	lim := filled(sandbox.Limits{Wall: 10 * time.Second})
	if _, err := ss.Call(context.Background(), sandbox.SessionCall{Code: []byte("open('out/a.txt', 'w').write('x')"), Limits: lim}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := ss.Call(context.Background(), sandbox.SessionCall{Code: []byte("print(1)"), Limits: lim})
		if err != nil || res.Status != sandbox.StatusOK || len(res.Artifacts) != 1 {
			b.Fatalf("%v %s (%d artifacts)", err, brief(res), len(res.Artifacts))
		}
	}
}

// A program fills out/ with more entries than a walk reads (sandbox.MaxArtifactWalk),
// in two directories and beside them: the server's walk of a session's workspace stops at
// the same entry as the init's walk of a single-use call's, and both lists say they were
// cut. Two sessions do it at once. Before the walk had a budget, the server read every
// entry (the workspace holds 65,534), and the closing entry counted them all as if
// listed in order.
func TestSessionArtifactsCutMatchesSingleUse(t *testing.T) {
	code := `import os
for d in ('a', 'b'):
    os.makedirs('out/' + d, exist_ok=True)
    for i in range(3000): open('out/%s/%s%05d' % (d, 'n' * 200, i), 'w').close()
open('out/z', 'w').write('z')
`
	s := testSandbox(t)
	res := singleUseArtifacts(t, s, code)
	want := listing(res.Artifacts)
	last := res.Artifacts[len(res.Artifacts)-1]
	// Every entry read is listed or counted but the two directories.
	if len(res.Artifacts) != sandbox.MaxArtifactEntries+1 || last.Skipped != sandbox.CutArtifact(sandbox.MaxArtifactWalk-sandbox.MaxArtifactEntries-2).Skipped {
		t.Fatalf("the single-use list is not cut at the walk's budget: %d entries, last %+v", len(res.Artifacts), last)
	}
	var wg sync.WaitGroup
	for range 2 {
		spec := sessionSpec(t, "python")
		spec.OutDir, spec.Artifacts = "out", sessionArtLimits
		ss := openSession(t, spec)
		wg.Go(func() {
			got, err := ss.Call(context.Background(), sandbox.SessionCall{Code: []byte(code), Limits: filled(sandbox.Limits{Wall: 20 * time.Second})})
			if err != nil || got.Status != sandbox.StatusOK {
				t.Errorf("session: %v %s", err, brief(got))
			} else if listing(got.Artifacts) != want {
				t.Errorf("a session's cut list differs from a single-use call's:\nsession:\n%s\nsingle use:\n%s", listing(got.Artifacts), want)
			}
		})
	}
	wg.Wait()
}

// singleUseArtifacts runs code as a single-use call with the session tests' artifact
// limits, the listing a session's call is compared with.
func singleUseArtifacts(t *testing.T, s *Sandbox, code string) sandbox.Result {
	t.Helper()
	single := pySpec(code, newMarker())
	single.OutDir, single.Artifacts = "out", sessionArtLimits
	res, err := s.Run(context.Background(), withDefaults(single))
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("single use: %v %s", err, brief(res))
	}
	return res
}
