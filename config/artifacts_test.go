package config

import "testing"

func TestArtifactsDir(t *testing.T) {
	for _, tt := range []struct {
		dir string
		ok  bool
	}{
		{"out", true}, {"a/b", true}, {"", true},
		{"/out", false}, {"../out", false}, {"..", false}, {".", false}, {"out/", false},
		{"a/../b", false}, {`a\b`, false}, {"a\x00", false}, {".airlock-out", false},
	} {
		c := Default()
		c.Artifacts.Dir = tt.dir
		if err := c.Validate(); (err == nil) != tt.ok {
			t.Errorf("dir %q: err = %v, want ok=%t", tt.dir, err, tt.ok)
		}
	}
}

func TestArtifactsFromFile(t *testing.T) {
	c, err := Load(writeFile(t, "[artifacts]\nmax_files = 3\ndir = \"results\"\n"), env(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Artifacts.Dir != "results" || c.Artifacts.MaxFiles != 3 || c.ArtifactLimits().MaxFiles != 3 {
		t.Errorf("artifacts = %+v", c.Artifacts)
	}
	if Default().Artifacts.Dir != "out" {
		t.Errorf("default dir = %q", Default().Artifacts.Dir)
	}
}
