package sandbox

import (
	"sync"
	"sync/atomic"
)

// Capture is an io.Writer that keeps at most a fixed number of bytes of a stream: the
// first half as the head and the most recent half as the tail. It counts every byte, so
// a flood costs the server the cap in memory, not the flood's size.
type Capture struct {
	mu      sync.Mutex
	headCap int
	tailCap int
	head    []byte
	tail    []byte // ring buffer of tailCap bytes once full
	tailPos int    // next write position in tail when full
	total   atomic.Int64
}

// NewCapture returns a Capture that keeps at most limit bytes.
func NewCapture(limit int64) *Capture {
	if limit < 0 {
		limit = 0
	}
	h := int(limit / 2)
	return &Capture{headCap: h, tailCap: int(limit) - h}
}

// Write never fails, so the writer side of a pipe is never blocked by a full buffer.
func (c *Capture) Write(p []byte) (int, error) {
	n := len(p)
	c.total.Add(int64(n))
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.headCap - len(c.head); room > 0 {
		k := min(room, len(p))
		if c.head == nil {
			// Small to start (most runs print a line), growing by append: 64 KiB per
			// stream per run was garbage the server's GC paid for under load.
			c.head = make([]byte, 0, min(c.headCap, max(len(p), 4<<10)))
		}
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || c.tailCap == 0 {
		return n, nil
	}
	if len(p) >= c.tailCap {
		// Only the last tailCap bytes of p can survive.
		if cap(c.tail) < c.tailCap {
			c.tail = make([]byte, c.tailCap)
		}
		c.tail = c.tail[:c.tailCap]
		copy(c.tail, p[len(p)-c.tailCap:])
		c.tailPos = 0
		return n, nil
	}
	if len(c.tail) < c.tailCap {
		room := c.tailCap - len(c.tail)
		if room >= len(p) {
			c.tail = append(c.tail, p...)
			return n, nil
		}
		c.tail = append(c.tail, p[:room]...)
		p = p[room:]
		c.tailPos = 0
	}
	for len(p) > 0 {
		k := copy(c.tail[c.tailPos:], p)
		p = p[k:]
		c.tailPos = (c.tailPos + k) % c.tailCap
	}
	return n, nil
}

// Total is the number of bytes written so far; safe to call while writing goes on.
func (c *Capture) Total() int64 { return c.total.Load() }

// Stream returns what was kept. When nothing was dropped, all bytes are in Head.
func (c *Capture) Stream() Stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Stream{Head: append([]byte(nil), c.head...), Total: c.total.Load()}
	var tail []byte
	if len(c.tail) == c.tailCap && c.tailCap > 0 {
		tail = make([]byte, 0, c.tailCap)
		tail = append(tail, c.tail[c.tailPos:]...)
		tail = append(tail, c.tail[:c.tailPos]...)
	} else {
		tail = append([]byte(nil), c.tail...)
	}
	if s.Total == int64(len(s.Head)+len(tail)) {
		// Nothing dropped: present the stream as one piece.
		s.Head = append(s.Head, tail...)
		return s
	}
	s.Tail = tail
	return s
}

// Limit is the number of bytes the capture keeps at most.
func (c *Capture) Limit() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int64(c.headCap + c.tailCap)
}

// SetLimit changes the cap, for a sandbox prepared before its call's limits were known.
// Bytes already kept beyond the new cap are dropped (they still count in Total).
func (c *Capture) SetLimit(limit int64) {
	if limit < 0 {
		limit = 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h := int(limit / 2)
	if len(c.head) > h {
		c.head = c.head[:h]
	}
	c.headCap, c.tailCap = h, int(limit)-h
	c.tail, c.tailPos = nil, 0
}
