package linux

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The report socket's reader keeps a descriptor passed with a report (the bridge's
// listener) and sees the end of the stream.
func TestReportConnPassesDescriptors(t *testing.T) {
	rc, theirs, err := reportPair()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	passed, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer passed.Close()
	if err := unix.Sendmsg(theirs, []byte("rep"), unix.UnixRights(int(passed.Fd())), nil, 0); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if n, err := rc.Read(buf); err != nil || string(buf[:n]) != "rep" {
		t.Fatalf("read %q, %v; want rep", buf[:n], err)
	}
	fd, ok := rc.takeFD()
	if !ok {
		t.Fatal("the passed descriptor was not kept")
	}
	var st, want unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || unix.Fstat(int(passed.Fd()), &want) != nil || st.Rdev != want.Rdev {
		t.Fatalf("the kept descriptor is not the passed file: %v", err)
	}
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("the kept descriptor is not close-on-exec (flags %d, %v)", flags, err)
	}
	unix.Close(fd)
	unix.Close(theirs)
	if n, err := rc.Read(buf); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("after the init's end closed: %d, %v; want EOF", n, err)
	}
}

// The stdin end: closed unwritten, the program reads EOF; written, the bytes arrive; a
// write the program never reads ends when the end is closed (a session's Close relies
// on it), and nothing can be written after.
func TestStdinEnd(t *testing.T) {
	mine, theirs, err := plainPipe("stdin", false)
	if err != nil {
		t.Fatal(err)
	}
	s := newStdinEnd(mine)
	s.Close()
	s.Close()
	buf := make([]byte, 16)
	if n, err := unix.Read(theirs, buf); n != 0 || err != nil {
		t.Fatalf("read after an unwritten close: %d, %v; want EOF", n, err)
	}
	unix.Close(theirs)

	mine, theirs, err = plainPipe("stdin", false)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(theirs)
	s = newStdinEnd(mine)
	if _, err := s.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	if n, err := unix.Read(theirs, buf); err != nil || string(buf[:n]) != "hi" {
		t.Fatalf("read %q, %v; want hi", buf[:n], err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := s.Write(make([]byte, 4<<20)) // past the pipe's capacity: waits
		got <- err
	}()
	time.Sleep(20 * time.Millisecond)
	s.Close()
	select {
	case err := <-got:
		if err == nil {
			t.Fatal("a write cut short by Close reported no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiting write did not end when the stdin end was closed")
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("write after Close: %v, want os.ErrClosed", err)
	}
}
