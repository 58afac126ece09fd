package linux

import (
	"context"
	"testing"

	"github.com/airlock-mcp/airlock/sandbox"
)

// A program that leaves thousands of files in out/ gets a bounded list back: the
// returned files, then skipped entries up to sandbox.MaxArtifactEntries, then one entry counting
// the rest, and it says when the walk stopped before reading all of out/. The result must
// not grow with what the program wrote.
func TestArtifactListIsBounded(t *testing.T) {
	recordTier(t)
	t.Parallel()
	s := testSandbox(t)
	spec := pySpec("for i in range(5000): open('out/f%05d' % i, 'w').write('x')", newMarker())
	spec.OutDir = "out"
	spec.Artifacts = sandbox.ArtifactLimits{MaxFiles: 5, MaxFileBytes: 1 << 20, MaxTotal: 1 << 20}
	res, err := s.Run(context.Background(), withDefaults(spec))
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("%v %s %s", err, res.Status, brief(res))
	}
	if len(res.Artifacts) != sandbox.MaxArtifactEntries+1 {
		t.Fatalf("%d artifacts listed, want %d plus one summary", len(res.Artifacts), sandbox.MaxArtifactEntries)
	}
	returned := 0
	for _, a := range res.Artifacts {
		if a.Data != nil {
			returned++
		}
	}
	last := res.Artifacts[len(res.Artifacts)-1]
	// 5000 entries are more than a walk reads (sandbox.MaxArtifactWalk): the list says so.
	if returned != 5 || last.Skipped != sandbox.CutArtifact(sandbox.MaxArtifactWalk-sandbox.MaxArtifactEntries).Skipped {
		t.Fatalf("returned %d (want 5), last entry %+v", returned, last)
	}
}
