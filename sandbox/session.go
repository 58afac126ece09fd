package sandbox

import (
	"bytes"
	"context"
	"errors"
	"time"
)

// Sessions is implemented by backends that can keep one sandbox alive across calls.
//
// A session's sandbox is built exactly like a single-use one, from a Spec whose program
// is a driver (policy's SessionDriver): the driver runs the calls in one interpreter, so
// a call can change it, and it is treated as the program, never trusted. The backend
// enforces each call's wall and CPU limits and output caps from outside the sandbox and
// decides each call's status itself.
type Sessions interface {
	// OpenSession starts the driver of spec in a new sandbox and waits until it is
	// ready for calls. spec.Limits bound the whole session (memory, pids, workspace).
	OpenSession(ctx context.Context, spec Spec) (Session, error)
}

// Session is one live sandbox serving calls one at a time.
type Session interface {
	// Call runs one call in the session. The Result is the call's own: its output,
	// status, wall and CPU time. Result.Restarted says the session's processes were
	// killed and the driver started again (files kept, interpreter state lost). An
	// error means the session failed and has ended (ErrSessionEnded) or is busy.
	Call(ctx context.Context, c SessionCall) (Result, error)
	// Close ends the session: it starts the kill of every process of the session and
	// the release of its sandbox, without waiting for them (Gone).
	Close()
	// Done is closed once the session has ended, closed or on its own.
	Done() <-chan struct{}
	// Gone is closed once every process of the session has exited. Close only starts
	// the kill (it is called under the session manager's lock): whoever answers a
	// close waits for Gone, so that no code of the session runs once it is told closed.
	Gone() <-chan struct{}
}

// SessionCall is one call in a session.
type SessionCall struct {
	ID    string
	Code  []byte
	Stdin []byte
	// Limits: Wall, CPU and Output apply to this call; the session's own limits apply
	// to the rest.
	Limits   Limits
	Progress func(Progress) `json:"-"`
}

var (
	// ErrSessionEnded means the session's sandbox has ended; it cannot take calls.
	ErrSessionEnded = errors.New("the session has ended")
	// ErrSessionBusy means the session is running another call.
	ErrSessionBusy = errors.New("the session is running another call")
)

// SessionInterruptGrace is how long a session's interpreter has to recover from an
// interrupt (KeyboardInterrupt, a node or bash SIGINT) before its processes are killed
// and the driver restarted.
const SessionInterruptGrace = 2 * time.Second

// MarkerPrefix starts every marker a session's driver writes on its stdout and stderr;
// the session's key and a colon follow, then the marker's body up to a newline.
const MarkerPrefix = "\x1eAIRLOCK-"

// maxMarkerBody bounds a marker's body: longer, it was not a marker.
const maxMarkerBody = 64

// Splitter separates a session driver's markers from the program's output in one
// stream. Only a marker with the session's key counts: the key is in the driver's
// memory, so the session's own code can forge one, which only misattributes its own
// output; nothing outside the session can.
type Splitter struct {
	token   []byte // MarkerPrefix + key + ":"
	pending []byte // the start of a possible token, held from the last chunk
	body    []byte // the marker being read, after its token
	in      bool   // inside a marker's body
}

// NewSplitter returns a splitter for the markers of key.
func NewSplitter(key string) *Splitter {
	return &Splitter{token: []byte(MarkerPrefix + key + ":")}
}

// Feed passes the output bytes of p to out and each marker's body to mark, in stream
// order. A token split across calls is held until the next one decides it.
func (s *Splitter) Feed(p []byte, out func([]byte), mark func(string)) {
	for len(p) > 0 {
		switch {
		case s.in:
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				s.body = append(s.body, p...)
				if len(s.body) > maxMarkerBody {
					s.notMarker(out)
				}
				return
			}
			s.body = append(s.body, p[:i]...)
			p = p[i+1:]
			if len(s.body) > maxMarkerBody {
				s.body = append(s.body, '\n')
				s.notMarker(out)
				continue
			}
			mark(string(s.body))
			s.body, s.in = s.body[:0], false
		case len(s.pending) > 0:
			need := s.token[len(s.pending):]
			k := min(len(need), len(p))
			if !bytes.Equal(p[:k], need[:k]) {
				// The token's first byte occurs nowhere else in it, so no token can
				// start inside what was held: it is all output.
				out(s.pending)
				s.pending = s.pending[:0]
				continue
			}
			p = p[k:]
			if k < len(need) {
				s.pending = append(s.pending, need[:k]...)
				return
			}
			s.pending, s.in = s.pending[:0], true
		default:
			i := bytes.IndexByte(p, s.token[0])
			if i < 0 {
				out(p)
				return
			}
			if i > 0 {
				out(p[:i])
				p = p[i:]
			}
			k := min(len(s.token), len(p))
			if !bytes.Equal(p[:k], s.token[:k]) {
				out(p[:1])
				p = p[1:]
				continue
			}
			p = p[k:]
			if k < len(s.token) {
				s.pending = append(s.pending[:0], s.token[:k]...)
				return
			}
			s.in = true
		}
	}
}

// notMarker gives back as output a "marker" whose body grew past any real one.
func (s *Splitter) notMarker(out func([]byte)) {
	out(s.token)
	out(s.body)
	s.body, s.in = s.body[:0], false
}
