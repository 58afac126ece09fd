package sandbox

import (
	"errors"
	"strings"
	"testing"
)

func TestArtifactCheck(t *testing.T) {
	lim := ArtifactLimits{MaxFiles: 2, MaxFileBytes: 100, MaxTotal: 150}
	for _, tt := range []struct {
		name        string
		returned    int
		total, size int64
		links       uint64
		want        Skip
	}{
		{"fits", 0, 0, 100, 1, SkipNone},
		{"hard link first", 5, 1000, 1000, 2, SkipHardLink},
		{"count before size", 2, 0, 1000, 1, SkipTooManyFiles},
		{"size before total", 1, 100, 101, 1, SkipFileTooLarge},
		{"total", 1, 100, 51, 1, SkipTotalCap},
		{"total exactly", 1, 100, 50, 1, SkipNone},
		{"empty file", 1, 150, 0, 1, SkipNone},
	} {
		if got := lim.Check(tt.returned, tt.total, tt.size, tt.links); got != tt.want {
			t.Errorf("%s: %v (%q), want %q", tt.name, got, got.Reason(), tt.want.Reason())
		}
	}
}

// A zero or negative cap is an invalid spec naming it, never "no cap" or a default.
func TestArtifactLimitsValidate(t *testing.T) {
	if err := (ArtifactLimits{MaxFiles: 1, MaxFileBytes: 1, MaxTotal: 1}).Validate(); err != nil {
		t.Fatalf("positive caps: %v", err)
	}
	err := ArtifactLimits{MaxFiles: 0, MaxFileBytes: -1, MaxTotal: 7}.Validate()
	if !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), "max_files, max_file_bytes") || strings.Contains(err.Error(), "max_total") {
		t.Fatalf("zero and negative caps: %v", err)
	}
}

// Every reason is distinct and says something, so a client can tell them apart, and
// no reason can be mistaken for the closing entry.
func TestSkipReasons(t *testing.T) {
	seen := map[string]Skip{}
	for s := SkipNone + 1; s.Valid(); s++ {
		r := s.Reason()
		if r == "" {
			t.Errorf("skip %d has no reason", s)
		}
		if o, dup := seen[r]; dup {
			t.Errorf("skips %d and %d both say %q", o, s, r)
		}
		seen[r] = s
	}
	if SkipNone.Reason() != "" || skipEnd.Valid() {
		t.Error("SkipNone must say nothing and skipEnd must not be valid")
	}
	u := UnlistedArtifact(7)
	if u.Path != "..." || u.Skipped != "7 more entries not listed (at most 256 are)" || u.Data != nil {
		t.Errorf("closing entry %+v", u)
	}
	if _, ok := seen[u.Skipped]; ok {
		t.Error("the closing entry reads as a skip reason")
	}
}
