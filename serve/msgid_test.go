package serve

import (
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
