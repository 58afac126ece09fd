package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/airlock-mcp/airlock/internal/rawio"
)

// StdioOptions tune the stdio transport.
type StdioOptions struct {
	// MaxLine is the largest message accepted; a longer line gets an error response and
	// is skipped, so one huge request can neither crash nor wedge the server.
	MaxLine int
	// MaxInFlight bounds concurrently handled requests; beyond it a request gets an
	// immediate "busy" error instead of waiting unseen.
	MaxInFlight int
	// Grace bounds how long in-flight calls may take to finish after stdin closes or the
	// server is told to stop (their contexts are cancelled first).
	Grace time.Duration
	Log   *slog.Logger
}

// Stdio serves newline-delimited JSON-RPC on in/out until in reaches EOF or ctx ends.
//
// It replaces mcp-go's ServeStdio for two reasons: that one writes a call's progress
// notifications from a separate goroutine, so they can arrive after the result (strict
// clients then drop the connection), and its fixed 5-worker pool would silently cap
// parallel runs below the configured concurrency. Here every response is written under
// one mutex right after draining the notifications queued before it.
func Stdio(ctx context.Context, s *server.MCPServer, in io.Reader, out io.Writer, opt StdioOptions) error {
	if opt.MaxLine <= 0 {
		opt.MaxLine = 16 << 20
	}
	if opt.MaxInFlight <= 0 {
		opt.MaxInFlight = 256
	}
	if opt.Grace <= 0 {
		opt.Grace = 5 * time.Second
	}
	log := opt.Log
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "stdio")

	sess := &session{id: "stdio", ch: make(chan mcp.JSONRPCNotification, 1024)}
	callCtx, cancelCalls := context.WithCancel(ctx)
	defer cancelCalls()
	if err := s.RegisterSession(callCtx, sess); err != nil {
		return fmt.Errorf("register stdio session: %w", err)
	}
	defer s.UnregisterSession(context.Background(), sess.id)
	callCtx = s.WithContext(callCtx, sess)

	w := &writer{out: bufio.NewWriter(out), sess: sess, inflight: map[string]bool{}, cancelled: map[string]bool{},
		busy: make(chan struct{}, 1), log: log}
	tickDone := make(chan struct{})
	go w.tick(tickDone)
	defer close(tickDone)

	if f, ok := in.(*os.File); ok {
		if polled := pollable(f); polled != nil {
			defer polled.Close()
			in = polled
			// Plain read(2)s (internal/rawio): the request's read no longer wakes the
			// runtime's sysmon thread, which then polled through the ≈ 0.2 ms of JSON
			// and tool work before the call's first system call.
			if r, err := rawio.NewReader(polled); err == nil {
				in = r
			}
		}
	}
	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		readErr <- readLines(in, opt.MaxLine, lines, func(n int, id json.RawMessage) {
			log.Warn("message too large", "bytes", n, "limit", opt.MaxLine, "id", string(id))
			if id == nil {
				// A notification, or no id to be found: a null id would match no request
				// and makes some clients drop the session, so nothing is answered.
				return
			}
			w.emit(nil, errorResponse(id, mcp.INVALID_REQUEST,
				fmt.Sprintf("message too large: %d bytes, the limit is %d", n, opt.MaxLine)))
		})
	}()

	var wg sync.WaitGroup
	var inflight atomic.Int64
	// The duplicate ids are refused by w (running), which frees an id as its answer is
	// written; own only holds the cancellations.
	own := newOwnCalls()
	stop := func() {
		cancelCalls()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(opt.Grace):
			log.Warn("calls still running after the grace period", "inflight", inflight.Load())
		}
		w.flush()
	}
	for {
		select {
		case <-ctx.Done():
			stop()
			return nil
		case err := <-readErr:
			stop()
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("read stdin: %w", err)
			}
			return nil
		case line := <-lines:
			id, method, isRequest, cancelled, token := peek(line)
			progress := len(token) > 0 && string(token) != "null"
			if why := textError(line); why != "" {
				if isRequest {
					w.emit(nil, errorResponse(id, mcp.PARSE_ERROR, why))
				}
				continue
			}
			if name, first, dup := duplicateMember(line); dup {
				// What mcp-go would read differs from what a client shows (duplicateMember).
				if isRequest {
					w.emit(nil, errorResponse(id, mcp.INVALID_REQUEST, duplicateError(name, first)))
				}
				continue
			}
			if why := badEnvelope(line, id, method); why != "" {
				w.emit(nil, errorResponse(nil, mcp.INVALID_REQUEST, why))
				continue
			}
			if !isRequest && method == string(mcp.MethodNotificationCancelled) {
				// Applied here, not by mcp-go, whose key makes "7" and 7 one request
				// (see ownCalls).
				w.markCancelled(cancelled)
				own.cancel(callKey{id: cancelled})
				continue
			}
			if !isRequest {
				// Notifications (cancellation above all) are handled inline so that a
				// pool full of long calls can never delay them.
				if resp := s.HandleMessage(callCtx, line); resp != nil {
					w.emit(nil, resp)
				}
				continue
			}
			if why := tokenError(len(token)); why != "" {
				w.emit(nil, errorResponse(id, mcp.INVALID_PARAMS, why))
				continue
			}
			if len(id) > 0 && w.running(id) {
				// JSON-RPC forbids reusing an id in flight. Taken, the two calls shared
				// one entry of mcp-go's cancellations: the first to end removed the
				// other's, which no notifications/cancelled could end after that.
				w.emit(nil, errorResponse(id, mcp.INVALID_REQUEST, idInUse(id)))
				continue
			}
			if method == string(mcp.MethodInitialize) {
				// Answered before the next line is read: a client that sends its first
				// requests right behind initialize finds the session initialized
				// (beforeInitialize), and the handshake runs no code.
				w.begin(id, false)
				w.emit(id, s.HandleMessage(callCtx, line))
				continue
			}
			if inflight.Add(1) > int64(opt.MaxInFlight) {
				inflight.Add(-1)
				w.emit(nil, errorResponse(id, mcp.INTERNAL_ERROR,
					fmt.Sprintf("server busy: %d requests in flight; retry later", opt.MaxInFlight)))
				continue
			}
			w.begin(id, progress)
			// Registered before the next line is read: a cancellation right behind the
			// request finds it.
			rctx, cancel := context.WithCancel(callCtx)
			done, _ := own.add(callKey{id: idKey(id)}, cancel, false)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer inflight.Add(-1)
				defer done()
				defer cancel()
				growStack()
				w.emit(id, s.HandleMessage(rctx, line))
			}()
		}
	}
}

// pollable reopens a pipe the server reads its requests from as a second, non-blocking
// open file of the same pipe, read through the runtime's poller; nil if f is not a pipe
// or cannot be reopened (no /proc). Read as a plain blocking file, the reader went back
// into read(2) after every request holding the server's only P (GOMAXPROCS), which the
// runtime's sysmon then had to take back and hand to another thread: a retake, a
// thread's wake-up and its spinning per request. The pipe's own open file, which the
// client may share, keeps its flags.
func pollable(f *os.File) *os.File {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	var fd uintptr
	if err := rc.Control(func(d uintptr) { fd = d }); err != nil {
		return nil
	}
	g, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(int(fd)), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	return g
}

// peek reads just enough of a message to route it: its id (nil for notifications), its
// method, for notifications/cancelled the cancelled request's id (idKey), and its progress token
// as sent (it asks for progress notifications).
func peek(line []byte) (id json.RawMessage, method string, isRequest bool, cancelled string, token json.RawMessage) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
			Meta      struct {
				ProgressToken json.RawMessage `json:"progressToken"`
			} `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		// Let mcp-go answer the parse error like any request.
		return nil, "", true, "", nil
	}
	if m.Method == string(mcp.MethodNotificationCancelled) {
		cancelled = idKey(m.Params.RequestID)
	}
	return m.ID, m.Method, len(m.ID) > 0 && string(m.ID) != "null", cancelled, bytes.TrimSpace(m.Params.Meta.ProgressToken)
}

func errorResponse(id json.RawMessage, code int, msg string) any {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}}
}

// readLines splits in into lines of at most max bytes. A longer line is consumed to its
// end without being kept and reported through tooLong with its size and its id.
func readLines(in io.Reader, max int, out chan<- []byte, tooLong func(n int, id json.RawMessage)) error {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		var line []byte
		var ids *idScanner
		n, over := 0, false
		for {
			chunk, err := r.ReadSlice('\n')
			n += len(chunk)
			switch {
			case over:
				_, _ = ids.Write(chunk)
			case n > max:
				over, ids = true, &idScanner{}
				_, _ = ids.Write(line)
				_, _ = ids.Write(chunk)
				line = nil
			default:
				line = append(line, chunk...)
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if err != nil {
				if len(bytes.TrimSpace(line)) > 0 && !over {
					out <- line
				}
				return err
			}
			break
		}
		switch {
		case over:
			tooLong(n, ids.ID())
		case len(bytes.TrimSpace(line)) > 0:
			out <- line
			// Where stdin is not on the poller (a socket), the next read blocks in
			// read(2), and with one P (serve.LimitProcs on a small host) a goroutine
			// blocked in a system call keeps it until sysmon takes it back: the
			// request just handed over waited 100-150 µs for that before its handler
			// ran. Yielding first lets the dispatch and the handler run up to their
			// first wait while this goroutine is off the P.
			runtime.Gosched()
		}
	}
}

// writer serialises everything written to stdout.
type writer struct {
	mu   sync.Mutex
	out  *bufio.Writer
	sess *session
	// inflight holds the requests being handled, each with whether it asked for
	// progress (tick sends those notifications); progressing counts the ones that did.
	inflight    map[string]bool
	progressing int
	cancelled   map[string]bool
	busy        chan struct{} // a request began: tick until none is in flight
	log         *slog.Logger
}

// begin records a request being handled; one that asked for progress wakes the ticker.
func (w *writer) begin(id json.RawMessage, progress bool) {
	key := idKey(id)
	w.mu.Lock()
	if _, dup := w.inflight[key]; !dup {
		w.inflight[key] = progress
		if progress {
			w.progressing++
		}
	}
	w.mu.Unlock()
	if !progress {
		return
	}
	select {
	case w.busy <- struct{}{}: // wake the ticker
	default:
	}
}

// running reports whether a request with this id is being handled.
func (w *writer) running(id json.RawMessage) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.inflight[idKey(id)]
	return ok
}

// markCancelled remembers a cancellation only for a request still running, so ids of
// finished or unknown requests cannot pile up.
func (w *writer) markCancelled(id string) {
	w.mu.Lock()
	if _, ok := w.inflight[id]; ok {
		w.cancelled[id] = true
	}
	w.mu.Unlock()
}

// emit drains the notifications queued so far, then writes msg. A response to a request
// the client cancelled is dropped: on stdio the spec forbids answering it.
func (w *writer) emit(id json.RawMessage, msg any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drainLocked()
	if msg == nil {
		return
	}
	if key := idKey(id); key != "" {
		if progress, ok := w.inflight[key]; ok {
			delete(w.inflight, key)
			if progress {
				w.progressing--
			}
		}
		if w.cancelled[key] {
			delete(w.cancelled, key)
			return
		}
	}
	w.writeLocked(msg)
	w.flushLocked()
}

func (w *writer) drainLocked() {
	for {
		select {
		case n := <-w.sess.ch:
			w.writeLocked(n)
		default:
			return
		}
	}
}

func (w *writer) writeLocked(msg any) {
	b, err := json.Marshal(msg)
	if err != nil {
		w.log.Error("marshal message", "err", err)
		return
	}
	b = append(b, '\n')
	if _, err := w.out.Write(b); err != nil {
		w.log.Debug("write stdout", "err", err)
	}
}

func (w *writer) flushLocked() {
	if err := w.out.Flush(); err != nil {
		w.log.Debug("flush stdout", "err", err)
	}
}

func (w *writer) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drainLocked()
	w.flushLocked()
}

// tick sends notifications that no response is about to carry: the progress of a long
// run. It takes the same mutex: draining outside it would re-create the reordering. It
// only ticks while a request that asked for progress is in flight, so neither an idle
// server nor one busy with calls that did not ask wakes up every 20 ms (under 8
// concurrent calls that was a wake-up of the server for every second call). Any other
// notification queued meanwhile goes out before the next response, as always.
func (w *writer) tick(done <-chan struct{}) {
	t := time.NewTicker(20 * time.Millisecond)
	t.Stop()
	for {
		select {
		case <-done:
			return
		case <-w.busy:
		}
		t.Reset(20 * time.Millisecond)
		for busy := true; busy; {
			select {
			case <-done:
				t.Stop()
				return
			case <-t.C:
				w.flush()
				busy = w.wantsProgress()
			}
		}
		t.Stop()
	}
}

// wantsProgress reports whether a request that asked for progress is in flight.
func (w *writer) wantsProgress() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.progressing > 0
}

// session is the single stdio client.
type session struct {
	id          string
	ch          chan mcp.JSONRPCNotification
	initialized atomic.Bool
	level       atomic.Value
}

func (s *session) SessionID() string                                   { return s.id }
func (s *session) StdioTransport()                                     {}
func (s *session) NotificationChannel() chan<- mcp.JSONRPCNotification { return s.ch }
func (s *session) Initialize()                                         { s.initialized.Store(true) }
func (s *session) Initialized() bool                                   { return s.initialized.Load() }
func (s *session) SetLogLevel(l mcp.LoggingLevel)                      { s.level.Store(l) }
func (s *session) GetLogLevel() mcp.LoggingLevel {
	if l, ok := s.level.Load().(mcp.LoggingLevel); ok {
		return l
	}
	return mcp.LoggingLevelError
}

// growStack grows the calling goroutine's stack to 32 KiB at once while it is still
// shallow. A tool call's handler goes deep (mcp-go, JSON, the runner, the sandbox), and
// a goroutine's stack starts at 8 KiB: it was grown twice per call, each time copying
// and adjusting every frame of a deep stack.
//
//go:noinline
func growStack() {
	var pad [20 << 10]byte
	keep(pad[:])
}

//go:noinline
func keep(b []byte) { b[0] = 0 }
