package sysfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Read returns what os.ReadFile returns: empty, shorter than the first buffer, exactly
// one buffer, and several buffers long.
func TestReadIsReadFile(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{0, 1, initial - 1, initial, initial + 1, 5*initial + 17} {
		p := filepath.Join(dir, "f")
		want := bytes.Repeat([]byte("airlock\n"), size/8+1)[:size]
		if err := os.WriteFile(p, want, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := Read(p)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("size %d: Read = %d bytes, %v; want %d bytes", size, len(got), err, len(want))
		}
	}
}

// A procfs file says its size is 0 and is read to its end all the same.
func TestReadProcfs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("procfs is Linux's")
	}
	for _, p := range []string{"/proc/self/mountinfo", "/proc/sys/kernel/random/boot_id", "/proc/self/uid_map"} {
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Read(p)
		if err != nil || !bytes.Equal(got, want) || len(got) == 0 {
			t.Errorf("%s: Read = %q, %v; os.ReadFile %q", p, got, err, want)
		}
	}
}

// Its errors are os.ReadFile's kind: a missing file is os.ErrNotExist, with the path.
func TestReadErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	_, err := Read(missing)
	var pe *os.PathError
	if !errors.Is(err, os.ErrNotExist) || !errors.As(err, &pe) || pe.Path != missing {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Read(dir); err == nil {
		t.Error("reading a directory did not fail")
	}
}
