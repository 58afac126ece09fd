//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLogFileMustBeARegularFile: log.file naming a FIFO blocked the start for ever in
// open(2), and /dev/null (a device) was taken as a log file; both are refused now, and
// the device's refusal says how to log nowhere.
func TestLogFileMustBeARegularFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "airlock.log")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, path, want string }{
		{"fifo", fifo, "is a FIFO, not a regular file"},
		{"/dev/null", "/dev/null", "leave log.file unset"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan result, 1)
			go func() { done <- run(t, nil, "", "config", "--log-file", tt.path) }()
			select {
			case r := <-done:
				if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) {
					t.Errorf("exit %d, stderr %q: want exit %d saying %q", r.code, r.stderr, exitUsage, tt.want)
				}
			case <-time.After(10 * time.Second):
				// Let the blocked open return, so the test ends.
				if r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
					_ = r.Close()
				}
				<-done
				t.Fatalf("--log-file %s: still starting after 10s", tt.path)
			}
		})
	}
}
