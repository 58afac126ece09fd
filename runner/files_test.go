package runner

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/airlock-mcp/airlock/policy"
	"github.com/airlock-mcp/airlock/runner/runnertest"
	"github.com/airlock-mcp/airlock/sandbox"
)

func TestRunPassesFilesAndOutDir(t *testing.T) {
	var got sandbox.Spec
	r, _ := newRunner(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
		got = s
		return runnertest.Echo(ctx, s)
	}, &bytes.Buffer{})
	r.OutDir = "out"
	r.Artifacts = sandbox.ArtifactLimits{MaxFiles: 3, MaxFileBytes: 10, MaxTotal: 20}
	bin := []byte{0, 1, 2, 0xff}
	_, err := r.Run(context.Background(), Call{Language: "python", Code: []byte("x"), Files: []policy.FileInput{
		{Path: "data/in.txt", Content: "héllo\n"},
		{Path: "blob.bin", Content: base64.StdEncoding.EncodeToString(bin), Encoding: "base64"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Files) != 2 || got.Files[0].Path != "data/in.txt" || string(got.Files[0].Data) != "héllo\n" ||
		got.Files[1].Path != "blob.bin" || !bytes.Equal(got.Files[1].Data, bin) {
		t.Errorf("files = %+v", got.Files)
	}
	if got.OutDir != "out" || got.Artifacts != r.Artifacts {
		t.Errorf("out dir %q, artifacts %+v", got.OutDir, got.Artifacts)
	}
}

func TestRunArtifactsOff(t *testing.T) {
	for _, tt := range []struct {
		name string
		dir  string
		max  int
	}{{"no dir", "", 5}, {"zero files", "out", 0}} {
		t.Run(tt.name, func(t *testing.T) {
			var got sandbox.Spec
			r, _ := newRunner(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
				got = s
				return runnertest.Echo(ctx, s)
			}, &bytes.Buffer{})
			// The backends read a zero cap as "no cap", so zero files must mean no
			// output directory at all, never an unbounded one.
			r.OutDir, r.Artifacts = tt.dir, sandbox.ArtifactLimits{MaxFiles: tt.max, MaxFileBytes: 1, MaxTotal: 1}
			if _, err := r.Run(context.Background(), Call{Language: "python", Code: []byte("x")}); err != nil {
				t.Fatal(err)
			}
			if got.OutDir != "" || got.Artifacts != (sandbox.ArtifactLimits{}) {
				t.Errorf("out dir %q, artifacts %+v", got.OutDir, got.Artifacts)
			}
		})
	}
}

func TestRunRefusesBadFiles(t *testing.T) {
	big := strings.Repeat("x", 600)
	tests := []struct {
		name   string
		files  []policy.FileInput
		want   []string
		outDir string
	}{
		{"dotdot", []policy.FileInput{{Path: "../etc/passwd", Content: "x"}}, []string{`files[0] "../etc/passwd"`, ".."}, ""},
		{"absolute", []policy.FileInput{{Path: "/etc/passwd", Content: "x"}}, []string{"absolute"}, ""},
		{"nul", []policy.FileInput{{Path: "a\x00b", Content: "x"}}, []string{"NUL"}, ""},
		{"long", []policy.FileInput{{Path: strings.Repeat("a/", 200) + "f", Content: "x"}}, []string{"the limit is"}, ""},
		{"duplicate", []policy.FileInput{{Path: "a.txt"}, {Path: "./a.txt"}}, []string{`files[1] "a.txt"`, "same path as files[0]"}, ""},
		{"bad base64", []policy.FileInput{{Path: "b.bin", Content: "!!!", Encoding: "base64"}}, []string{`"b.bin"`, "bad base64"}, ""},
		{"bad encoding", []policy.FileInput{{Path: "b.bin", Encoding: "hex"}}, []string{"unknown encoding"}, ""},
		{"file too big", []policy.FileInput{{Path: "big.txt", Content: big}}, []string{`"big.txt"`, "the limit is 512"}, ""},
		{"too many", []policy.FileInput{{Path: "1"}, {Path: "2"}, {Path: "3"}, {Path: "4"}}, []string{"4 files, the limit is 3"}, ""},
		{"total", []policy.FileInput{{Path: "a", Content: big[:400]}, {Path: "b", Content: big[:400]}}, []string{`files[1] "b"`, "total more than 700"}, ""},
		{"output dir", []policy.FileInput{{Path: "out", Content: "x"}}, []string{`"out"`, "output directory"}, ""},
		{"output dir parent", []policy.FileInput{{Path: "res", Content: "x"}}, []string{`"res"`, "res/out/ is the output directory"}, "res/out"},
		{"code file", []policy.FileInput{{Path: "main.py", Content: "x"}}, []string{"reserved for the code"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, sb := newRunner(runnertest.Echo, &bytes.Buffer{})
			r.FileCaps = policy.FileCaps{MaxFiles: 3, MaxFileBytes: 512, MaxTotalBytes: 700, MaxPathLen: 100}
			r.OutDir, r.Artifacts = "out", sandbox.ArtifactLimits{MaxFiles: 1}
			if tt.outDir != "" {
				r.OutDir = tt.outDir
			}
			_, err := r.Run(context.Background(), Call{Language: "python", Code: []byte("x"), Files: tt.files})
			if !errors.Is(err, policy.ErrInvalidRequest) || !IsRefusal(err) {
				t.Fatalf("err = %v, want a refusal", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if sb.Runs.Load() != 0 {
				t.Error("the sandbox ran")
			}
		})
	}
}

func TestRunRefusesFilesFillingTheWorkspace(t *testing.T) {
	r, sb := newRunner(runnertest.Echo, &bytes.Buffer{})
	ws := r.Bounds.Default.Workspace
	margin := workspaceMargin(ws)
	r.FileCaps = policy.FileCaps{MaxFiles: 64, MaxFileBytes: ws, MaxTotalBytes: 2 * ws}
	code := []byte("x")
	fits := ws - margin - int64(len(code))
	run := func(n int64) error {
		b := base64.StdEncoding.EncodeToString(make([]byte, n))
		_, err := r.Run(context.Background(), Call{Language: "python", Code: code,
			Files: []policy.FileInput{{Path: "zeros.bin", Content: b, Encoding: "base64"}}})
		return err
	}
	if err := run(fits); err != nil {
		t.Fatalf("%d bytes with a %d-byte workspace: %v", fits, ws, err)
	}
	err := run(fits + 1)
	if !errors.Is(err, policy.ErrInvalidRequest) || !strings.Contains(err.Error(), "must stay free") {
		t.Fatalf("one byte more: err = %v", err)
	}
	if sb.Runs.Load() != 1 {
		t.Errorf("runs = %d, want 1", sb.Runs.Load())
	}
}
