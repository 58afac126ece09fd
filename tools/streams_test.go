package tools

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/sanitize"
)

// capture is what sandbox.Capture keeps of out under a cap: the whole of it, or its
// first and last halves.
func capture(out []byte, limit int) sandbox.Stream {
	if len(out) <= limit {
		return sandbox.Stream{Head: out, Total: int64(len(out))}
	}
	h := limit / 2
	return sandbox.Stream{Head: out[:h], Tail: out[len(out)-(limit-h):], Total: int64(len(out))}
}

var markerRE = regexp.MustCompile(`\n\[\.\.\. (\d+) bytes truncated \.\.\.\]\n`)

// TestStreamTextWithinCapAsEncoded: a stream's text costs at most streamBudget (plus the
// marker) as JSON written HTML-safe, whatever the program printed; what is cut is said by
// the marker and the flag, and text that encodes as itself (or nearly) is not cut.
func TestStreamTextWithinCapAsEncoded(t *testing.T) {
	const limit = 64 << 10
	rep := func(s string, n int) []byte { return bytes.Repeat([]byte(s), n) }
	for _, tc := range []struct {
		name string
		out  []byte
		cut  bool
	}{
		{"ascii at the cap", rep("a", limit), false},
		{"ascii past the cap", rep("a", 4*limit), true},
		{"lines of eight at the cap", rep("1234567\n", limit/8), false},
		{"json at the cap", rep(`{"k": "value", "n": 12345678},`, limit/32), false},
		{"cjk at the cap", rep("漢", limit/3), false},
		{"emoji at the cap", rep("😀", limit/4), false},
		{"lt at the cap", rep("<", limit), true},
		{"lt past the cap", rep("<", 16*limit), true},
		{"amp and gt", rep("&>", limit), true},
		{"quotes and backslashes", rep(`"\`, limit/2), true},
		{"newlines", rep("\n", limit), true},
		{"carriage returns", rep("\r", limit), true},
		{"invalid bytes", rep("\xff", limit), true},
		{"truncated sequences", rep("\xe6\xbc", limit/2), true},
		{"line separators become newlines", rep("\u2028", limit/3), false},
		{"lt then ascii", append(rep("<", limit/2), rep("a", 2*limit)...), true},
		{"ascii then lt", append(rep("a", 2*limit), rep("<", limit)...), true},
		{"small lt", rep("<", 100), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := capture(tc.out, limit)
			text, cut := streamText(s, limit)
			m := markerRE.FindStringSubmatch(text)
			if got, max := jsonLen(text), streamBudget(limit)+markerRoom; got > max {
				t.Errorf("text encodes to %d bytes, more than %d for a %d-byte cap", got, max, limit)
			}
			if cut != tc.cut || (m != nil) != cut {
				t.Errorf("cut %v, marker %q; want cut %v", cut, m, tc.cut)
			}
			if !cut {
				if want := sanitize.Bytes(tc.out); text != want {
					t.Errorf("uncut text differs from the sanitized output (%d bytes, want %d)", len(text), len(want))
				}
				return
			}
			// Nothing lost silently: what is kept is the output's start and end, and the
			// marker counts the rest, in the program's bytes.
			head, tail, _ := strings.Cut(text, m[0])
			dropped, _ := strconv.Atoi(m[1])
			if len(head) == 0 || len(tail) == 0 {
				t.Errorf("kept %d bytes of head, %d of tail: both ends must show", len(head), len(tail))
			}
			if !strings.HasPrefix(sanitize.Bytes(tc.out), head) || !strings.HasSuffix(sanitize.Bytes(tc.out), tail) {
				t.Error("kept text is not the output's start and end")
			}
			if s.Total-int64(dropped) > int64(len(tc.out)) || dropped <= 0 {
				t.Errorf("marker says %d bytes dropped of %d", dropped, s.Total)
			}
		})
	}
}

// FuzzStreamText: the encoded bound holds for any bytes, cut or not.
func FuzzStreamText(f *testing.F) {
	for _, s := range []string{"<<<<", "a\xffb\r\n&", "\u2028\x1b[31m<", `"\"\\`} {
		f.Add([]byte(s), 8)
	}
	f.Fuzz(func(t *testing.T, out []byte, limit int) {
		if limit < 2 || limit > 1<<16 {
			return
		}
		s := capture(out, limit)
		text, cut := streamText(s, int64(limit))
		if got := jsonLen(text); got > streamBudget(int64(limit))+markerRoom {
			t.Fatalf("%q under a %d-byte cap: text %q encodes to %d bytes", out, limit, text, got)
		}
		if cut != strings.Contains(text, " bytes truncated ...]") && !bytes.Contains(out, []byte("bytes truncated")) {
			t.Fatalf("cut %v but marker presence differs: %q", cut, text)
		}
	})
}

// BenchmarkStreamText: plain is sanitize.Stream alone (what resultOf did before),
// budgeted adds the encoded-size check; lt is a cap of '<', cut to the budget.
func BenchmarkStreamText(b *testing.B) {
	for _, tc := range []struct {
		name string
		out  []byte
	}{
		{"lines-1KiB", bytes.Repeat([]byte("print line 42\n"), 1<<10/14)},
		{"lines-1MiB", bytes.Repeat([]byte("print line 42\n"), 1<<20/14)},
		{"lt-1MiB", bytes.Repeat([]byte("<"), 1<<20)},
	} {
		s := sandbox.Stream{Head: tc.out, Total: int64(len(tc.out))}
		b.Run(tc.name+"/plain", func(b *testing.B) {
			for b.Loop() {
				_ = sanitize.Stream(s.Head, s.Tail, s.Dropped())
			}
		})
		b.Run(tc.name+"/budgeted", func(b *testing.B) {
			for b.Loop() {
				_, _ = streamText(s, 1<<20)
			}
		})
	}
}
