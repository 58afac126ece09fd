//go:build unix

package trust

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const precious = "precious\n"

// openWithin calls OpenAppend(path), and fails the test rather than hanging it when the
// open blocks (a FIFO without a reader, opened without O_NONBLOCK); unblock then lets
// the blocked open return, so the test ends.
func openWithin(t *testing.T, path string, unblock func()) (*os.File, error) {
	t.Helper()
	type opened struct {
		f   *os.File
		err error
	}
	done := make(chan opened, 1)
	go func() {
		f, err := OpenAppend(path)
		done <- opened{f, err}
	}()
	select {
	case o := <-done:
		return o.f, o.err
	case <-time.After(10 * time.Second):
		if unblock != nil {
			unblock()
		}
		if o := <-done; o.f != nil {
			_ = o.f.Close()
		}
		t.Fatalf("OpenAppend(%s) still blocked after 10s", path)
		return nil, nil
	}
}

// TestOpenAppendRefuses: each path that would let another user choose where the
// server's log or audit lines land, or stop its start, is refused with an error naming
// the path and the cause, and nothing is written through it.
func TestOpenAppendRefuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		// plant makes path (in dir); victim, if not "", is a file whose content must stay
		// precious; unblock releases an open that blocks.
		plant func(t *testing.T, dir, path string) (victim string, unblock func())
		want  string
	}{
		{"symlink", func(t *testing.T, dir, path string) (string, func()) {
			victim := writeVictim(t, dir, 0o644)
			must(t, os.Symlink(victim, path))
			return victim, nil
		}, "is a symlink"},
		// Nothing ever opens the FIFO to read: the old open(2) waited for a reader for ever.
		{"fifo without a reader", func(t *testing.T, _, path string) (string, func()) {
			must(t, syscall.Mkfifo(path, 0o600))
			return "", func() {
				if r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
					_ = r.Close()
				}
			}
		}, "is a FIFO, not a regular file"},
		// With a reader the open does not block: it is refused all the same, and the
		// reader gets nothing.
		{"fifo with a reader", func(t *testing.T, _, path string) (string, func()) {
			must(t, syscall.Mkfifo(path, 0o600))
			r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
			must(t, err)
			t.Cleanup(func() {
				buf := make([]byte, 64)
				if n, _ := r.Read(buf); n > 0 {
					t.Errorf("the FIFO's reader got %q", buf[:n])
				}
				_ = r.Close()
			})
			return "", nil
		}, "is a FIFO, not a regular file"},
		{"directory", func(t *testing.T, _, path string) (string, func()) {
			must(t, os.Mkdir(path, 0o700))
			return "", nil
		}, "is a directory, not a regular file"},
		{"socket", func(t *testing.T, _, path string) (string, func()) {
			l, err := net.Listen("unix", path)
			must(t, err)
			t.Cleanup(func() { _ = l.Close() })
			return "", nil
		}, "is a socket, not a regular file"},
		{"another user's file", func(t *testing.T, _, path string) (string, func()) {
			if os.Geteuid() != 0 {
				t.Skipf("SKIP LOUDLY: chown to uid 65534 needs root (euid %d): another user's file is not tested", os.Geteuid())
			}
			must(t, os.WriteFile(path, []byte(precious), 0o600))
			must(t, os.Chown(path, 65534, 65534))
			return path, nil
		}, "belongs to uid 65534"},
		{"world-writable file", func(t *testing.T, _, path string) (string, func()) {
			must(t, os.WriteFile(path, []byte(precious), 0o600))
			must(t, os.Chmod(path, 0o666))
			return path, nil
		}, "mode 0666 lets other users change it"},
		{"group-writable file", func(t *testing.T, _, path string) (string, func()) {
			must(t, os.WriteFile(path, []byte(precious), 0o600))
			must(t, os.Chmod(path, 0o620))
			return path, nil
		}, "mode 0620 lets other users change it"},
		// The victim is the server's own, 0600: only the second name gives it away.
		{"hard link", func(t *testing.T, dir, path string) (string, func()) {
			victim := writeVictim(t, dir, 0o600)
			must(t, os.Link(victim, path))
			return victim, nil
		}, "has 2 hard links"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "airlock.log")
			victim, unblock := tt.plant(t, dir, path)
			f, err := openWithin(t, path, unblock)
			if err == nil {
				_, _ = f.WriteString("planted\n")
				_ = f.Close()
				t.Fatalf("OpenAppend(%s) opened it", tt.name)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("the refusal %q does not name %s and %q", err, path, tt.want)
			}
			if victim != "" {
				if b, _ := os.ReadFile(victim); string(b) != precious {
					t.Errorf("%s was written: %q", victim, b)
				}
			}
		})
	}
}

// TestOpenAppendRefusesADevice: /dev/null is refused like any device (see OpenAppend for
// why), and the error says what it is.
func TestOpenAppendRefusesADevice(t *testing.T) {
	f, err := openWithin(t, "/dev/null", nil)
	if err == nil {
		_ = f.Close()
		t.Fatal("OpenAppend(/dev/null) opened it")
	}
	if !strings.Contains(err.Error(), "/dev/null is a device, not a regular file") {
		t.Errorf("the refusal does not say why: %v", err)
	}
}

// TestOpenAppendAccepts: a new file (created 0600, as its own), an existing 0600 file of
// this user's and a 0644 one (others may read it, not change it) are appended to.
func TestOpenAppendAccepts(t *testing.T) {
	dir := t.TempDir()
	fresh := filepath.Join(dir, "new.log")
	f, err := OpenAppend(fresh)
	if err != nil {
		t.Fatalf("a new file: %v", err)
	}
	_ = f.Close()
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the new file: %v, %v: want mode 0600", fi, err)
	}
	for _, mode := range []os.FileMode{0o600, 0o644} {
		path := filepath.Join(dir, mode.String())
		must(t, os.WriteFile(path, []byte(precious), mode))
		must(t, os.Chmod(path, mode))
		f, err := OpenAppend(path)
		if err != nil {
			t.Fatalf("an own file of mode %04o: %v", mode, err)
		}
		_, err = f.WriteString("more\n")
		_ = f.Close()
		if b, _ := os.ReadFile(path); err != nil || string(b) != precious+"more\n" {
			t.Errorf("mode %04o: %v, content %q: want it appended to", mode, err, b)
		}
	}
}

func writeVictim(t *testing.T, dir string, mode os.FileMode) string {
	t.Helper()
	victim := filepath.Join(dir, "victim")
	must(t, os.WriteFile(victim, []byte(precious), mode))
	must(t, os.Chmod(victim, mode))
	return victim
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
