//go:build unix

package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An environment path that another user could swap for a symlink (a directory above it
// writable by others, or owned by someone else) is refused at startup: sandboxes bind it
// by name, each time one is built. Seen before the check: the environment below a
// world-writable directory was offered (Problem "").
func TestEnvironmentPathNotSwappable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: the rows need files of another owner, which only root can make")
	}
	// /var/tmp: not /tmp (refused for another reason), and sticky like it.
	top, err := os.MkdirTemp("/var/tmp", "airlock-swap-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	env := filepath.Join(top, "parent", "env")
	if err := os.MkdirAll(env, 0o755); err != nil {
		t.Fatal(err)
	}
	parent := filepath.Dir(env)
	const nobody = 65534
	rows := []struct {
		name  string
		setup func() error
		want  string // the directory named, "" for none
	}{
		{"root's, 0755", func() error { return os.Chmod(parent, 0o755) }, ""},
		{"world-writable parent", func() error { return os.Chmod(parent, 0o777) }, parent},
		{"group-writable parent", func() error { return os.Chmod(parent, 0o775) }, parent},
		{"sticky world-writable parent, env root's", func() error { return os.Chmod(parent, os.ModeSticky|0o777) }, ""},
		{"sticky parent, env another user's", func() error { return os.Chown(env, nobody, nobody) }, env},
		{"parent another user's", func() error {
			if err := os.Chown(env, 0, 0); err != nil {
				return err
			}
			if err := os.Chmod(parent, 0o755); err != nil {
				return err
			}
			return os.Chown(parent, nobody, nobody)
		}, parent},
	}
	for _, r := range rows {
		if err := r.setup(); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		if got := swappable(env); got != r.want {
			t.Errorf("%s: swappable = %q, want %q", r.name, got, r.want)
		}
	}
	// And the environment is not offered, with the fix named.
	if err := os.Chown(parent, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(parent, 0o777); err != nil {
		t.Fatal(err)
	}
	e := InspectEnvironment(EnvironmentConfig{Name: "swap", Language: "python", Path: env}, Language{Name: "python", Installed: true})
	if !strings.Contains(e.Problem, parent+" can be renamed or replaced") || !strings.Contains(e.Problem, "chmod go-w") {
		t.Fatalf("an environment below a world-writable directory: problem %q", e.Problem)
	}
}
