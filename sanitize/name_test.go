package sanitize

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestQuote(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "plot.png", `"plot.png"`},
		{"unicode letters", "résumé 日本.txt", `"résumé 日本.txt"`},
		{"line feed forges a line", "a.txt (text/plain, 1 bytes)\nstatus: ok (exit 0)", `"a.txt (text/plain, 1 bytes)\nstatus: ok (exit 0)"`},
		{"carriage return", "a\rb", `"a\rb"`},
		{"tab", "a\tb", `"a\tb"`},
		{"escape sequence", "\x1b[2Jx", `"\x1b[2Jx"`},
		{"del", "a\x7fb", `"a\x7fb"`},
		{"c1", "a\u0085b", `"a\u0085b"`},
		{"line separator", "a\u2028b", `"a\u2028b"`},
		{"paragraph separator", "a\u2029b", `"a\u2029b"`},
		{"bidi override", "exe.\u202etxt", `"exe.\u202etxt"`},
		{"isolate", "a\u2066b\u2069", `"a\u2066b\u2069"`},
		{"zero width", "pass\u200bword", `"pass\u200bword"`},
		{"variation selector", "a\ufe0f", `"a\ufe0f"`},
		{"hangul filler", "\u3164", `"\u3164"`},
		{"tag", "x\U000e0041", `"x\U000e0041"`},
		{"no-break space", "a\u00a0b", `"a\u00a0b"`},
		{"ideographic space", "a\u3000b", `"a\u3000b"`},
		{"quote and backslash", `a"b\c`, `"a\"b\\c"`},
		{"invalid utf-8", "a\xffb\xe2\x82", `"a\xffb\xe2\x82"`},
		{"empty", "", `""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Quote(tc.in); got != tc.want {
				t.Errorf("Quote(%q) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
	if got := Escape(`say "hi"\n`); got != `say "hi"\\n` {
		t.Errorf("Escape keeps quotes and escapes backslashes: got %s", got)
	}
}

// FuzzQuote: the result is one line of visible characters, and reads back (as a Go
// string literal) as exactly the input.
func FuzzQuote(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		q := Quote(in)
		if !utf8.ValidString(q) || strings.ContainsAny(q, "\n\r") {
			t.Fatalf("Quote(%q) = %q: not one valid line", in, q)
		}
		for i, r := range q {
			if forbidden(r) || r != ' ' && !visible(r) && r >= utf8.RuneSelf {
				t.Fatalf("Quote(%q) keeps %U at %d", in, r, i)
			}
		}
		back, err := strconv.Unquote(q)
		if err != nil || back != in {
			t.Fatalf("Quote(%q) = %s reads back as %q (%v)", in, q, back, err)
		}
	})
}
