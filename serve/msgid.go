package serve

import (
	"bytes"
	"encoding/json"
)

// idScanner finds the top-level "id" of a JSON-RPC message fed to it in pieces, without
// keeping the message. A line over the size limit is never parsed, yet its answer must
// carry its id: a null id matches no request (the 2025-06-18 and 2025-11-25 schemas
// forbid it), so clients would wait for their own timeout or drop the session. The id
// usually comes first (Go SDK, mcp-go) but the TypeScript SDK writes it last, after the
// params, so the whole line is scanned; that is one pass over bytes already being read.
type idScanner struct {
	depth   int
	inStr   bool
	esc     bool
	wantKey bool   // at depth 1, the next string is a member name
	inKey   bool   // reading a depth-1 member name
	key     []byte // that name, up to maxKey bytes
	inID    bool   // reading the value of the depth-1 "id"
	val     []byte
	id      json.RawMessage
	failed  bool // not an object, or an id too long to be one
	// kind, in kindOf mode, is what the depth-1 members seen so far make the message:
	// sseAnswers must tell an answer from a request of the server's that carries an id.
	kindOf bool
	kind   msgKind
}

// msgKind is what a message's depth-1 members make it.
type msgKind uint8

const (
	kindUnknown msgKind = iota
	kindRequest         // it has a "method": a request or a notification
	kindAnswer          // it has a "result" or an "error" and, so far, no "method"
)

const (
	maxKey = 8
	maxID  = 256
)

func (s *idScanner) Write(p []byte) (int, error) {
	for _, c := range p {
		if s.settled() {
			break
		}
		s.step(c)
	}
	return len(p), nil
}

func (s *idScanner) step(c byte) {
	ends := s.depth == 1 && !s.inStr && (c == ',' || c == '}')
	if s.inID && !ends {
		if s.val = append(s.val, c); len(s.val) > maxID {
			s.failed = true
		}
	}
	if s.inStr {
		switch {
		case s.esc:
			s.esc = false
		case c == '\\':
			s.esc = true
		case c == '"':
			s.inStr = false
			s.inKey = false
			return
		}
		if s.inKey && len(s.key) <= maxKey {
			s.key = append(s.key, c)
		}
		return
	}
	switch c {
	case '"':
		s.inStr = true
		if s.depth == 1 && s.wantKey {
			s.inKey, s.wantKey, s.key = true, false, s.key[:0]
		}
	case '{':
		s.depth++
		if s.depth == 1 {
			s.wantKey = true
		}
	case '[':
		if s.depth == 0 {
			s.failed = true // a batch: no single id to answer
		}
		s.depth++
	case '}', ']':
		if ends {
			s.endID()
		}
		s.depth--
	case ',':
		if ends {
			s.endID()
			s.wantKey = true
		}
	case ':':
		if s.depth != 1 {
			break
		}
		switch string(s.key) {
		case "id":
			s.inID, s.val = true, s.val[:0]
		case "method":
			s.kind = kindRequest
		case "result", "error":
			if s.kind == kindUnknown {
				s.kind = kindAnswer
			}
		}
	}
}

func (s *idScanner) endID() {
	if !s.inID {
		return
	}
	s.inID = false
	v := bytes.TrimSpace(s.val)
	if smallInt(v) { // a number (the decode below is a dozen allocations per message)
		s.id = json.RawMessage(bytes.Clone(v))
		return
	}
	// Numbers as json.Number: an id such as 1e700 overflows a float64 but is still the
	// id the client wrote, and the answer must carry it back as written.
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var id any
	if dec.Decode(&id) != nil || dec.More() {
		return
	}
	switch id.(type) {
	case string, json.Number:
		s.id = json.RawMessage(bytes.Clone(v))
	}
}

// settled reports whether more input cannot change ID (and in kindOf mode, Answer): an
// answer's id and its "result" come within its first few dozen bytes, so the scan of a
// MiB of output stops there.
func (s *idScanner) settled() bool {
	switch {
	case s.failed:
		return true
	case !s.kindOf:
		return s.id != nil
	}
	return s.kind == kindRequest || s.kind == kindAnswer && s.id != nil
}

// Answer is, in kindOf mode, the id of an answer (a message with a "result" or an
// "error", no "method"), or nil.
func (s *idScanner) Answer() json.RawMessage {
	if s.kind != kindAnswer {
		return nil
	}
	return s.id
}

// ID is the message's id, or nil when it has none a response could carry (a
// notification, a null id, or an id past the end of what was scanned).
func (s *idScanner) ID() json.RawMessage { return s.id }
