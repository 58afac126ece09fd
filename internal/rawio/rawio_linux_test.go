package rawio

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"
)

// A Reader reads what was written, then EOF once the writer is gone; a Close while a
// Read waits ends that Read (the sandbox's drain and the stdio server's stop rely on
// it).
func TestReader(t *testing.T) {
	r, w, err := os.Pipe() // both ends non-blocking, on the poller
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rr, err := NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if n, err := rr.Read(buf); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read %q, %v; want hello", buf[:n], err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := rr.Read(buf) // nothing written yet: waits on the poller
		got <- err
	}()
	time.Sleep(20 * time.Millisecond)
	w.Close()
	if err := <-got; !errors.Is(err, io.EOF) {
		t.Fatalf("after the writer closed: %v, want EOF", err)
	}

	r2, w2, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	rr2, _ := NewReader(r2)
	go func() {
		_, err := rr2.Read(buf)
		got <- err
	}()
	time.Sleep(20 * time.Millisecond)
	r2.Close()
	select {
	case err := <-got:
		if err == nil || errors.Is(err, io.EOF) {
			t.Fatalf("read of a closed pipe: %v, want the closed file's error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiting read did not end when its file was closed")
	}
	if n, err := rr.Read(nil); n != 0 || err != nil {
		t.Fatalf("empty read: %d, %v", n, err)
	}
}
