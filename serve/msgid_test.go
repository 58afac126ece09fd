package serve

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestIDScanner(t *testing.T) {
	for _, tc := range []struct {
		name, msg, want string
	}{
		{"number first", `{"id":42,"jsonrpc":"2.0","method":"tools/call"`, "42"},
		{"string first", `{"jsonrpc":"2.0", "id" : "a,b}" ,"method":"x"}`, `"a,b}"`},
		{"last, after params", `{"method":"tools/call","params":{"arguments":{"code":"x"}},"jsonrpc":"2.0","id":9}`, "9"},
		{"nested ids are not the message's", `{"params":{"id":1,"a":[{"id":2}]},"id":3}`, "3"},
		{"an id inside a string", `{"params":{"code":"\"id\":5,"},"id":"real"}`, `"real"`},
		{"escaped quote in a string", `{"params":{"code":"\\\"},\"id\":6"},"id":7}`, "7"},
		{"a key that only starts with id", `{"idx":1,"method":"m"}`, ""},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, ""},
		{"null id", `{"id":null,"method":"m"}`, ""},
		{"object id", `{"id":{"a":1},"method":"m"}`, ""},
		{"batch", `[{"id":1}]`, ""},
		{"cut before the id ends", `{"method":"m","id":12`, ""},
		{"not JSON", `hello "id":1}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s idScanner
			// Byte by byte: the scanner sees a line in whatever pieces the reader returns.
			for i := range len(tc.msg) {
				_, _ = s.Write([]byte{tc.msg[i]})
			}
			if got := string(s.ID()); got != tc.want {
				t.Errorf("id = %q, want %q", got, tc.want)
			}
		})
	}
	var s idScanner
	_, _ = s.Write([]byte(`{"id":"` + strings.Repeat("x", 1000) + `"}`))
	if s.ID() != nil {
		t.Errorf("a 1000-byte id was taken: %.40s", s.ID())
	}
}

// FuzzIDScanner checks the scanner against encoding/json on valid messages, fed in
// pieces of every size: where a message has one top-level "id" that is a string or a
// number, the scanner finds exactly it; otherwise it finds nothing.
func FuzzIDScanner(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"method":"tools/call","params":{"arguments":{"code":"\"id\":2}"}},"id":"x y"}`,
		`{"params":{"id":1,"list":[{"id":2},[3,"}"]]},"id":-1.5e3}`,
		`{"id":null}`, `{"id":[1]}`, `{"idx":1}`, `[{"id":1}]`, `{"a":"\\","id":true}`,
	} {
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, msg []byte, piece uint8) {
		var s idScanner
		step := int(piece%16) + 1
		for i := 0; i < len(msg); i += step {
			_, _ = s.Write(msg[i:min(i+step, len(msg))])
		}
		want, ok := topLevelID(msg)
		if !ok {
			return // not a JSON object with unique, plainly written keys: no claim
		}
		if string(s.ID()) != string(want) {
			t.Fatalf("id %q, want %q in %q", s.ID(), want, msg)
		}
	})
}

// topLevelID is the message's "id" as encoding/json reads it (nil unless a string or a
// number of at most maxID bytes), and false when the message is not an object whose keys
// are unique and written without escapes (where a byte scanner and a decoder may differ
// on purpose).
func topLevelID(msg []byte) (json.RawMessage, bool) {
	if !json.Valid(msg) || bytes.Contains(msg, []byte(`\`)) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(msg))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	seen := map[string]bool{}
	var id json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := tok.(string)
		if seen[key] {
			return nil, false
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		if key == "id" && len(v) <= maxID && (v[0] == '"' || v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) {
			id = v
		}
	}
	return id, true
}
