package tools

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"image"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/airlock-mcp/airlock/sandbox"
)

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func artifactByPath(out RunCodeResult, p string) (Artifact, bool) {
	for _, a := range out.Artifacts {
		if a.Path == p {
			return a, true
		}
	}
	return Artifact{}, false
}

// resources maps the URIs of a result's embedded resources to their contents.
func resources(r *mcp.CallToolResult) map[string]mcp.ResourceContents {
	m := map[string]mcp.ResourceContents{}
	for _, c := range r.Content {
		if e, ok := c.(mcp.EmbeddedResource); ok {
			switch rc := e.Resource.(type) {
			case mcp.TextResourceContents:
				m[rc.URI] = rc
			case mcp.BlobResourceContents:
				m[rc.URI] = rc
			}
		}
	}
	return m
}

func TestRealFilesIn(t *testing.T) {
	c := startClient(t, realDeps(t))
	bin := make([]byte, 4096)
	for i := range bin {
		bin[i] = byte(i)
	}
	text := "héllo\r\n\tworld\x1b[0m ✓\n"
	files := []map[string]any{
		{"path": "data/deep/er/notes.txt", "content": text},
		{"path": "bytes.bin", "content": base64.StdEncoding.EncodeToString(bin), "encoding": "base64"},
		{"path": "empty", "content": ""},
	}
	code := `import hashlib, json, os
paths = ["data/deep/er/notes.txt", "bytes.bin", "empty"]
print(json.dumps({p: [hashlib.sha256(open(p, "rb").read()).hexdigest(), os.stat(p).st_size] for p in paths}))`
	r := call(t, c, "run_code", map[string]any{"code": code, "files": files})
	out := structured(t, r)
	if r.IsError {
		t.Fatalf("%s", textOf(r))
	}
	if out.Isolation != testTier() {
		t.Errorf("the result states isolation %q, want %q", out.Isolation, testTier())
	}
	var got map[string][2]any
	if err := json.Unmarshal([]byte(out.Stdout), &got); err != nil {
		t.Fatalf("stdout %q: %v", out.Stdout, err)
	}
	for p, want := range map[string][]byte{"data/deep/er/notes.txt": []byte(text), "bytes.bin": bin, "empty": nil} {
		if got[p][0] != sha(want) || got[p][1] != float64(len(want)) {
			t.Errorf("%s: program saw sha256 %v size %v, want %s %d", p, got[p][0], got[p][1], sha(want), len(want))
		}
	}
}

func textOf(r *mcp.CallToolResult) string { return text(r) }

func TestRealFilesRefused(t *testing.T) {
	d := realDeps(t)
	c := startClient(t, d)
	big := strings.Repeat("x", int(d.Runner.FileCaps.MaxFileBytes)+1)
	tests := []struct {
		name  string
		files []map[string]any
		want  []string
	}{
		{"dotdot", []map[string]any{{"path": "a/../../etc/x", "content": "x"}}, []string{`files[0] "a/../../etc/x"`, ".. component"}},
		{"absolute", []map[string]any{{"path": "/etc/cron.d/x", "content": "x"}}, []string{`files[0] "/etc/cron.d/x"`, "absolute"}},
		{"nul", []map[string]any{{"path": "a\x00b", "content": "x"}}, []string{"NUL"}},
		{"over-long", []map[string]any{{"path": strings.Repeat("d/", 200) + "f", "content": "x"}}, []string{"path is 401 bytes, the limit is 256"}},
		{"duplicate", []map[string]any{{"path": "A.txt", "content": "1"}, {"path": "a.txt", "content": "2"}}, []string{`files[1] "a.txt"`, "same path as files[0]"}},
		{"bad base64", []map[string]any{{"path": "x.bin", "content": "not base64!", "encoding": "base64"}}, []string{`files[0] "x.bin"`, "bad base64"}},
		{"too big", []map[string]any{{"path": "big.txt", "content": big}}, []string{`files[0] "big.txt"`, "the limit is 1048576"}},
		{"output dir", []map[string]any{{"path": "out", "content": "x"}}, []string{`files[0] "out"`, "output directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, c, "run_code", map[string]any{"code": "print('ran')", "files": tt.files})
			if !r.IsError || strings.Contains(textOf(r), "ran") {
				t.Fatalf("not refused: %s", textOf(r))
			}
			for _, w := range tt.want {
				if !strings.Contains(textOf(r), w) {
					t.Errorf("error %q lacks %q", textOf(r), w)
				}
			}
		})
	}
}

// TestRealFilesWorkspaceLimit checks the up-front refusal against a small workspace, and
// that what is accepted really fits: the program can still write next to the inputs.
func TestRealFilesWorkspaceLimit(t *testing.T) {
	d := realDeps(t)
	const ws = 4 << 20
	d.Runner.Bounds.Default.Workspace, d.Runner.Bounds.Max.Workspace = ws, ws
	d.Runner.FileCaps.MaxFileBytes, d.Runner.FileCaps.MaxTotalBytes = 8<<20, 8<<20
	c := startClient(t, d)
	code := "open('more.bin', 'wb').write(b'x' * 65536)\nprint('wrote')"
	fill := func(n int) []map[string]any {
		return []map[string]any{{"path": "fill.bin", "content": base64.StdEncoding.EncodeToString(make([]byte, n)), "encoding": "base64"}}
	}
	fits := ws - int(workspaceMarginFor(ws)) - len(code)
	r := call(t, c, "run_code", map[string]any{"code": code, "files": fill(fits)})
	if out := structured(t, r); r.IsError || out.Stdout != "wrote\n" {
		t.Fatalf("%d bytes of input in a %d-byte workspace: %s", fits, ws, textOf(r))
	}
	r = call(t, c, "run_code", map[string]any{"code": code, "files": fill(fits + 1)})
	if !r.IsError || !strings.Contains(textOf(r), "must stay free for the program") {
		t.Fatalf("one byte more was not refused: %s", textOf(r))
	}
}

// workspaceMarginFor mirrors the runner's margin, which is unexported there.
func workspaceMarginFor(ws int64) int64 { return min(1<<20, ws/4) }

func TestRealArtifactsOut(t *testing.T) {
	c := startClient(t, realDeps(t))
	code := `import os
os.makedirs("out/sub", exist_ok=True)
open("out/report.txt", "w").write("total: 42\n\x1b[31mred\x1b[0m\n")
open("out/sub/data.bin", "wb").write(bytes(range(256)))
open(os.environ["HOME"] + "/out/abs.json", "w").write('{"ok": true}')`
	r := call(t, c, "run_code", map[string]any{"code": code})
	out := structured(t, r)
	if r.IsError {
		t.Fatalf("%s", textOf(r))
	}
	res := resources(r)
	report, ok := res["airlock://run/"+out.ID+"/out/report.txt"].(mcp.TextResourceContents)
	if !ok || report.Text != "total: 42\nred\n" || report.MIMEType != "text/plain" {
		t.Errorf("report.txt = %#v (want sanitized text)", report)
	}
	if a, _ := artifactByPath(out, "report.txt"); a.SHA256 != sha([]byte("total: 42\n\x1b[31mred\x1b[0m\n")) {
		t.Errorf("report.txt hash %s is not the written file's", a.SHA256)
	}
	blob, ok := res["airlock://run/"+out.ID+"/out/sub/data.bin"].(mcp.BlobResourceContents)
	want := make([]byte, 256)
	for i := range want {
		want[i] = byte(i)
	}
	if got, _ := base64.StdEncoding.DecodeString(blob.Blob); !ok || !bytes.Equal(got, want) {
		t.Errorf("sub/data.bin = %#v", blob)
	}
	if a, ok := artifactByPath(out, "abs.json"); !ok || !a.Returned || a.MIMEType != "application/json" {
		t.Errorf("abs.json (written by absolute path) = %+v", a)
	}
}

// TestRealArtifactEscapes tries to make the server read outside the output directory
// through it. Nothing may be followed; each entry is listed as skipped.
func TestRealArtifactEscapes(t *testing.T) {
	c := startClient(t, realDeps(t))
	code := `import os
os.symlink("/etc/passwd", "out/passwd")
os.symlink("../", "out/up")
os.symlink("/proc/self/root", "out/root")
os.symlink("/proc/1/environ", "out/environ")
open("secret.txt", "w").write("workspace secret\n")
os.link("secret.txt", "out/hard")
os.link("main.py", "out/code")
os.mkfifo("out/fifo")
os.makedirs("out/d")
os.symlink("/etc", "out/d/etc")
print("planted")`
	start := time.Now()
	r := call(t, c, "run_code", map[string]any{"code": code})
	out := structured(t, r)
	if r.IsError || out.Stdout != "planted\n" {
		t.Fatalf("%s", textOf(r))
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("took %v: a FIFO must not block collection", time.Since(start))
	}
	want := map[string]string{"passwd": "symlink", "up": "symlink", "root": "symlink", "environ": "symlink",
		"hard": "hard link", "code": "hard link", "fifo": "not a regular file", "d/etc": "symlink"}
	for p, why := range want {
		a, ok := artifactByPath(out, p)
		if !ok || a.Returned || a.Skipped != why {
			t.Errorf("%s = %+v (found %t), want skipped: %s", p, a, ok, why)
		}
	}
	b, _ := json.Marshal(r)
	for _, leak := range []string{"root:x:0:0", "workspace secret", "cm9vdDp4OjA6", "d29ya3NwYWNlIHNlY3JldA"} {
		if bytes.Contains(b, []byte(leak)) {
			t.Errorf("the result contains %q", leak)
		}
	}
	if len(r.Content) != 1 {
		t.Errorf("content has %d items, want only the text", len(r.Content))
	}
}

func TestRealOutDirReplacedBySymlink(t *testing.T) {
	c := startClient(t, realDeps(t))
	for name, code := range map[string]string{
		"to root":      "import os, shutil\nshutil.rmtree('out')\nos.symlink('/', 'out')\nprint('done')",
		"to workspace": "import os, shutil\nopen('x.txt','w').write('x')\nshutil.rmtree('out')\nos.symlink('.', 'out')\nprint('done')",
		"removed":      "import shutil\nshutil.rmtree('out')\nprint('done')",
		"a file":       "import shutil\nshutil.rmtree('out')\nopen('out', 'w').write('root:x:0:0')\nprint('done')",
	} {
		t.Run(name, func(t *testing.T) {
			r := call(t, c, "run_code", map[string]any{"code": code})
			out := structured(t, r)
			if r.IsError || out.Status != "ok" || out.Stdout != "done\n" {
				t.Fatalf("%s", textOf(r))
			}
			if len(out.Artifacts) != 0 || len(r.Content) != 1 {
				t.Errorf("artifacts %+v, %d content items", out.Artifacts, len(r.Content))
			}
		})
	}
}

func TestRealArtifactCaps(t *testing.T) {
	d := realDeps(t)
	d.Runner.Artifacts = sandbox.ArtifactLimits{MaxFiles: 5, MaxFileBytes: 1 << 20, MaxTotal: 3 << 20}
	c := startClient(t, d)
	t.Run("oversized", func(t *testing.T) {
		code := "open('out/big.bin','wb').write(b'\\1' * (1024*1024+1))\nopen('out/ok.txt','w').write('fine')"
		r := call(t, c, "run_code", map[string]any{"code": code})
		out := structured(t, r)
		big, ok := artifactByPath(out, "big.bin")
		if !ok || big.Returned || big.Skipped != "file too large" || big.Size != 1<<20+1 {
			t.Errorf("big.bin = %+v", big)
		}
		if small, _ := artifactByPath(out, "ok.txt"); !small.Returned {
			t.Errorf("ok.txt = %+v", small)
		}
		if !strings.Contains(textOf(r), `"big.bin" (1048577 bytes, not returned: file too large)`) {
			t.Errorf("text: %s", textOf(r))
		}
	})
	t.Run("many small", func(t *testing.T) {
		code := "for i in range(40):\n    open('out/f%02d.txt' % i, 'w').write(str(i))"
		r := call(t, c, "run_code", map[string]any{"code": code})
		out := structured(t, r)
		returned, skipped := 0, 0
		for _, a := range out.Artifacts {
			switch {
			case a.Returned:
				returned++
			case a.Skipped == "too many files":
				skipped++
			}
		}
		if len(out.Artifacts) != 40 || returned != 5 || skipped != 35 || len(resources(r)) != 5 {
			t.Errorf("%d listed, %d returned, %d skipped, %d resources", len(out.Artifacts), returned, skipped, len(resources(r)))
		}
	})
	t.Run("total", func(t *testing.T) {
		code := "for i in range(4):\n    open('out/p%d.bin' % i, 'wb').write(b'\\0' * (1024*1024))"
		r := call(t, c, "run_code", map[string]any{"code": code})
		out := structured(t, r)
		if a, _ := artifactByPath(out, "p3.bin"); a.Returned || a.Skipped != "total size cap reached" {
			t.Errorf("p3.bin = %+v; artifacts %+v", a, out.Artifacts)
		}
	})
	// Text JSON escapes six times over ('<' is \u003c): within the caps it would make
	// the result six times the total cap. The result costs at most the cap as base64.
	t.Run("escaped text", func(t *testing.T) {
		code := "for i in range(3):\n    open('out/lt%d.txt' % i, 'w').write('<' * (1024*1024))"
		r := call(t, c, "run_code", map[string]any{"code": code})
		out := structured(t, r)
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if limit := d.Runner.Artifacts.MaxTotal*4/3 + 64<<10; int64(len(b)) > limit {
			t.Errorf("the result is %d bytes of JSON, more than the cap as base64 and 64 KiB (%d)", len(b), limit)
		}
		if a, _ := artifactByPath(out, "lt0.txt"); a.Returned || !strings.HasPrefix(a.Skipped, "total size cap reached") {
			t.Errorf("lt0.txt = %+v; artifacts %+v", a, out.Artifacts)
		}
	})
}

// TestRealPlotExample runs examples/plot.py, a pure-python PNG writer, and decodes the
// image the client receives.
func TestRealPlotExample(t *testing.T) {
	code, err := os.ReadFile("../examples/plot.py")
	if err != nil {
		t.Fatal(err)
	}
	c := startClient(t, realDeps(t))
	r := call(t, c, "run_code", map[string]any{"code": string(code)})
	if r.IsError {
		t.Fatalf("%s", textOf(r))
	}
	var imgs []mcp.ImageContent
	for _, ct := range r.Content {
		if img, ok := ct.(mcp.ImageContent); ok {
			imgs = append(imgs, img)
		}
	}
	if len(imgs) != 1 || imgs[0].MIMEType != "image/png" {
		t.Fatalf("images: %d (%s)", len(imgs), textOf(r))
	}
	raw, err := base64.StdEncoding.DecodeString(imgs[0].Data)
	if err != nil {
		t.Fatal(err)
	}
	img, format, err := image.Decode(bytes.NewReader(raw))
	if err != nil || format != "png" || img.Bounds().Dx() != 320 || img.Bounds().Dy() != 200 {
		t.Fatalf("decode: %v %s %v", err, format, img.Bounds())
	}
	// A blank canvas would decode too: the sine's colour must be on the curve.
	if r, g, b, _ := img.At(80, 10).RGBA(); r>>8 != 31 || g>>8 != 119 || b>>8 != 180 {
		t.Errorf("pixel (80,10) = %d,%d,%d, want the sine's colour", r>>8, g>>8, b>>8)
	}
	out := structured(t, r)
	csv, ok := resources(r)["airlock://run/"+out.ID+"/out/samples.csv"].(mcp.TextResourceContents)
	if !ok || csv.MIMEType != "text/csv" || !strings.HasPrefix(csv.Text, "t,sin,cos\n0.0000,0.0000,1.0000\n") {
		t.Errorf("samples.csv = %#v", csv)
	}
}

// TestRealArtifactThroughput measures returning a 1 MiB random artifact end to end.
func TestRealArtifactThroughput(t *testing.T) {
	c := startClient(t, realDeps(t))
	data := make([]byte, 1<<20)
	_, _ = rand.Read(data)
	in := []map[string]any{{"path": "in.bin", "content": base64.StdEncoding.EncodeToString(data), "encoding": "base64"}}
	base := call(t, c, "run_code", map[string]any{"code": "pass", "files": in})
	if base.IsError {
		t.Fatalf("%s", textOf(base))
	}
	t0 := time.Now()
	_ = call(t, c, "run_code", map[string]any{"code": "pass", "files": in})
	without := time.Since(t0)
	t0 = time.Now()
	r := call(t, c, "run_code", map[string]any{"code": "import shutil\nshutil.copy('in.bin', 'out/copy.bin')", "files": in})
	with := time.Since(t0)
	out := structured(t, r)
	if a, _ := artifactByPath(out, "copy.bin"); !a.Returned || a.SHA256 != sha(data) {
		t.Fatalf("copy.bin = %+v", a)
	}
	b, _ := json.Marshal(r)
	t.Logf("1 MiB in and back out: %v (same call without the artifact: %v); result %d bytes", with, without, len(b))
}
