//go:build unix

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

var walkTestLimits = ArtifactLimits{MaxFiles: 5, MaxFileBytes: 1 << 20, MaxTotal: 1 << 20}

// walkCost walks root's out/ and returns the list and the bytes the walk allocated.
func walkCost(t *testing.T, dir string) ([]Artifact, uint64) {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	arts, err := WalkArtifacts(root, "out", walkTestLimits)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	return arts, after.TotalAlloc - before.TotalAlloc
}

// A program fills out/ with as many empty files as the workspace has inodes, with long
// names: the server's walk (a session's, darwin's) must cost what its budget allows,
// not what the program made, and the list must say it was cut. Before the walk read
// directories in bounded batches, 30,000 entries cost the server 40 MB of allocation
// (fs.WalkDir reads and sorts a whole directory first) and the list only said
// "29744 more entries", as if they had all been read.
func TestWalkArtifactsCostIsBounded(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("n", 230)
	for i := range 30000 {
		f, err := os.Create(filepath.Join(out, fmt.Sprintf("%s%06d", pad, i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	arts, alloc := walkCost(t, dir)
	if len(arts) != MaxArtifactEntries+1 {
		t.Fatalf("%d entries listed, want %d and the closing entry", len(arts), MaxArtifactEntries)
	}
	// The budget's names (4096 of 236 bytes) and the listed entries' paths, with slack.
	if limit := uint64(6 << 20); alloc > limit {
		t.Fatalf("the walk of 30,000 entries allocated %d bytes, over %d", alloc, limit)
	}
	last := arts[len(arts)-1]
	if last.Path != "..." || !strings.Contains(last.Skipped, "walk stopped") {
		t.Fatalf("the closing entry does not say the walk was cut: %+v", last)
	}
	t.Logf("30,000 entries: %d bytes allocated; closing entry %q", alloc, last.Skipped)
}

// Below the budget nothing is cut: every entry is read, sorted and counted.
func TestWalkArtifactsWithinBudget(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out", "sub")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if err := os.WriteFile(filepath.Join(out, fmt.Sprintf("f%04d", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	arts, _ := walkCost(t, dir)
	if len(arts) != MaxArtifactEntries+1 || arts[0].Path != "sub/f0000" || arts[4].Path != "sub/f0004" || arts[4].Data == nil {
		t.Fatalf("the first entries are not the sorted files: %+v", arts[:5])
	}
	if last := arts[len(arts)-1]; last.Skipped != UnlistedArtifact(1000-MaxArtifactEntries).Skipped {
		t.Fatalf("closing entry %+v", last)
	}
}
