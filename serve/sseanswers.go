package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// On the legacy SSE transport a posted call is answered 202 at once, and its answer comes
// later as an event on the client's GET stream (mcp-go runs the call detached from its
// POST). What the server holds for a call, its place in State's count, which a drain
// waits on, and its body's bytes in the body budget, was given back at the 202: a drain
// saw nothing in flight and closed the streams with calls still running (their answers
// lost), and a client could have any number of posted calls' bodies held at once.
//
// So a posted request's hold (a release) is kept by its stream's sseAnswers, under the id
// its answer will carry, until answerWriter has written and flushed an answer with that
// id, or the stream ends (which cancels the call, see endWithStream), whichever comes
// first. Ids are compared as mcp-go writes them (see answerKey), so that 1, 1.0 and 1e0
// are one id, and one id is in flight at most once per stream (JSON-RPC forbids reusing
// one): an answer then names exactly one hold, and nothing a client posts can release a
// hold other than its own call's, twice, or not at all.
type sseAnswers struct {
	mu    sync.Mutex
	held  map[string]*release // by answerKey
	ended bool
}

func newSSEAnswers() *sseAnswers { return &sseAnswers{held: map[string]*release{}} }

// hold keeps rel until the answer with key is on the stream, and reports false when a
// request with that id is in flight on the stream already. Once the stream has ended
// nothing is kept: rel goes back when its POST returns, as nothing will answer.
func (a *sseAnswers) hold(key string, rel *release) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, busy := a.held[key]; busy {
		return false
	}
	if !a.ended {
		a.held[key] = rel
		rel.keep()
	}
	return true
}

// answered takes the hold of key out, if any, for the caller to give back once the
// answer is flushed: the id is free from now on, as the client may see the answer and
// reuse it at once.
func (a *sseAnswers) answered(key string) *release {
	a.mu.Lock()
	defer a.mu.Unlock()
	rel := a.held[key]
	delete(a.held, key)
	return rel
}

// drop gives back rel, held under key, whose answer will not come on the stream after
// all (mcp-go answered the POST itself, or the event could not be queued).
func (a *sseAnswers) drop(key string, rel *release) {
	a.mu.Lock()
	if a.held[key] == rel {
		delete(a.held, key)
	}
	a.mu.Unlock()
	rel.run()
}

// end gives back every hold: the stream has ended, and with it its calls.
func (a *sseAnswers) end() {
	a.mu.Lock()
	held := a.held
	a.held, a.ended = map[string]*release{}, true
	a.mu.Unlock()
	for _, rel := range held {
		rel.run()
	}
}

// release is what a POST holds while it is answered (its body's bytes in the budget, its
// place in State's count), given back exactly once: when its handler returns, or, once
// kept, when sseAnswers says its answer is on the stream.
type release struct {
	mu   sync.Mutex
	fns  []func()
	kept bool
}

// releaseKey carries a POST's release in its context, from guard to gate.
type releaseKey struct{}

func (r *release) add(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fns = append(r.fns, f)
}

func (r *release) keep() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kept = true
}

// run gives everything back, once; a nil release holds nothing.
func (r *release) run() {
	if r == nil {
		return
	}
	r.mu.Lock()
	fns := r.fns
	r.fns = nil
	r.mu.Unlock()
	for _, f := range fns {
		f()
	}
}

// returned is the POST handler's end: everything goes back unless an answer is awaited.
func (r *release) returned() {
	r.mu.Lock()
	kept := r.kept
	r.mu.Unlock()
	if !kept {
		r.run()
	}
}

// answerKey is an id as mcp-go writes it in the answer: it decodes a request's id as
// encoding/json decodes into any (every number a float64) and encodes that again, so
// 1, 1.0, 1e0 and 1.00 are all answered as 1, and "\u0031" as "1". ok is false for an id
// that is not a string or a number that decodes.
func answerKey(id json.RawMessage) (string, bool) {
	if smallInt(id) {
		return string(id), true // what the decode and encode below make of it
	}
	var v any
	if json.Unmarshal(id, &v) != nil {
		return "", false
	}
	switch v.(type) {
	case string, float64:
	default:
		return "", false
	}
	b, err := json.Marshal(v)
	return string(b), err == nil
}

// smallInt reports an id of 1 to 15 digits without a leading zero: a float64 holds it
// exactly and encoding/json writes it back as sent. The ids clients send are counters,
// and the decode and encode cost 1-2 µs and a dozen allocations for every answer.
func smallInt(id []byte) bool {
	if len(id) == 0 || len(id) > 15 || id[0] == '0' && len(id) > 1 {
		return false
	}
	for _, c := range id {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// answerOf is the key of the answer mcp-go will put on the stream for a posted message,
// "" when it puts none with an id there, or why the message is refused. It follows
// mcp-go's HandleMessage, which decodes jsonrpc and method as strings and id and result
// as any: a message that does not decode so is answered with a null id, one without an
// id or with a "result" (a client's answer to the server) is not answered at all. msg is
// message's decode of raw; raw is decoded again only when msg is partial (a second decode
// of every body cost as much as message's, 20 ms a MiB). An id that is no string or
// number, or whose answer's id would be longer than the stream's scanner keeps (maxID),
// is refused: its answer could not be matched, and holding nothing for it would let its
// body and its call escape the bounds.
func answerOf(msg envelope, raw []byte) (key, refuse string) {
	var id any
	if msg.partial {
		var m struct {
			JSONRPC string `json:"jsonrpc"`
			Method  string `json:"method"`
			ID      any    `json:"id,omitempty"`
			Result  any    `json:"result,omitempty"`
		}
		if json.Unmarshal(raw, &m) != nil || m.Result != nil {
			return "", ""
		}
		id = m.ID
	} else {
		notString := len(msg.JSONRPC) > 0 && msg.JSONRPC[0] != '"' && string(msg.JSONRPC) != "null"
		hasResult := len(msg.Result) > 0 && string(msg.Result) != "null"
		if notString || hasResult || len(msg.ID) == 0 || json.Unmarshal(msg.ID, &id) != nil {
			return "", ""
		}
	}
	switch id.(type) {
	case nil:
		return "", ""
	case string, float64:
	default:
		return "", "a request id must be a string or a number"
	}
	b, err := json.Marshal(id)
	if err != nil || len(b) > maxID {
		return "", fmt.Sprintf("a request id may be at most %d bytes long", maxID)
	}
	return string(b), ""
}

// answerWriter reads the messages a handler writes through it and tells answered of each
// answer's id (answerKey) before the answer's bytes are written, so that the id is free
// again before the client can have read the answer's end (a client may reuse an id once
// answered); what answered returns is given back once the answer has been flushed.
//
// On a GET /sse stream it gives back an answer's hold (sseAnswers.answered). On a
// Streamable HTTP POST in a session it frees the request's id (ownCalls.serve), whose
// answer mcp-go writes either as an SSE event (once the session has had a notification)
// or, with Content-Type application/json, as the body itself. mcp-go writes each message
// whole, but the parse does not rely on it.
type answerWriter struct {
	http.ResponseWriter
	answered func(key string) *release
	mode     bodyMode           // what the body is, known at its first Write
	head     [len("data:")]byte // the current line's first bytes
	n        int                // the current line's length so far
	data     bool               // the current line is a data line
	lines    int                // data lines in the current event
	scan     idScanner          // the current event's data (or the body), in kindOf mode
	pending  []*release         // what to give back of the answers written since the last Flush
}

// bodyMode is how answerWriter reads what is written through it.
type bodyMode uint8

const (
	modeUnknown bodyMode = iota
	modeEvents           // an SSE stream
	modeJSON             // one JSON message
	modeNone             // nothing to read: no answer, or the body's answer already told
)

func newAnswerWriter(w http.ResponseWriter, answered func(key string) *release) *answerWriter {
	return &answerWriter{ResponseWriter: w, answered: answered, mode: modeEvents, scan: idScanner{kindOf: true}}
}

// newBodyAnswerWriter is the writer of a POST's response, whose answer is an event of its
// SSE stream or its JSON body, as its Content-Type says at the first Write.
func newBodyAnswerWriter(w http.ResponseWriter, answered func(key string) *release) *answerWriter {
	a := newAnswerWriter(w, answered)
	a.mode = modeUnknown
	return a
}

func (w *answerWriter) Write(p []byte) (int, error) {
	if w.mode == modeUnknown {
		w.mode = modeNone
		// The media type without its parameters, as mime.ParseMediaType would read it
		// for these two, without its allocations on every POST.
		mt, _, _ := strings.Cut(w.Header().Get("Content-Type"), ";")
		switch mt = strings.TrimSpace(mt); {
		case strings.EqualFold(mt, "text/event-stream"):
			w.mode = modeEvents
		case strings.EqualFold(mt, "application/json"):
			w.mode = modeJSON
		}
	}
	switch w.mode {
	case modeJSON:
		if _, _ = w.scan.Write(p); w.scan.settled() {
			w.mode = modeNone
			w.answer()
		}
	case modeEvents:
		for q := p; len(q) > 0; {
			i := bytes.IndexByte(q, '\n')
			if i < 0 {
				w.piece(q)
				break
			}
			w.piece(q[:i])
			w.endLine()
			q = q[i+1:]
		}
	}
	return w.ResponseWriter.Write(p)
}

// answer tells answered of the answer just read, if the message was one.
func (w *answerWriter) answer() {
	if id := w.scan.Answer(); id != nil {
		if key, ok := answerKey(id); ok {
			if rel := w.answered(key); rel != nil {
				w.pending = append(w.pending, rel)
			}
		}
	}
}

// piece takes the next bytes of the current line, up to (not including) its end.
func (w *answerWriter) piece(p []byte) {
	if w.n < len(w.head) {
		k := copy(w.head[w.n:], p)
		w.n += k
		p = p[k:]
		if w.n == len(w.head) && string(w.head[:]) == "data:" {
			w.data = true
			if w.lines++; w.lines > 1 {
				// SSE joins an event's data lines with a newline: JSON whitespace.
				_, _ = w.scan.Write([]byte{'\n'})
			}
		}
	} else {
		w.n += len(p)
	}
	if w.data {
		_, _ = w.scan.Write(p)
	}
}

// endLine ends the current line; an empty one (or a lone CR of a CRLF) ends the event.
func (w *answerWriter) endLine() {
	if w.n == 0 || w.n == 1 && w.head[0] == '\r' {
		w.answer()
		w.scan, w.lines = idScanner{kindOf: true}, 0
	}
	w.n, w.data = 0, false
}

// Flush sends what was written, then gives back the holds of the answers in it.
func (w *answerWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	w.release()
}

// release gives back the holds of the answers written; the stream's end calls it too, in
// case the last write was never flushed.
func (w *answerWriter) release() {
	for _, rel := range w.pending {
		rel.run()
	}
	w.pending = w.pending[:0]
}

func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// statusWriter notes the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
