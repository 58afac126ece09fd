package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/airlock-mcp/airlock/runner"
	"github.com/airlock-mcp/airlock/runner/runnertest"
)

func TestDuplicateMember(t *testing.T) {
	for _, tc := range []struct {
		msg, name string
	}{
		{`{"a":1,"b":2}`, ""},
		{`{"a":1,"a":2}`, "a"},
		{`{"code":"x","Code":"y"}`, "Code"},
		{`{"params":{"name":"get_config","NAME":"run_code"}}`, "NAME"},
		{`{"params":{"arguments":{"files":[{"path":"a","Path":"b"}]}}}`, "Path"},
		{"{\"session\":\"a\",\"\u017Fession\":\"b\"}", "\u017Fession"}, // long s folds to s
		{"{\"kind\":1,\"\u212Aind\":2}", "\u212Aind"},                  // Kelvin sign folds to k
		{`{"a":{"b":1},"b":2,"c":[{"a":1},{"a":2}]}`, ""},              // one per object
		{`{"a":"b","b":"a"}`, ""},                                      // values are not names
		{`[{"x":1},{"x":1}]`, ""},
		{`{"a":[1,{"a":1}],"a":0}`, "a"},
		{`{"a":1e400,"a":2}`, "a"},
		{`{"a\u0062":1,"ab":2}`, "ab"},       // an escaped name
		{`{"a":"x\"y\\","a\\":1,"b":2}`, ""}, // escapes inside strings
		{`{"x":"{\"a\":1,\"a\":2}"}`, ""},    // JSON inside a string
		{`{"\u00e9":1,"\u00c9":2}`, "\u00c9"},
		{`not json`, ""},
		{`{"a":1,`, ""},
	} {
		name, _, ok := duplicateMember([]byte(tc.msg))
		if ok != (tc.name != "") || name != tc.name {
			t.Errorf("%s: %q %t, want %q", tc.msg, name, ok, tc.name)
		}
	}
	if _, _, ok := duplicateMember([]byte(`{"code":"` + strings.Repeat("a", 1<<20) + `"}`)); ok {
		t.Error("a long value")
	}
	// An object of many names, past the linear scan; a repeat past it is found.
	var many []string
	for i := range 1000 {
		many = append(many, fmt.Sprintf(`"k%d":%d`, i, i))
	}
	if name, _, ok := duplicateMember([]byte("{" + strings.Join(many, ",") + "}")); ok {
		t.Errorf("1000 distinct names: %q", name)
	}
	if name, first, ok := duplicateMember([]byte("{" + strings.Join(many, ",") + `,"K17":0}`)); !ok || name != "K17" || first != "k17" {
		t.Errorf("a repeat after 1000 names: %q %q %t", name, first, ok)
	}
}

// A message nested past encoding/json's limit is not scanned on: each level cost the
// scan a frame, and a 16 MiB line of '[' allocated 2.2 GB. Up to the limit, where the
// decoders still read the message, a repeat is still found.
func TestDuplicateMemberDepth(t *testing.T) {
	nest := func(depth int, inner string) []byte {
		return []byte(strings.Repeat("[", depth-1) + inner + strings.Repeat("]", depth-1))
	}
	if msg := nest(maxDepth, `{"a":1,"A":2}`); !json.Valid(msg) {
		t.Fatal("encoding/json refuses a message at maxDepth: the limit is not its limit")
	} else if name, _, ok := duplicateMember(msg); !ok || name != "A" {
		t.Errorf("a repeat at depth %d: %q %t", maxDepth, name, ok)
	}
	if json.Valid(nest(maxDepth+1, `{"a":1}`)) {
		t.Fatal("encoding/json accepts a message past maxDepth: a repeat there would reach mcp-go")
	}
	deep := append([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":`), bytes.Repeat([]byte("["), 16<<20)...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	duplicateMember(deep)
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
		t.Errorf("a 16 MiB line of '[' allocated %d MB", n>>20)
	}
}

func TestLoneSurrogate(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{`{"code":"print(1)"}`, ""},
		{`{"code":"\ud800"}`, `\ud800`},
		{`{"code":"a\uDC00b"}`, `\uDC00`},
		{`{"code":"\ud83d\ude00"}`, ""},             // a pair: U+1F600
		{`{"code":"\uD83D\uDE00\ud83d"}`, `\ud83d`}, // a pair, then half of one
		{`{"code":"\ude00\ud83d"}`, `\ude00`},       // halves in the wrong order
		{`{"code":"\ud83d\u0041"}`, `\ud83d`},       // a high half, then no low one
		{`{"code":"\ud83d\n\ude00"}`, `\ud83d`},     // not adjacent
		{`{"code":"\\ud800"}`, ""},                  // an escaped backslash, then text
		{`{"code":"\\\ud800"}`, `\ud800`},           // an escaped backslash, then an escape
		{`{"code":"\u00e9\n\t\"\/"}`, ""},
		{`{"code":"\ud7ff\ue000"}`, ""}, // either side of the surrogates
		{`{"code":"x\`, ""},
		{`{"code":"\ud8`, ""},
	} {
		got, ok := loneSurrogate([]byte(tc.msg))
		if ok != (tc.want != "") || got != tc.want {
			t.Errorf("%s: %q %t, want %q", tc.msg, got, ok, tc.want)
		}
		// What the check refuses is what encoding/json would change.
		var v struct{ Code string }
		if json.Unmarshal([]byte(tc.msg), &v) == nil && ok != strings.ContainsRune(v.Code, utf8.RuneError) {
			t.Errorf("%s: refused %t, but decoded %q", tc.msg, ok, v.Code)
		}
	}
}

// FuzzLoneSurrogate: on valid JSON in UTF-8 without U+FFFD of its own, loneSurrogate
// finds an escape exactly when encoding/json decodes some string, or name, to U+FFFD.
func FuzzLoneSurrogate(f *testing.F) {
	f.Add(`{"code":"\ud800"}`)
	f.Add(`{"\udc00":["\\ud800","\ud83d\ude00"]}`)
	f.Fuzz(func(t *testing.T, msg string) {
		var v any
		if !utf8.ValidString(msg) || strings.ContainsRune(msg, utf8.RuneError) ||
			strings.Contains(strings.ToLower(msg), `\ufffd`) || json.Unmarshal([]byte(msg), &v) != nil {
			return
		}
		if _, _, dup := duplicateMember([]byte(msg)); dup {
			return // the decoder kept one of the two values
		}
		_, ok := loneSurrogate([]byte(msg))
		if changed := hasRuneError(v); ok != changed {
			t.Errorf("%q: loneSurrogate %t, decoded to U+FFFD %t", msg, ok, changed)
		}
	})
}

func hasRuneError(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.ContainsRune(v, utf8.RuneError)
	case []any:
		for _, e := range v {
			if hasRuneError(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range v {
			if strings.ContainsRune(k, utf8.RuneError) || hasRuneError(e) {
				return true
			}
		}
	}
	return false
}

func FuzzFoldMatchesEqualFold(f *testing.F) {
	f.Add("code", "CODE")
	f.Add("\u017F", "s")
	f.Fuzz(func(t *testing.T, a, b string) {
		if (fold(a) == fold(b)) != strings.EqualFold(a, b) {
			t.Errorf("fold(%q)=%q fold(%q)=%q, EqualFold %t", a, fold(a), b, fold(b), strings.EqualFold(a, b))
		}
	})
}

// The smuggled calls: each reads as something harmless to a client that shows the call
// for approval (JSON.parse keeps both names) and would run the payload under
// encoding/json (the last of two names, a field matched without regard to case).
var smuggled = []string{
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"print(1)","Code":"payload"}}}`,
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_config","Name":"run_code","arguments":{"code":"payload"}}}`,
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"print(1)","code":"payload"}}}`,
	"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"run_code\",\"arguments\":{\"code\":\"print(1)\",\"stdin\":\"a\",\"\u017Ftdin\":\"payload\"}}}",
}

// On every transport a message that repeats a member name is refused with its id, and
// nothing runs.
func TestDuplicateMembersRefusedOnEveryTransport(t *testing.T) {
	d := fakeDeps(runnertest.Echo, 1)
	runs := func() int64 { return d.Runner.Sandbox.(*runnertest.Sandbox).Runs.Load() }
	p := startStdio(t, d, StdioOptions{})
	for _, m := range smuggled {
		p.send(t, m)
		got := p.recv(t)
		e, _ := got["error"].(map[string]any)
		if got["id"] != float64(7) || e == nil || !strings.Contains(fmt.Sprint(e["message"]), "appears twice") {
			t.Errorf("stdio: %s: %v", m, got)
		}
	}
	ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20, Stateless: true})
	for _, m := range smuggled {
		code, got := postJSON(t, ts.URL+"/mcp", m, nil)
		e, _ := got["error"].(map[string]any)
		if code != http.StatusBadRequest || got["id"] != float64(7) || e == nil || !strings.Contains(fmt.Sprint(e["message"]), "appears twice") {
			t.Errorf("Streamable HTTP: %s: %d %v", m, code, got)
		}
	}
	sse := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20, SSE: true})
	endpoint := openStream(t, sse.URL, nil)
	for _, m := range smuggled {
		if r := do(t, http.MethodPost, endpoint, m, nil); r.code != http.StatusBadRequest || !strings.Contains(r.body, "appears twice") {
			t.Errorf("SSE: %s: %d %s", m, r.code, r.body)
		}
	}
	if n := runs(); n != 0 {
		t.Errorf("%d smuggled calls ran", n)
	}
	// The same calls, each name once, still run.
	p.send(t, callLine(8, "print(1)", ""))
	if got := p.recv(t); got["id"] != float64(8) || got["result"] == nil {
		t.Errorf("a plain call after: %v", got)
	}
}

// BenchmarkDuplicateMember is the check's cost on a typical call and on a 1 MiB one.
func BenchmarkDuplicateMember(b *testing.B) {
	for _, n := range []int{20, 1 << 20} {
		msg := []byte(callLine(1, strings.Repeat("x", n), "tok"))
		b.Run(fmt.Sprint(len(msg)), func(b *testing.B) {
			b.SetBytes(int64(len(msg)))
			for range b.N {
				duplicateMember(msg)
			}
		})
	}
}

// FuzzDuplicateMember checks the scan against encoding/json on valid JSON: a message in
// which no object repeats a name (as duplicateMember says) decodes to a value that, encoded
// again, has as many names as the message had (none merged).
func FuzzDuplicateMember(f *testing.F) {
	for _, s := range []string{`{"a":1,"A":2}`, `{"a":[{"b":1}],"b":{"a":"\"a\""}}`, `[{"x":1},{"X":2}]`, `{"a\u0062":1,"ab":2}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		if !json.Valid([]byte(msg)) {
			return
		}
		_, _, dup := duplicateMember([]byte(msg))
		dec := json.NewDecoder(strings.NewReader(msg))
		dec.UseNumber()
		if got, want := dup, repeats(t, dec); got != want {
			t.Errorf("%q: duplicateMember %t, encoding/json's tokens say %t", msg, got, want)
		}
	})
}

// repeats reads one JSON value's tokens and reports whether an object in it repeats a
// name under strings.EqualFold: the slow, plainly correct form of duplicateMember.
func repeats(t *testing.T, dec *json.Decoder) bool {
	tok, err := dec.Token()
	if err != nil {
		t.Fatal(err)
	}
	switch tok {
	case json.Delim('['):
		dup := false
		for dec.More() {
			dup = repeats(t, dec) || dup
		}
		_, _ = dec.Token()
		return dup
	case json.Delim('{'):
		var names []string
		dup := false
		for dec.More() {
			k, _ := dec.Token()
			for _, n := range names {
				dup = dup || strings.EqualFold(n, k.(string))
			}
			names = append(names, k.(string))
			dup = repeats(t, dec) || dup
		}
		_, _ = dec.Token()
		return dup
	}
	return false
}

// Over HTTP as over stdio, a body that is not UTF-8, or escapes half of a surrogate
// pair, is refused: decoded, its bad bytes or the escape would become U+FFFD and run a
// program the client never sent.
func TestHTTPInvalidUTF8Refused(t *testing.T) {
	d := fakeDeps(runnertest.Echo, 1)
	ts := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20, Stateless: true})
	sse := httpServer(t, d, HTTPOptions{MaxBodyBytes: 1 << 20, SSE: true})
	for bytes, want := range map[string]string{"\xff\xfe": "UTF-8", `\ud800`: "surrogate"} {
		bad := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"print('` + bytes + `')"}}}`
		if code, got := postJSON(t, ts.URL+"/mcp", bad, nil); code != http.StatusBadRequest || got["id"] != float64(7) ||
			!strings.Contains(fmt.Sprint(got["error"]), want) {
			t.Errorf("Streamable HTTP, %q: %d %v", bytes, code, got)
		}
		if r := do(t, http.MethodPost, openStream(t, sse.URL, nil), bad, nil); r.code != http.StatusBadRequest || !strings.Contains(r.body, want) {
			t.Errorf("SSE, %q: %d %s", bytes, r.code, r.body)
		}
	}
	if n := d.Runner.Sandbox.(*runnertest.Sandbox).Runs.Load(); n != 0 {
		t.Errorf("%d runs of a program with its bytes replaced", n)
	}
}

// What a client names (its clientInfo, a call's language or session id) reaches the audit
// log and the log as visible text: a BiDi override or a C1 control in them would reorder
// or drive the terminal an operator reads them in (JSON escapes only C0).
func TestClientTextInAuditAndLogIsEscaped(t *testing.T) {
	d := fakeDeps(runnertest.Echo, 1)
	audit, err := runner.OpenAudit(filepath.Join(t.TempDir(), "audit.jsonl"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer audit.Close()
	d.Runner.Audit = audit
	var logs bytes.Buffer
	var mu sync.Mutex
	d.Runner.Log = slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logs}, nil))
	evil := "a\u202eb\u009b31m\u2066c\U000e0041"
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() { _ = Stdio(context.Background(), New(d), inR, outW, StdioOptions{Log: quiet}); outW.Close() }()
	defer inW.Close()
	out := bufio.NewScanner(outR)
	out.Buffer(nil, 1<<20)
	for i, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"` + evil + `","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"x","language":"` + evil + `"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"x","session":"` + evil + `"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"x"}}}`,
	} {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
		if !out.Scan() {
			t.Fatalf("no answer to message %d", i)
		}
	}
	b, err := os.ReadFile(audit.Path())
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	all := string(b) + logs.String()
	mu.Unlock()
	if strings.Count(string(b), "\n") < 3 {
		t.Fatalf("audit: %s", b)
	}
	for _, r := range []rune{0x202e, 0x9b, 0x2066, 0xe0041} {
		if strings.ContainsRune(all, r) {
			t.Errorf("the audit log or the log carries %U raw:\n%s", r, all)
		}
	}
	if !strings.Contains(string(b), `\\u202e`) {
		t.Errorf("the audit log does not show the override escaped:\n%s", b)
	}
}
