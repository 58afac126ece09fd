package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/runner/runnertest"
	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/tools"
)

// gates make a fake sandbox hold each call whose code (trimmed) names an open gate until
// the gate is opened; any other code echoes at once.
type gates struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

func newGates(names ...string) *gates {
	g := &gates{m: map[string]chan struct{}{}}
	for _, n := range names {
		g.m[n] = make(chan struct{})
	}
	return g
}

func (g *gates) open(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.m[name])
	delete(g.m, name)
}

func (g *gates) deps(parallel int) tools.Deps {
	return fakeDeps(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
		g.mu.Lock()
		ch := g.m[strings.TrimSpace(string(s.Code))]
		g.mu.Unlock()
		if ch != nil {
			select {
			case <-ch:
			case <-ctx.Done():
				return runnertest.Block(ctx, s)
			}
		}
		return runnertest.Echo(ctx, s)
	}, parallel)
}

// callID is a run_code request with id written as given (raw JSON) and its code padded to
// at least pad bytes of body.
func callID(id, code string, pad int) string {
	b := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"%s"}}}`, id, code)
	if n := pad - len(b); n > 0 {
		b = strings.Replace(b, `"code":"`+code, `"code":"`+code+strings.Repeat(" ", n), 1)
	}
	return b
}

// sseClient is a raw legacy SSE stream: the endpoint to post to and its events' data.
type sseClient struct {
	endpoint string
	events   chan map[string]any
	close    func()
}

func dialSSE(t *testing.T, base string, hdr map[string]string) *sseClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/sse", nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	c := &sseClient{events: make(chan map[string]any, 64), close: func() { cancel(); resp.Body.Close() }}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(data, "sessionId=") {
			c.endpoint = strings.TrimSpace(data)
			break
		}
	}
	if c.endpoint == "" {
		t.Fatalf("GET /sse: %d, no endpoint event", resp.StatusCode)
	}
	go func() {
		defer close(c.events)
		for sc.Scan() {
			var m map[string]any
			if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok && json.Unmarshal([]byte(data), &m) == nil {
				c.events <- m
			}
		}
	}()
	t.Cleanup(c.close)
	// The handshake first: a call before initialize is refused (beforeInitialize).
	init := strings.Replace(initBody, `"id":1`, `"id":"init"`, 1)
	if r := do(t, http.MethodPost, c.endpoint, init, hdr); r.code != http.StatusAccepted {
		t.Fatalf("initialize: %d %s", r.code, r.body)
	}
	if m := c.next(5 * time.Second); m == nil || m["id"] != "init" || m["result"] == nil {
		t.Fatalf("initialize's answer: %v", m)
	}
	return c
}

// next is the stream's next event, or nil when none comes within d.
func (c *sseClient) next(d time.Duration) map[string]any {
	select {
	case m := <-c.events:
		return m
	case <-time.After(d):
		return nil
	}
}

// settled waits until nothing is held: a dialed stream's initialize gives its hold back
// just after its answer is flushed, which the client may read first.
func settled(t *testing.T, st *State, b *bodyBudget) {
	t.Helper()
	waitFor(t, "initialize's hold given back", func() bool { held, _ := b.heldNow(); return held == 0 && st.InFlight() == 0 })
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (b *bodyBudget) heldNow() (int64, map[string]int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	each := map[string]int64{}
	for k, v := range b.each {
		each[k] = v
	}
	return b.held, each
}

// sseServer serves the SSE transport with a ready State and a budget the test reads.
func sseServer(t *testing.T, d tools.Deps, opt HTTPOptions) (*State, *bodyBudget, string) {
	t.Helper()
	st := NewState()
	st.SetReady()
	opt.SSE, opt.State, opt.MaxBodyBytes = true, st, 4096
	opt.bodies = &bodyBudget{max: bodyBudgetBodies * opt.MaxBodyBytes, each: map[string]int64{}}
	ts := httpServer(t, d, opt)
	return st, opt.bodies, ts.URL
}

// A drain (SIGTERM) waits for a call posted to an SSE stream, and its answer reaches the
// client before the server stops: with the call counted out at its 202, the drain found
// nothing in flight and cancelled it with the stream.
func TestSSEDrainWaitsForTheAnswer(t *testing.T) {
	g := newGates("slow")
	d := g.deps(2)
	st, url, sigterm, served := serveDraining(t, d, HTTPOptions{SSE: true})
	c := dialSSE(t, url, nil)
	if r := do(t, http.MethodPost, c.endpoint, callID("7", "slow", 0), nil); r.code != http.StatusAccepted {
		t.Fatalf("post: %d %s", r.code, r.body)
	}
	waitFor(t, "the call to start", func() bool { return d.Runner.Limiter.Running() == 1 })
	sigterm()
	waitFor(t, "the drain", func() bool { return !st.Ready() })
	select {
	case err := <-served:
		t.Fatalf("ServeHTTP returned with an SSE call in flight: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if n := st.InFlight(); n != 1 {
		t.Errorf("in flight during the call: %d, want 1", n)
	}
	g.open("slow")
	m := c.next(5 * time.Second)
	if m == nil || m["id"] != float64(7) || !strings.Contains(fmt.Sprint(m["result"]), "status: ok") {
		t.Fatalf("the call's answer did not reach the client: %v", m)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("ServeHTTP: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeHTTP did not return after the answer was delivered")
	}
	if n := st.InFlight(); n != 0 {
		t.Errorf("in flight after the drain: %d", n)
	}
}

// The body budget holds a posted SSE call's body until its answer is on the stream: past
// the budget a post is refused (503, nothing ran), and taken again once the answers are
// delivered. With the body given back at the 202, a client piled up any number.
func TestSSEBodyBudgetHeldUntilAnswered(t *testing.T) {
	g := newGates("hold")
	d := g.deps(bodyBudgetBodies + 1)
	st, budget, base := sseServer(t, d, HTTPOptions{})
	c := dialSSE(t, base, nil)
	settled(t, st, budget) // initialize's hold comes back just after its answer is flushed
	body := func(i int) string { return callID(fmt.Sprint(i), "hold", 4000) }
	for i := range bodyBudgetBodies {
		if r := do(t, http.MethodPost, c.endpoint, body(i), nil); r.code != http.StatusAccepted {
			t.Fatalf("post %d: %d %s", i, r.code, r.body)
		}
	}
	waitFor(t, "the calls to start", func() bool { return d.Runner.Limiter.Running() == bodyBudgetBodies })
	if held, _ := budget.heldNow(); held != int64(bodyBudgetBodies*len(body(0))) {
		t.Errorf("budget held %d bytes with %d calls in flight, want %d", held, bodyBudgetBodies, bodyBudgetBodies*len(body(0)))
	}
	if r := do(t, http.MethodPost, c.endpoint, body(100), nil); r.code != http.StatusServiceUnavailable || !strings.Contains(r.body, "nothing ran") {
		t.Errorf("a post past the budget with %d calls in flight: %d %s, want 503", bodyBudgetBodies, r.code, r.body)
	}
	if n := st.InFlight(); n != bodyBudgetBodies {
		t.Errorf("in flight: %d, want %d", n, bodyBudgetBodies)
	}
	g.open("hold")
	for range bodyBudgetBodies {
		if m := c.next(5 * time.Second); m == nil || m["result"] == nil {
			t.Fatalf("answer: %v", m)
		}
	}
	waitFor(t, "the budget to be given back", func() bool { held, _ := budget.heldNow(); return held == 0 && st.InFlight() == 0 })
	if r := do(t, http.MethodPost, c.endpoint, body(101), nil); r.code != http.StatusAccepted {
		t.Errorf("a post once the answers were delivered: %d %s", r.code, r.body)
	}
	if m := c.next(5 * time.Second); m == nil || m["id"] != float64(101) {
		t.Errorf("its answer: %v", m)
	}
	waitFor(t, "nothing held", func() bool { held, _ := budget.heldNow(); return held == 0 && st.InFlight() == 0 })
}

// A stream that ends gives back everything its calls held (they are cancelled with it); a
// notification, and a client's answer to the server, hold nothing once handled.
func TestSSEStreamEndReleasesEverything(t *testing.T) {
	g := newGates("hold")
	d := g.deps(4)
	st, budget, base := sseServer(t, d, HTTPOptions{})
	c := dialSSE(t, base, nil)
	settled(t, st, budget) // initialize's hold comes back just after its answer is flushed
	for i := range 3 {
		if r := do(t, http.MethodPost, c.endpoint, callID(fmt.Sprint(i), "hold", 1000), nil); r.code != http.StatusAccepted {
			t.Fatalf("post %d: %d %s", i, r.code, r.body)
		}
	}
	for _, msg := range []string{
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":5,"result":{}}`,
		`{"jsonrpc":"2.0","id":6,"method":7}`,        // mcp-go answers these two with a null id
		`{"jsonrpc":2,"id":8,"method":"tools/list"}`, // (their decode fails)
	} {
		if r := do(t, http.MethodPost, c.endpoint, msg, nil); r.code != http.StatusAccepted {
			t.Errorf("%s: %d %s", msg, r.code, r.body)
		}
	}
	// An id of null is refused outright (badEnvelope), holding nothing either.
	if r := do(t, http.MethodPost, c.endpoint, `{"jsonrpc":"2.0","id":null,"method":"notifications/initialized"}`, nil); r.code != http.StatusBadRequest {
		t.Errorf("id null: %d %s, want 400", r.code, r.body)
	}
	waitFor(t, "the calls to start", func() bool { return d.Runner.Limiter.Running() == 3 })
	if held, _ := budget.heldNow(); held != 3*int64(len(callID("0", "hold", 1000))) || st.InFlight() != 3 {
		t.Errorf("with 3 calls in flight: %d bytes, %d in flight held; want %d, 3", held, st.InFlight(), 3*len(callID("0", "hold", 1000)))
	}
	c.close()
	waitFor(t, "everything given back", func() bool { held, _ := budget.heldNow(); return held == 0 && st.InFlight() == 0 })
	waitFor(t, "the calls to end", func() bool { return d.Runner.Limiter.Running() == 0 })
}

// An answer's id is matched to its request as mcp-go writes it: 1, 1.0, 1e0 and " 1 " are
// one id, which is in flight once per stream. So no id a client writes can give back a
// call's hold early (an oversized message's error on the stream carries the id it names),
// twice, or never.
func TestSSEAnswerIDEncodings(t *testing.T) {
	g := newGates("one", "a")
	d := g.deps(4)
	st, budget, base := sseServer(t, d, HTTPOptions{})
	c := dialSSE(t, base, nil)
	settled(t, st, budget) // initialize's hold comes back just after its answer is flushed
	if r := do(t, http.MethodPost, c.endpoint, callID("1.0", "one", 0), nil); r.code != http.StatusAccepted {
		t.Fatalf("post: %d %s", r.code, r.body)
	}
	if r := do(t, http.MethodPost, c.endpoint, callID(`"a"`, "a", 0), nil); r.code != http.StatusAccepted {
		t.Fatalf("post: %d %s", r.code, r.body)
	}
	waitFor(t, "the calls to start", func() bool { return d.Runner.Limiter.Running() == 2 })
	held, _ := budget.heldNow()
	for _, id := range []string{"1", " 1 ", "1e0", "10e-1", "1.000", `"\u0061"`, `"a"`} {
		if r := do(t, http.MethodPost, c.endpoint, callID(id, "echo", 0), nil); r.code != http.StatusConflict {
			t.Errorf("id %s while its equal is in flight: %d %s, want 409", id, r.code, r.body)
		}
	}
	// Its error would be an answer on the stream with id 1: it goes in the 413 instead.
	big := callID("1", "echo", 8000)
	if r := do(t, http.MethodPost, c.endpoint, big, nil); r.code != http.StatusRequestEntityTooLarge || !strings.Contains(r.body, "message too large") {
		t.Errorf("an oversized message with id 1 while 1.0 is in flight: %d %.200s, want 413", r.code, r.body)
	}
	for _, bad := range []string{"true", `{"a":1}`, "[1]", `"` + strings.Repeat("x", 300) + `"`} {
		if r := do(t, http.MethodPost, c.endpoint, callID(bad, "echo", 0), nil); r.code != http.StatusBadRequest || !strings.Contains(r.body, "invalid request") {
			t.Errorf("id %.20s: %d %s, want 400 (invalid request)", bad, r.code, r.body)
		}
	}
	if now, _ := budget.heldNow(); now != held || st.InFlight() != 2 {
		t.Errorf("after the refused posts: %d bytes, %d in flight held; want %d, 2", now, st.InFlight(), held)
	}
	if m := c.next(200 * time.Millisecond); m != nil {
		t.Errorf("an event on the stream before any call ended: %v", m)
	}
	g.open("one")
	if m := c.next(5 * time.Second); m == nil || m["id"] != float64(1) || m["result"] == nil {
		t.Fatalf("the answer to 1.0: %v", m)
	}
	waitFor(t, "1.0's hold given back", func() bool { return st.InFlight() == 1 })
	g.open("a")
	if m := c.next(5 * time.Second); m == nil || m["id"] != "a" {
		t.Fatalf("the answer to \"a\": %v", m)
	}
	waitFor(t, "nothing held", func() bool { held, _ := budget.heldNow(); return held == 0 && st.InFlight() == 0 })
	// Once answered, an id may be used again; an oversized message's error then comes on
	// the stream, and holds its id until it is written.
	if r := do(t, http.MethodPost, c.endpoint, callID("1e0", "echo", 0), nil); r.code != http.StatusAccepted {
		t.Errorf("id 1e0 after 1.0 was answered: %d %s", r.code, r.body)
	}
	if m := c.next(5 * time.Second); m == nil || m["id"] != float64(1) {
		t.Errorf("its answer: %v", m)
	}
	if r := do(t, http.MethodPost, c.endpoint, big, nil); r.code != http.StatusAccepted {
		t.Errorf("an oversized message with no call of its id in flight: %d %s, want 202", r.code, r.body)
	}
	if m := c.next(5 * time.Second); m == nil || m["id"] != float64(1) || m["error"] == nil {
		t.Errorf("its error: %v", m)
	}
	waitFor(t, "nothing held", func() bool { held, _ := budget.heldNow(); return held == 0 && st.InFlight() == 0 })
	time.Sleep(50 * time.Millisecond)
	if held, _ := budget.heldNow(); held != 0 || st.InFlight() != 0 {
		t.Errorf("at the end: %d bytes, %d in flight held; want 0, 0 (a double release goes below)", held, st.InFlight())
	}
}

// Two clients at once, each with its own stream and the same ids: one's answer gives
// back only its own call's hold.
func TestSSETwoClientsHoldTheirOwn(t *testing.T) {
	g := newGates("alice", "bob")
	d := g.deps(4)
	st, budget, base := sseServer(t, d, HTTPOptions{Clients: aliceAndBob(t)})
	alice := map[string]string{"Authorization": "Bearer aaaaaaaaaaaaaaaaaaaa"}
	bob := map[string]string{"Authorization": "Bearer bbbbbbbbbbbbbbbbbbbb"}
	ca, cb := dialSSE(t, base, alice), dialSSE(t, base, bob)
	settled(t, st, budget) // initialize's hold comes back just after its answer is flushed
	aliceBody, bobBody := callID("1", "alice", 2000), callID("1", "bob", 1500)
	if r := do(t, http.MethodPost, ca.endpoint, aliceBody, alice); r.code != http.StatusAccepted {
		t.Fatalf("alice: %d %s", r.code, r.body)
	}
	if r := do(t, http.MethodPost, cb.endpoint, bobBody, bob); r.code != http.StatusAccepted {
		t.Fatalf("bob: %d %s", r.code, r.body)
	}
	waitFor(t, "both calls to start", func() bool { return d.Runner.Limiter.Running() == 2 })
	if _, each := budget.heldNow(); each["alice"] != int64(len(aliceBody)) || each["bob"] != int64(len(bobBody)) || st.InFlight() != 2 {
		t.Errorf("both in flight: %v, %d in flight", each, st.InFlight())
	}
	g.open("bob")
	if m := cb.next(5 * time.Second); m == nil || m["id"] != float64(1) {
		t.Fatalf("bob's answer: %v", m)
	}
	waitFor(t, "bob's hold given back", func() bool { _, each := budget.heldNow(); return each["bob"] == 0 })
	if held, each := budget.heldNow(); held != int64(len(aliceBody)) || each["alice"] != int64(len(aliceBody)) || st.InFlight() != 1 {
		t.Errorf("after bob's answer: %d bytes %v, %d in flight; want alice's %d, 1", held, each, st.InFlight(), len(aliceBody))
	}
	if m := ca.next(100 * time.Millisecond); m != nil {
		t.Errorf("alice's stream got bob's answer: %v", m)
	}
	g.open("alice")
	if m := ca.next(5 * time.Second); m == nil || m["id"] != float64(1) {
		t.Fatalf("alice's answer: %v", m)
	}
	waitFor(t, "nothing held", func() bool { held, _ := budget.heldNow(); return held == 0 && st.InFlight() == 0 })
}

// The stream's parse finds an answer's id in events cut anywhere, and only in answers.
func TestAnswerWriterFindsAnswers(t *testing.T) {
	stream := "event: endpoint\ndata: /message?sessionId=x\r\n\r\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"id\":4}}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"id\":6,\"content\":\"\\n\\n\"}}\n\n" +
		"event: message\ndata: {\"error\":{\"code\":1},\"id\":\"x\",\"jsonrpc\":\"2.0\"}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\ndata: \"id\":7,\"result\":{}}\n\n"
	for _, step := range []int{1, 2, 3, 7, len(stream)} {
		a := newSSEAnswers()
		var got []string
		for _, k := range []string{"3", "4", "5", "6", `"x"`, "7"} {
			rel := &release{}
			k := k
			rel.add(func() { got = append(got, k) })
			a.hold(k, rel)
		}
		w := newAnswerWriter(httptest.NewRecorder(), a.answered)
		for i := 0; i < len(stream); i += step {
			_, _ = w.Write([]byte(stream[i:min(i+step, len(stream))]))
		}
		if len(got) != 0 {
			t.Errorf("step %d: released before the flush: %v", step, got)
		}
		w.Flush()
		if fmt.Sprint(got) != `[5 "x" 7]` {
			t.Errorf("step %d: released %v, want [5 \"x\" 7]", step, got)
		}
	}
}

// BenchmarkAnswerWriter is the stream's parse of a 1 MiB answer's event against the same
// write without it (io.Discard): the scan stops at the answer's "result", and the rest is
// a newline search.
func BenchmarkAnswerWriter(b *testing.B) {
	event := []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":12,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"" +
		strings.Repeat("x", 1<<20) + "\"}]}}\n\n")
	for _, parse := range []bool{false, true} {
		b.Run(fmt.Sprintf("parse=%t", parse), func(b *testing.B) {
			b.SetBytes(int64(len(event)))
			a := newSSEAnswers()
			var w http.ResponseWriter = discardWriter{httptest.NewRecorder()}
			if parse {
				w = newAnswerWriter(w, a.answered)
			}
			for b.Loop() {
				a.hold("12", &release{})
				_, _ = w.Write(event)
				w.(http.Flusher).Flush()
				a.answered("12")
			}
		})
	}
}

// BenchmarkBodyAnswerWriter is a session POST's parse of its 1 MiB JSON answer (what
// frees its id) against the same write without it: the scan stops at the "result".
func BenchmarkBodyAnswerWriter(b *testing.B) {
	answer := []byte("{\"jsonrpc\":\"2.0\",\"id\":12,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"" +
		strings.Repeat("x", 1<<20) + "\"}]}}\n")
	for _, parse := range []bool{false, true} {
		b.Run(fmt.Sprintf("parse=%t", parse), func(b *testing.B) {
			b.SetBytes(int64(len(answer)))
			rec := discardWriter{httptest.NewRecorder()}
			rec.Header().Set("Content-Type", "application/json")
			freed := 0
			for b.Loop() {
				var w http.ResponseWriter = rec
				if parse {
					w = newBodyAnswerWriter(rec, func(string) *release { freed++; return nil })
				}
				_, _ = w.Write(answer)
			}
			if parse && freed == 0 {
				b.Fatal("the answer was not told")
			}
		})
	}
}

// discardWriter drops what is written to it.
type discardWriter struct{ *httptest.ResponseRecorder }

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkAnswerOf is what finding a posted 1 MiB call's answer id costs beside
// message's decode, which every posted message pays: nothing, but for partial messages.
func BenchmarkAnswerOf(b *testing.B) {
	raw := []byte(callID("12", "x", 1<<20))
	r := httptest.NewRequest(http.MethodPost, "/message", nil)
	r.Body = body{nil, raw}
	for _, partial := range []bool{false, true} {
		b.Run(fmt.Sprintf("message+answerOf/partial=%t", partial), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				msg := message(r)
				msg.partial = partial // the second decode, taken only for partial messages
				if key, _ := answerOf(msg, raw); key != "12" {
					b.Fatal(key)
				}
			}
		})
	}
}
