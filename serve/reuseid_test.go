package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/airlock-mcp/airlock/runner/runnertest"
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/tools"
)

// answerOn posts body and reads its response as a client that acts on an answer as soon
// as it has it does (the MCP Inspector, the SDKs on an SSE response): it returns the
// status and the first message with id want that is an answer, without waiting for the
// response's end. The rest of the body is read and closed in the background; the
// returned func waits for its end (the handler's return).
func answerOn(t *testing.T, c *http.Client, url, body string, hdr map[string]string, want string) (int, map[string]any, func()) {
	t.Helper()
	return answerOnAfter(t, c, url, body, hdr, want, nil)
}

// answerOnAfter is answerOn that closes other, when set, at the first message of an SSE
// response that is not the answer.
func answerOnAfter(t *testing.T, c *http.Client, url, body string, hdr map[string]string, want string, other chan struct{}) (int, map[string]any, func()) {
	t.Helper()
	resp, err := c.Do(mcpPost(url, body, hdr))
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	ended := make(chan struct{})
	wait := func() {
		select {
		case <-ended:
		case <-time.After(5 * time.Second):
			t.Error("the response did not end")
		}
	}
	defer func() {
		go func() { _, _ = io.Copy(io.Discard, resp.Body); resp.Body.Close(); close(ended) }()
	}()
	isAnswer := func(m map[string]any) bool {
		id, _ := json.Marshal(m["id"])
		return string(id) == want && (m["result"] != nil || m["error"] != nil) && m["method"] == nil
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m, wait
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var m map[string]any
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		switch {
		case !ok || json.Unmarshal([]byte(data), &m) != nil:
		case isAnswer(m):
			return resp.StatusCode, m, wait
		case other != nil:
			close(other)
			other = nil
		}
	}
	t.Fatalf("the SSE response ended without the answer to %s", want)
	return 0, nil, nil
}

// waitEndedWithin reports whether code's run is cancelled within d.
func (c *cancelLog) waitEndedWithin(code string, d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if c.was(code) {
			return true
		}
	}
	return c.was(code)
}

// progressing is a fake run that sends a progress notification when asked for one, and
// prints out bytes.
func progressing(out int) func(context.Context, sandbox.Spec) (sandbox.Result, error) {
	return func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
		if s.Progress != nil {
			s.Progress(sandbox.Progress{Elapsed: time.Millisecond})
		}
		r, err := runnertest.Echo(ctx, s)
		r.Stdout.Head = bytes.Repeat([]byte("x"), out)
		r.Stdout.Total = int64(out)
		return r, err
	}
}

// withProgress is sessionCall asking for progress notifications.
func withProgress(call string) string {
	return strings.Replace(call, `"params":{`, `"params":{"_meta":{"progressToken":"p"},`, 1)
}

func reuseClient(t *testing.T) *http.Client {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// TestSessionIDReusedRightAfterItsAnswer: on a stateful Streamable HTTP session a client
// may send a request with the id of one whose answer it has just read, at once. Once the
// session has had a notification (here a call's progress), mcp-go answers each request
// of it as an SSE stream and flushes the answer's event before its handler returns; the
// id was freed only then, and a client that reused it as soon as it read the answer got
// a 409 (nothing ran) in about half of 200 tries.
func TestSessionIDReusedRightAfterItsAnswer(t *testing.T) {
	d := fakeDeps(progressing(16), 4)
	ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20})
	url := ts.URL + "/mcp"
	sid := map[string]string{"Mcp-Session-Id": initSession(t, url, nil)}
	c := reuseClient(t)
	if code, m, _ := answerOn(t, c, url, withProgress(sessionCall("7", "a")), sid, "7"); code != http.StatusOK || m["result"] == nil {
		t.Fatalf("the first call: %d %v", code, m)
	}
	refused := 0
	const n = 200
	for range n {
		code, m, _ := answerOn(t, c, url, sessionCall("7", "a"), sid, "7")
		switch {
		case code == http.StatusConflict:
			refused++
		case code != http.StatusOK || m["result"] == nil:
			t.Fatalf("a call reusing id 7: %d %v", code, m)
		}
	}
	if refused > 0 {
		t.Errorf("%d of %d requests reusing the id of a request already answered were refused (409)", refused, n)
	}
}

// heldTail is Handler's Streamable HTTP chain (guard, eraCompat, calls) in front of
// mcp-go, where a request sent with the header X-Hold-Tail is held once mcp-go's handler
// returned, its answer flushed, until release is called (or the test ends): a handler
// slow to return after its answer is on the wire, as a busy host makes any.
func heldTail(t *testing.T, d tools.Deps) (url string, release func()) {
	t.Helper()
	held := make(chan struct{})
	sess := newSessions(time.Minute)
	sess.max, sess.maxEach = 16, 16
	h := server.NewStreamableHTTPServer(New(d), server.WithSessionIdManagerResolver(sess),
		server.WithSessionIdleTTL(time.Minute), server.WithEndpointPath("/mcp"), server.WithStreamableHTTPLogger(quiet))
	tail := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if r.Header.Get("X-Hold-Tail") != "" {
			_ = http.NewResponseController(w).Flush()
			<-held
		}
	})
	clients, err := NewClients("", "")
	if err != nil {
		t.Fatal(err)
	}
	opt := HTTPOptions{Clients: clients, MaxBodyBytes: 1 << 20, Log: quiet}
	ts := httptest.NewServer(guard(eraCompat(calls(tail, sess, opt)), opt, nil, nil))
	t.Cleanup(ts.Close)
	release = sync.OnceFunc(func() { close(held) })
	t.Cleanup(release) // before ts.Close, which waits for the held handlers
	return ts.URL + "/mcp", release
}

// TestSessionIDFreeOnceAnswerWritten: the id of a request is free as soon as its answer
// is written, as JSON or as an SSE event, however long its handler then takes to return:
// the request reusing it runs. The old code freed it at the handler's return, and
// refused the reuse (409) every time here.
func TestSessionIDFreeOnceAnswerWritten(t *testing.T) {
	for _, tt := range []struct {
		name     string
		progress bool // mcp-go answers as SSE once the session had a notification
	}{{"json answer", false}, {"sse answer", true}} {
		t.Run(tt.name, func(t *testing.T) {
			url, _ := heldTail(t, fakeDeps(progressing(16), 4))
			sid := map[string]string{"Mcp-Session-Id": initSession(t, url, nil)}
			c := reuseClient(t)
			if tt.progress {
				if code, m, _ := answerOn(t, c, url, withProgress(sessionCall("1", "p")), sid, "1"); code != http.StatusOK || m["result"] == nil {
					t.Fatalf("the call with progress: %d %v", code, m)
				}
			}
			held := map[string]string{"Mcp-Session-Id": sid["Mcp-Session-Id"], "X-Hold-Tail": "1"}
			code, m, _ := answerOn(t, c, url, sessionCall("7", "a"), held, "7")
			if code != http.StatusOK || m["result"] == nil {
				t.Fatalf("the first call 7: %d %v", code, m)
			}
			if code, m, _ := answerOn(t, c, url, sessionCall("7", "b"), sid, "7"); code != http.StatusOK || m["result"] == nil {
				t.Errorf("a call 7 once the first was answered, its handler not yet returned: %d %v", code, m)
			}
		})
	}
}

// TestSessionCancelAfterIDReused: with the id freed at the answer, a request may reuse it
// while the answered one's handler still runs. A cancellation of the id sent after the
// answer (too late for the first) must not end the request that reuses it next, the first
// handler's return must leave the second's cancellation in place (the first frees only
// its own entry), and a cancellation of the id then ends the second.
func TestSessionCancelAfterIDReused(t *testing.T) {
	log := &cancelLog{ended: map[string]bool{}}
	d := fakeDeps(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
		if string(s.Code) == "quick" {
			return runnertest.Echo(ctx, s)
		}
		return log.run(ctx, s)
	}, 4)
	running := func() int64 { return int64(d.Runner.Limiter.Running()) }
	url, release := heldTail(t, d)
	sid := map[string]string{"Mcp-Session-Id": initSession(t, url, nil)}
	c := reuseClient(t)
	held := map[string]string{"Mcp-Session-Id": sid["Mcp-Session-Id"], "X-Hold-Tail": "1"}
	code, m, firstEnded := answerOn(t, c, url, sessionCall("7", "quick"), held, "7")
	if code != http.StatusOK || m["result"] == nil {
		t.Fatalf("the first call 7: %d %v", code, m)
	}
	if r := do(t, http.MethodPost, url, cancelOf("7"), sid); r.code != http.StatusAccepted {
		t.Errorf("a late cancellation of 7: %d %s", r.code, r.body)
	}
	second := make(chan reply, 1)
	go func() { second <- do(t, http.MethodPost, url, sessionCall("7", "b"), sid) }()
	select {
	case r := <-second:
		t.Fatalf("the call reusing 7 while the first's handler returns: %d %s", r.code, r.body)
	default:
	}
	waitRunning(t, 1, running)
	release()
	firstEnded()
	if log.waitEndedWithin("b", 100*time.Millisecond) {
		t.Error("the call reusing 7 was ended by the late cancellation or by the first's return")
	}
	if r := do(t, http.MethodPost, url, cancelOf("7"), sid); r.code != http.StatusAccepted {
		t.Errorf("cancellation of the second 7: %d %s", r.code, r.body)
	}
	if !log.waitEnded("b") {
		t.Error("a cancellation of 7 did not end the call that reused it: the first's return took its entry")
	}
	<-second
}

// TestSessionIDInFlightRefusedAfterProgress: what the early free must never do is free an
// id before its answer: a request whose progress is on its SSE response (a message of the
// call, with no id) still holds its id, and a second request with it is refused (409)
// until the answer is written.
func TestSessionIDInFlightRefusedAfterProgress(t *testing.T) {
	open := make(chan struct{})
	d := fakeDeps(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
		if string(s.Code) == "a" {
			s.Progress(sandbox.Progress{Elapsed: time.Millisecond})
			select {
			case <-open:
			case <-ctx.Done():
				return runnertest.Block(ctx, s)
			}
		}
		return runnertest.Echo(ctx, s)
	}, 4)
	ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20})
	url := ts.URL + "/mcp"
	sid := map[string]string{"Mcp-Session-Id": initSession(t, url, nil)}
	c := reuseClient(t)
	first := make(chan map[string]any, 1)
	progressed := make(chan struct{})
	go func() {
		_, m, _ := answerOnAfter(t, c, url, withProgress(sessionCall("7", "a")), sid, "7", progressed)
		first <- m
	}()
	<-progressed
	if code, m, _ := answerOn(t, c, url, sessionCall("7", "b"), sid, "7"); code != http.StatusConflict {
		t.Errorf("a second call 7 while the first runs (its progress written): %d %v", code, m)
	}
	close(open)
	if m := <-first; m["result"] == nil {
		t.Errorf("the first call's answer: %v", m)
	}
	if code, m, _ := answerOn(t, c, url, sessionCall("7", "c"), sid, "7"); code != http.StatusOK || m["result"] == nil {
		t.Errorf("a call 7 once the first was answered: %d %v", code, m)
	}
}

// TestBodyAnswerWriterTellsTheAnswerOnly: a POST's writer tells of an answer's id, as an
// SSE event or as the JSON body, before the bytes are passed on; a notification, a
// request of the server's carrying an id (elicitation) and a body that is no JSON message
// tell nothing. Written whole or a byte at a time.
func TestBodyAnswerWriterTellsTheAnswerOnly(t *testing.T) {
	for _, tt := range []struct {
		name, ctype, body, want string
	}{
		{"json answer", "application/json", `{"jsonrpc":"2.0","id":7,"result":{"isError":false}}` + "\n", "[7]"},
		{"json error, id last", "application/json; charset=utf-8", `{"jsonrpc":"2.0","error":{"code":-32600},"id":"7"}`, `["7"]`},
		{"json request of the server's", "application/json", `{"jsonrpc":"2.0","id":7,"method":"ping"}`, "[]"},
		{"sse: progress, a server request with the id, then the answer", "text/event-stream",
			"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":1}}\n\n" +
				"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"elicitation/create\",\"params\":{}}\n\n" +
				"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7.0,\"result\":{}}\n\n", "[7]"},
		{"plain text error", "text/plain; charset=utf-8", `{"jsonrpc":"2.0","id":7,"result":{}}`, "[]"},
	} {
		for _, step := range []int{1, len(tt.body)} {
			rec := httptest.NewRecorder()
			rec.Header().Set("Content-Type", tt.ctype)
			var got []string
			w := newBodyAnswerWriter(rec, func(key string) *release {
				if rec.Body.Len() == len(tt.body) {
					t.Errorf("%s, step %d: told of %s after the answer was passed on", tt.name, step, key)
				}
				got = append(got, key)
				return nil
			})
			for i := 0; i < len(tt.body); i += step {
				_, _ = w.Write([]byte(tt.body[i:min(i+step, len(tt.body))]))
			}
			if g := fmt.Sprint(got); g != tt.want {
				t.Errorf("%s, step %d: told of %s, want %s", tt.name, step, g, tt.want)
			}
			if rec.Body.String() != tt.body {
				t.Errorf("%s, step %d: passed on %q", tt.name, step, rec.Body.String())
			}
		}
	}
}

// TestSmallIntIsAnswerKey: the fast path for counter ids gives what the decode and encode
// give, for every id it takes, and takes none they would write otherwise.
func TestSmallIntIsAnswerKey(t *testing.T) {
	ids := []string{"0", "7", "00", "07", "-1", "1.0", "1e0", "999999999999999", "9999999999999999",
		"123456789012345", "1234567890123456", "9007199254740993", `"7"`, " 7", "7 ", ""}
	for i := range 20000 {
		ids = append(ids, fmt.Sprint(uint64(i)*2654435761%1e15))
	}
	for _, id := range ids {
		var v any
		want, err := "", json.Unmarshal([]byte(id), &v)
		if err == nil {
			b, _ := json.Marshal(v)
			want = string(b)
		}
		if smallInt([]byte(id)) && (err != nil || want != id) {
			t.Errorf("smallInt(%q): the decode and encode write %q (err %v)", id, want, err)
		}
		if got, _ := answerKey(json.RawMessage(id)); err == nil && got != want {
			t.Errorf("answerKey(%q) = %q, want %q", id, got, want)
		}
	}
}
