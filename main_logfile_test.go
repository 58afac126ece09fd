//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestE2EFIFOAsLogOrAuditFile: `airlock serve` with --audit or --log-file naming a FIFO
// waited in open(2) for a reader that never came: the server never started, and never
// said why. It now exits at once with the refusal. Needs no sandbox: the files are opened
// whether or not one is usable.
func TestE2EFIFOAsLogOrAuditFile(t *testing.T) {
	bin := binary(t)
	fifo := filepath.Join(t.TempDir(), "airlock.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"--log-file", []string{"serve", "--log-file", fifo, "--audit", "off"}, 2},
		{"--audit", []string{"serve", "--audit", fifo}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A server stuck in open(2) is killed, and fails the row.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tc.args...)
			cmd.Stdin = strings.NewReader("")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if ctx.Err() != nil || !errors.As(err, &exit) || exit.ExitCode() != tc.code ||
				!strings.Contains(stderr.String(), fifo+" is a FIFO, not a regular file") {
				t.Errorf("timed out %v, err=%v, stderr %q: want exit %d naming the FIFO", ctx.Err() != nil, err, stderr.String(), tc.code)
			}
			if stdout.Len() != 0 {
				t.Errorf("wrote to stdout: %q", stdout.String())
			}
		})
	}
	if _, err := os.Stat(fifo); err != nil {
		t.Errorf("the FIFO: %v", err)
	}
}
