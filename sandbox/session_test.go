package sandbox

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

func split(key string, chunks ...string) (string, []string) {
	s := NewSplitter(key)
	var out bytes.Buffer
	var marks []string
	for _, c := range chunks {
		s.Feed([]byte(c), func(b []byte) { out.Write(b) }, func(m string) { marks = append(marks, m) })
	}
	return out.String(), marks
}

func TestSplitter(t *testing.T) {
	const key = "k1"
	m := MarkerPrefix + key + ":"
	cases := []struct {
		name  string
		in    []string
		out   string
		marks []string
	}{
		{"plain", []string{"hello\n"}, "hello\n", nil},
		{"marker after output", []string{"42\n" + m + "end:1:0\n"}, "42\n", []string{"end:1:0"}},
		{"marker without newline before it", []string{"x" + m + "end:1:0\nrest"}, "xrest", []string{"end:1:0"}},
		{"token split across chunks", []string{"a\x1eAIR", "LOCK-k1:end:2:3\n"}, "a", []string{"end:2:3"}},
		{"body split across chunks", []string{m + "end:", "2:3\n"}, "", []string{"end:2:3"}},
		{"another key is output", []string{MarkerPrefix + "k2:end:1:0\n"}, MarkerPrefix + "k2:end:1:0\n", nil},
		{"a held prefix that fails is output", []string{"\x1eAIR", "BUS\n"}, "\x1eAIRBUS\n", nil},
		{"lone separators are output", []string{"\x1e\x1e\x1e", "x"}, "\x1e\x1e\x1ex", nil},
		{"an overlong body is output", []string{m + strings.Repeat("z", 100) + "\nok"}, m + strings.Repeat("z", 100) + "\nok", nil},
		{"two markers", []string{m + "end:1:0\n" + m + "restart:exit:4\n"}, "", []string{"end:1:0", "restart:exit:4"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, marks := split(key, c.in...)
			if out != c.out || strings.Join(marks, "|") != strings.Join(c.marks, "|") {
				t.Fatalf("got %q %q, want %q %q", out, marks, c.out, c.marks)
			}
		})
	}
}

// However a stream is cut into chunks, the split is the same.
func TestSplitterChunking(t *testing.T) {
	m := MarkerPrefix + "key:"
	stream := "a\x1eb" + m + "end:1:0\nc\x1eAIRLOCK-kez:" + m + "restart:signal:9\n" + strings.Repeat("d", 50)
	want, wantMarks := split("key", stream)
	for i := 0; i < 2000; i++ {
		var chunks []string
		for rest := stream; len(rest) > 0; {
			n := 1 + rand.IntN(min(len(rest), 12))
			chunks, rest = append(chunks, rest[:n]), rest[n:]
		}
		out, marks := split("key", chunks...)
		if out != want || strings.Join(marks, "|") != strings.Join(wantMarks, "|") {
			t.Fatalf("chunks %q: got %q %q, want %q %q", chunks, out, marks, want, wantMarks)
		}
	}
	if want != "a\x1ebc\x1eAIRLOCK-kez:"+strings.Repeat("d", 50) || strings.Join(wantMarks, "|") != "end:1:0|restart:signal:9" {
		t.Fatalf("whole stream: %q %q", want, wantMarks)
	}
}
