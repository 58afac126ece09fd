package serve

import (
	"errors"
	"net"
	"testing"
)

// The cap gives a slot back once per connection however often it is closed, and closing
// the listener ends an Accept waiting for a slot (else Shutdown would hang on a full cap).
func TestConnLimitSlotsAndClose(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := limitConns(inner, 1).(*connLimit)
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	dial()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if len(ln.slots) != 1 {
		t.Fatalf("slots held after one accept: %d, want 1", len(ln.slots))
	}
	_ = c.Close()
	_ = c.Close()
	if len(ln.slots) != 0 {
		t.Fatalf("slots held after closing the connection twice: %d, want 0", len(ln.slots))
	}
	dial()
	if c, err = ln.Accept(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dial() // waits in the backlog: the one slot is taken
	got := make(chan error, 1)
	go func() {
		_, err := ln.Accept()
		got <- err
	}()
	_ = ln.Close()
	if err := <-got; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept at a full cap after Close: %v, want net.ErrClosed", err)
	}
}
