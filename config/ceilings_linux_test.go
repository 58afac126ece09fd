package config

import (
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The check against this process's real hard RLIMIT_NOFILE, through a file, as the
// server loads one: one above it is refused at load, not at every run's setrlimit.
func TestOpenFilesAboveThisProcessHardLimitRefused(t *testing.T) {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		t.Fatal(err)
	}
	if r.Max >= 1<<30 {
		t.Skipf("hard RLIMIT_NOFILE is %d here: no open_files above it is a valid setting to try", r.Max)
	}
	n := r.Max + 1
	c, err := Load(writeFile(t, fmt.Sprintf("[limits.default]\nopen_files = %d\n[limits.max]\nopen_files = %d\n", n, n)), env(nil), nil)
	if err == nil {
		err = c.Validate()
	}
	if err == nil || !strings.Contains(err.Error(), "limits.default.open_files") || !strings.Contains(err.Error(), "RLIMIT_NOFILE") {
		t.Fatalf("open_files = %d above the hard limit %d: %v, want it refused", n, r.Max, err)
	}
}
