package sanitize

import (
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// defaultIgnorable is Unicode's Default_Ignorable_Code_Point, derived here from Go's own
// unicode tables by the rule in DerivedCoreProperties.txt, independently of the
// generated table the implementation uses.
func defaultIgnorable(r rune) bool {
	switch {
	case unicode.Is(unicode.White_Space, r), 0xfff9 <= r && r <= 0xfffb, 0x13430 <= r && r <= 0x13440,
		unicode.Is(unicode.Prepended_Concatenation_Mark, r):
		return false
	}
	return unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) || unicode.Is(unicode.Cf, r) ||
		unicode.Is(unicode.Variation_Selector, r)
}

// invisibleRune is what String drops besides controls: Default_Ignorable_Code_Point and
// the other format characters but the visible Prepended_Concatenation_Mark ones (the
// interlinear annotation controls, the Egyptian hieroglyph format controls).
func invisibleRune(r rune) bool {
	return defaultIgnorable(r) || unicode.Is(unicode.Cf, r) && !unicode.Is(unicode.Prepended_Concatenation_Mark, r)
}

// forbidden is the test's own statement of what may never reach the reader as such,
// written from the Unicode tables rather than from the implementation's ranges. Two
// invisible runes may appear inside emoji (emojiContext).
func forbidden(r rune) bool {
	switch {
	case r == '\n', r == '\t':
		return false
	case unicode.Is(unicode.Cc, r): // C0, DEL, C1
		return true
	case unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r):
		return true
	}
	return invisibleRune(r)
}

// emojiContext reports whether the invisible rune at i of out is one String may keep: a
// presentation selector right after a visible character that takes one, or a joiner
// between a pictograph (skin tone, selector) and a pictograph.
func emojiContext(out string, i int) bool {
	r, n := utf8.DecodeRuneInString(out[i:])
	prev, _ := utf8.DecodeLastRuneInString(out[:i])
	next, _ := utf8.DecodeRuneInString(out[i+n:])
	switch {
	case i == 0:
		return false
	case r == 0xfe0e || r == 0xfe0f:
		return !forbidden(prev) && unicode.Is(emojiVariationBase, prev)
	case r == 0x200d:
		return (prev == 0xfe0f || unicode.Is(pictographic, prev) || unicode.Is(emojiModifier, prev)) &&
			unicode.Is(pictographic, next)
	}
	return false
}

// checkClean fails the test if out could still do harm.
func checkClean(t *testing.T, in, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("output is not valid UTF-8: in %q out %q", in, out)
	}
	for i, r := range out {
		if forbidden(r) && !emojiContext(out, i) {
			t.Fatalf("output keeps forbidden rune %U: in %q out %q", r, in, out)
		}
	}
}

// innocent reports whether String must return s unchanged: valid, no '\r', nothing
// forbidden out of an emoji.
func innocent(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for i, r := range s {
		if r == '\r' || forbidden(r) && !emojiContext(s, i) {
			return false
		}
	}
	return true
}

// TestInvisibleTable checks the table generated from the UCD against the property
// derived from Go's unicode tables, for every code point (both are Unicode 15.0).
func TestInvisibleTable(t *testing.T) {
	if unicode.Version != "15.0.0" {
		t.Logf("Go's unicode tables are %s, tables.go is from 15.0.0: regenerate (go generate ./sanitize) with a matching UCD", unicode.Version)
	}
	diff := 0
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if got, want := unicode.Is(invisible, r), invisibleRune(r); got != want {
			if diff++; diff < 10 {
				t.Errorf("%U: table says invisible=%v, Go's unicode data %v", r, got, want)
			}
		}
	}
}

func TestString(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		// C0 controls
		{"nul", "a\x00b", "ab"},
		{"bel", "a\ab", "ab"},
		{"backspace", "abc\b\b\bxyz", "abcxyz"},
		{"vertical tab", "a\vb", "ab"},
		{"form feed", "a\fb", "ab"},
		{"shift out and in", "a\x0eb\x0fc", "abc"},
		{"cancel and substitute", "a\x18b\x1ac", "abc"},
		{"unit separator", "a\x1fb", "ab"},
		{"tab kept", "a\tb", "a\tb"},
		{"newline kept", "a\nb\n", "a\nb\n"},
		// carriage return normalisation
		{"crlf", "a\r\nb\r\n", "a\nb\n"},
		{"lone cr", "10%\r20%\r", "10%\n20%\n"},
		{"cr cr lf", "a\r\r\nb", "a\n\nb"},
		{"lf cr", "a\n\rb", "a\n\nb"},
		// DEL and C1
		{"del", "a\x7fb", "ab"},
		{"c1 nel", "a\u0085b", "ab"},
		{"c1 ind and ri", "a\u0084\u008db", "ab"},
		{"c1 st alone", "a\u009cb", "ab"},
		// CSI
		{"csi sgr", "\x1b[1;31mred\x1b[0m", "red"},
		{"csi sgr truecolor", "\x1b[38;2;255;128;0;48;2;1;2;3mx", "x"},
		{"csi cursor", "a\x1b[2J\x1b[H\x1b[10;20Hb", "ab"},
		{"csi private mode", "\x1b[?1049h\x1b[?25lz", "z"},
		{"csi intermediate", "a\x1b[2 qb", "ab"},
		{"csi aborted by newline", "a\x1b[12\nb", "a\nb"},
		{"csi aborted by escape", "a\x1b[12\x1b[mb", "ab"},
		{"csi aborted by utf8", "a\x1b[1é", "aé"},
		{"csi unterminated at end", "ok\x1b[1;2", "ok"},
		{"csi body capped", "\x1b[" + strings.Repeat("1;", 40) + "x", strings.Repeat("1;", 8) + "x"},
		{"csi 8-bit", "a\u009b31mb", "ab"},
		{"csi raw 0x9b byte is invalid utf8", "a\x9b31mb", "a\uFFFD31mb"},
		// OSC
		{"osc title bel", "\x1b]0;evil title\x07text", "text"},
		{"osc title st", "\x1b]2;evil title\x1b\\text", "text"},
		{"osc 8-bit st", "\x1b]2;evil\u009ctext", "text"},
		{"osc 8-bit introducer", "a\u009d0;evil\x07b", "ab"},
		{"osc 8 hyperlink", "\x1b]8;;https://evil.example/x\x1b\\click\x1b]8;;\x1b\\", "click"},
		{"osc 52 clipboard", "x\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07y", "xy"},
		{"osc unterminated", "keep\x1b]52;c;Y3VybCBldmlsLnNo\nmore", "keep"},
		{"osc esc not st stays inside", "\x1b]0;a\x1bxb\x07c", "c"},
		{"osc raw 0x9c does not end", "\x1b]0;a\x9cb\x07c", "c"},
		// other control strings
		{"dcs", "a\x1bP1$r0m\x1b\\b", "ab"},
		{"dcs bel does not end", "a\x1bPq#0\x07b\x1b\\c", "ac"},
		{"dcs 8-bit", "a\u0090q\u009cb", "ab"},
		{"apc", "a\x1b_Gf=100;AAAA\x1b\\b", "ab"},
		{"apc 8-bit", "a\u009fpayload\u009cb", "ab"},
		{"pm", "a\x1b^privacy\x1b\\b", "ab"},
		{"pm 8-bit", "a\u009eprivacy\u009cb", "ab"},
		{"sos", "a\x1bXstring\x1b\\b", "ab"},
		{"sos 8-bit", "a\u0098string\u009cb", "ab"},
		{"dcs unterminated", "a\x1bPsecret", "a"},
		// plain ESC sequences
		{"esc reset", "a\x1bcb", "ab"},
		{"esc save cursor", "a\x1b7b\x1b8c", "abc"},
		{"esc charset", "\x1b(B\x1b[mplain", "plain"},
		{"esc decaln", "a\x1b#8b", "ab"},
		{"esc st alone", "a\x1b\\b", "ab"},
		{"esc keypad", "a\x1b=b\x1b>c", "abc"},
		{"bare esc before newline", "a\x1b\nb", "a\nb"},
		{"bare esc before utf8", "a\x1bé", "aé"},
		{"trailing esc", "done\x1b", "done"},
		{"double esc", "a\x1b\x1b[1mb", "ab"},
		// BiDi controls
		{"bidi arabic letter mark", "a\u061cb", "ab"},
		{"bidi lrm rlm", "a\u200e\u200fb", "ab"},
		{"bidi embeddings and overrides", "a\u202a\u202b\u202c\u202d\u202eb", "ab"},
		{"bidi isolates", "a\u2066\u2067\u2068\u2069b", "ab"},
		{"trojan source", "if x\u202e} \u2066{\u2069", "if x} {"},
		// zero-width and other invisible format runes
		{"zero width space", "pass\u200bword", "password"},
		{"zwnj zwj", "a\u200c\u200db", "ab"},
		{"word joiner", "a\u2060b", "ab"},
		{"invisible operators", "a\u2061\u2062\u2063\u2064b", "ab"},
		{"deprecated format", "a\u206a\u206fb", "ab"},
		{"mongolian vowel separator", "a\u180eb", "ab"},
		{"bom", "\ufeffhello", "hello"},
		{"tag characters", "hi\U000e0001\U000e0069\U000e0067\U000e007f", "hi"},
		// the rest of Default_Ignorable_Code_Point
		{"soft hyphen", "pass\u00adword", "password"},
		{"combining grapheme joiner", "a\u034fb", "ab"},
		{"hangul fillers", "a\u115f\u1160b\u3164c\uffa0d", "abcd"},
		{"khmer inherent vowels", "a\u17b4\u17b5b", "ab"},
		{"mongolian free variation selectors", "a\u180b\u180c\u180d\u180fb", "ab"},
		{"shorthand format controls", "a\U0001bca0\U0001bca3b", "ab"},
		{"musical formatting", "a\U0001d173\U0001d17ab", "ab"},
		{"unassigned ignorable", "a\ufff0\U000e0fffb", "ab"},
		{"variation selector after a letter", "a\ufe01b\ufe0fc", "abc"},
		{"supplementary variation selectors", "a\U000e0100\U000e01efb", "ab"},
		{"message hidden in selectors after an emoji", "😀" + strings.Repeat("\ufe0e\U000e0142\ufe03", 20) + ".", "😀."},
		{"message hidden after a selector base", "\u263a" + strings.Repeat("\ufe0e\U000e0142\ufe03", 20) + ".", "\u263a\ufe0e."},
		{"one emoji selector kept", "\u263a\ufe0f \u2764\ufe0e", "\u263a\ufe0f \u2764\ufe0e"},
		{"second selector dropped", "\u263a\ufe0f\ufe0f", "\u263a\ufe0f"},
		{"keycap", "#\ufe0f\u20e3", "#\ufe0f\u20e3"},
		{"selector at the start", "\ufe0fa", "a"},
		{"zwj between letters", "a\u200db", "ab"},
		{"zwj after an emoji before a letter", "😀\u200da", "😀a"},
		{"zwj at the end", "😀\u200d", "😀"},
		{"double zwj", "👨\u200d\u200d👩", "👨\u200d👩"},
		{"prepended concatenation mark stays", "\u0600\u0661", "\u0600\u0661"},
		// format characters outside Default_Ignorable_Code_Point
		{"interlinear annotation", "a\ufff9base\ufffaruby\ufffbb", "abaserubyb"},
		{"egyptian hieroglyph format controls", "\U00013000\U00013430\U00013001\U0001343f", "\U00013000\U00013001"},
		{"tags smuggling ascii", "ok\U000e0049\U000e0067\U000e006e\U000e006f\U000e0072\U000e0065 then", "ok then"},
		// line and paragraph separators become newlines
		{"line separator", "a\u2028b", "a\nb"},
		{"paragraph separator", "a\u2029b", "a\nb"},
		// invalid UTF-8
		{"lone continuation", "a\x80b", "a\uFFFDb"},
		{"overlong slash", "a\xc0\xafb", "a\uFFFD\uFFFDb"},
		{"overlong nul", "a\xc0\x80b", "a\uFFFD\uFFFDb"},
		{"surrogate encoding", "a\xed\xa0\x80b", "a\uFFFD\uFFFD\uFFFDb"},
		{"truncated three byte", "a\xe2\x82b", "a\uFFFD\uFFFDb"},
		{"truncated at end", "a\xf0\x9f\x98", "a\uFFFD\uFFFD\uFFFD"},
		{"beyond max rune", "\xf4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"invalid byte ff", "\xff", "\uFFFD"},
		{"encoded replacement kept", "a\uFFFDb", "a\uFFFDb"},
		// text that must survive
		{"emoji", "ok 👍🏽 🇫🇷", "ok 👍🏽 🇫🇷"},
		{"emoji zwj sequence", "👨\u200d👩\u200d👧", "👨\u200d👩\u200d👧"},
		{"emoji zwj with selector and skin tone", "\U0001f3f3\ufe0f\u200d\U0001f308 \U0001f9d1\U0001f3fd\u200d\U0001f4bb", "\U0001f3f3\ufe0f\u200d\U0001f308 \U0001f9d1\U0001f3fd\u200d\U0001f4bb"},
		{"cjk", "日本語のテキスト", "日本語のテキスト"},
		{"combining marks", "e\u0301 a\u0308 \u0915\u094d", "e\u0301 a\u0308 \u0915\u094d"},
		{"arabic and hebrew", "مرحبا שלום", "مرحبا שלום"},
		{"nbsp and latin-1", "\u00a0café ß ÿ", "\u00a0café ß ÿ"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := String(tc.in)
			if got != tc.want {
				t.Fatalf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
			checkClean(t, tc.in, got)
			if again := String(got); again != got {
				t.Fatalf("not idempotent: %q then %q", got, again)
			}
			if b := Bytes([]byte(tc.in)); b != got {
				t.Fatalf("Bytes(%q) = %q, String gave %q", tc.in, b, got)
			}
		})
	}
}

func TestStringCleanIsSameString(t *testing.T) {
	in := strings.Repeat("héllo wörld\tline\n", 100)
	if got := String(in); unsafe.StringData(got) != unsafe.StringData(in) || len(got) != len(in) {
		t.Fatalf("clean input was copied or changed")
	}
}

func TestStringZeroAllocs(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"clean ascii", strings.Repeat("The quick brown fox\tjumps over the lazy dog.\n", 1000)},
		{"clean multibyte", strings.Repeat("日本語 café 👍🏽 e\u0301 مرحبا\n", 1000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out string
			allocs := testing.AllocsPerRun(100, func() { out = String(tc.in) })
			if allocs != 0 {
				t.Fatalf("String allocated %v times per run on clean input", allocs)
			}
			if out != tc.in {
				t.Fatalf("clean input changed")
			}
		})
	}
}

func TestStringDirtyAllocsOnce(t *testing.T) {
	in := strings.Repeat("x", 4096) + "\x1b[31m" + strings.Repeat("y", 4096)
	allocs := testing.AllocsPerRun(100, func() { _ = String(in) })
	if allocs != 1 {
		t.Fatalf("String allocated %v times per run, want 1 (the output)", allocs)
	}
}

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"fits", "hello", 5, "hello"},
		{"head and tail", "0123456789", 4, "01" + Marker(6) + "89"},
		{"odd max gives tail the extra byte", "0123456789", 5, "01" + Marker(5) + "789"},
		{"zero max", "abc", 0, Marker(3)},
		{"negative max", "abc", -1, Marker(3)},
		{"empty", "", 0, ""},
		{"head never splits a rune", "ééééé", 5, "é" + Marker(6) + "é"},
		{"tail never splits a rune", "aaé€", 4, "aa" + Marker(5) + ""},
		{"sanitized before counting", "\x1b[31m0123456789\x1b[0m", 4, "01" + Marker(6) + "89"},
		{"error at the end survives", strings.Repeat("log line\n", 1000) + "Error: boom", 40,
			"log line\nlog line\nlo" + Marker(9011-40) + "log line\nError: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Truncate(tc.in, tc.max)
			if got != tc.want {
				t.Fatalf("Truncate(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
			}
			checkTruncate(t, tc.in, tc.max, got)
		})
	}
}

// checkTruncate checks the shape of Truncate(in, max) without trusting its arithmetic:
// out must be a head of String(in), a marker counting exactly the missing bytes, and a
// tail of String(in), with head and tail within max and losing at most a rune's width
// to alignment on each side.
func checkTruncate(t *testing.T, in string, max int, out string) {
	t.Helper()
	checkClean(t, in, out)
	c := String(in)
	if max < 0 {
		max = 0
	}
	if len(c) <= max {
		if out != c {
			t.Fatalf("Truncate(%q, %d) = %q, want the whole sanitized %q", in, max, out, c)
		}
		return
	}
	if len(out) > max+len(Marker(int64(len(c)))) {
		t.Fatalf("Truncate(%q, %d) is %d bytes, over max plus marker", in, max, len(out))
	}
	// The marker's length depends only on how many digits the count has, so each digit
	// width fixes how many bytes were kept and therefore the count itself.
	for digits := 1; digits <= 19; digits++ {
		kept := len(out) - (len(Marker(0)) - 1 + digits)
		d := int64(len(c) - kept)
		if kept < 0 || d < 1 || len(strconv.FormatInt(d, 10)) != digits {
			continue
		}
		m := Marker(d)
		for off := 0; ; {
			k := strings.Index(out[off:], m)
			if k < 0 {
				break
			}
			h := off + k
			if h <= kept && out[:h] == c[:h] && out[h+len(m):] == c[len(c)-(kept-h):] {
				// Each edge may lose a split rune; besides, the head a joiner (3 bytes)
				// and the tail a selector and joiner (6) cut off from their emoji.
				if kept > max || kept < max-2*(utf8.UTFMax-1)-9 {
					t.Fatalf("Truncate(%q, %d) keeps %d bytes", in, max, kept)
				}
				return
			}
			off = h + 1
		}
	}
	t.Fatalf("Truncate(%q, %d) = %q is not head+Marker(dropped)+tail of %q", in, max, out, c)
}

func TestStream(t *testing.T) {
	for _, tc := range []struct {
		name       string
		head, tail string
		dropped    int64
		want       string
	}{
		{"no drop joins", "abc", "def", 0, "abcdef"},
		{"no drop sequence spans join", "a\x1b[3", "1mb", 0, "ab"},
		{"no drop crlf spans join", "a\r", "\nb", 0, "a\nb"},
		{"marker", "head", "tail", 10, "head" + Marker(10) + "tail"},
		{"sanitizes both sides", "\x1b[1mhead\x07", "\u202etail\x00", 3, "head" + Marker(3) + "tail"},
		{"split rune at head end", "ab\xe6\x97", "tail", 5, "ab" + Marker(7) + "tail"},
		{"split rune at tail start", "head", "\x97\xa5cd", 5, "head" + Marker(7) + "cd"},
		{"invalid bytes at head end are not a split rune", "ab\xff", "cd", 1, "ab\uFFFD" + Marker(1) + "cd"},
		{"open sequence at head end", "ok\x1b]52;c;c2VjcmV0", "tail", 9, "ok" + Marker(9) + "tail"},
		{"tail starts inside osc payload, bel", "h", "c2VjcmV0\x07after", 4, "h" + Marker(13) + "after"},
		{"tail starts inside osc payload, st", "h", "c2VjcmV0\x1b\\after", 4, "h" + Marker(14) + "after"},
		{"tail starts inside dcs payload, 8-bit st", "h", "payload\u009cafter", 4, "h" + Marker(13) + "after"},
		{"terminator after an introducer is not orphaned", "h", "x\x1b]0;t\x07y", 4, "h" + Marker(4) + "xy"},
		{"tail starts inside csi shows the rest", "h", "31mred", 2, "h" + Marker(2) + "31mred"},
		{"empty", "", "", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Stream([]byte(tc.head), []byte(tc.tail), tc.dropped)
			if got != tc.want {
				t.Fatalf("Stream(%q, %q, %d) = %q, want %q", tc.head, tc.tail, tc.dropped, got, tc.want)
			}
			checkClean(t, tc.head+tc.tail, got)
		})
	}
}

func TestStreamDoesNotAliasHead(t *testing.T) {
	head := make([]byte, 3, 16)
	copy(head, "abc")
	backing := head[:cap(head)]
	_ = Stream(head, []byte("XYZ"), 0)
	if string(backing[3:6]) == "XYZ" {
		t.Fatalf("Stream wrote the tail into the spare capacity of the caller's head")
	}
}

var seeds = []string{
	"",
	"plain\n",
	"\x1b[31mred\x1b[0m",
	"\x1b]8;;http://evil/\x1b\\link\x1b]8;;\x1b\\",
	"\x1b]52;c;ZXZpbA==\x07",
	"\x1bPq#0;2;0;0;0\x1b\\",
	"\x1b_Ga=T\x1b\\",
	"\x1b^pm\x1b\\\x1bXsos\x1b\\",
	"\u009b2J\u009d0;t\u009c\u0090x\u009c",
	"\x9b\x9d\x9c\x90",
	"\x1b",
	"\x1b[",
	"\x1b]",
	"\x1b\x1b\x1b[[[",
	"\x1b[" + strings.Repeat("9", 200),
	"\r\r\n\n\r",
	"\u202ertl\u202c\u2066iso\u2069\u200b\u200d\ufeff\U000e0041",
	"\xc0\x80\xed\xa0\x80\xf4\x90\x80\x80\xe2\x82",
	"\xe2\x80\x8b",
	"\xe2\x80",
	"👨\u200d👩\u200d👧 日本 e\u0301",
	"\x00\x01\x7f\u0080\u009f",
}

func FuzzString(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := String(in)
		checkClean(t, in, out)
		if again := String(out); again != out {
			t.Fatalf("not idempotent: String(%q) = %q, again %q", in, out, again)
		}
		if innocent(in) && out != in {
			t.Fatalf("clean input changed: %q became %q", in, out)
		}
		if b := Bytes([]byte(in)); b != out {
			t.Fatalf("Bytes and String differ on %q: %q vs %q", in, b, out)
		}
	})
}

func FuzzTruncate(f *testing.F) {
	for i, s := range seeds {
		f.Add(s, i%7)
		f.Add(strings.Repeat(s, 20), 17+i)
	}
	f.Fuzz(func(t *testing.T, in string, max int) {
		if max > 1<<20 {
			max = 1 << 20
		}
		checkTruncate(t, in, max, Truncate(in, max))
	})
}

func FuzzStream(f *testing.F) {
	for i, s := range seeds {
		f.Add([]byte(s), []byte(seeds[(i+1)%len(seeds)]), int64(i%3))
	}
	f.Add([]byte("ok\x1b]52;c;"), []byte("c2VjcmV0\x07done"), int64(100))
	f.Add([]byte("ab\xf0\x9f"), []byte("\x98\x80cd"), int64(1))
	f.Fuzz(func(t *testing.T, head, tail []byte, dropped int64) {
		out := Stream(head, tail, dropped)
		in := string(head) + string(tail)
		checkClean(t, in, out)
		if String(out) != out {
			t.Fatalf("Stream output is not a fixed point of String: %q", out)
		}
		if dropped <= 0 {
			if want := String(in); out != want {
				t.Fatalf("Stream(%q, %q, %d) = %q, want String of the join %q", head, tail, dropped, out, want)
			}
			return
		}
		if !strings.Contains(out, "bytes truncated ...]\n") {
			t.Fatalf("Stream(%q, %q, %d) = %q has no marker", head, tail, dropped, out)
		}
	})
}

// TestDecodeMatchesUTF8 compares the inline decoder with the standard one on every lead
// byte >= 0x80 followed by every two-byte continuation, at every input length that cuts it.
func TestDecodeMatchesUTF8(t *testing.T) {
	buf := make([]byte, 4)
	for c := 0x80; c <= 0xff; c++ {
		for d := 0; d <= 0xff; d++ {
			for e := 0; e <= 0xff; e++ {
				buf[0], buf[1], buf[2], buf[3] = byte(c), byte(d), byte(e), 0x80
				s := string(buf)
				for n := 1; n <= len(s); n++ {
					r, size := decode(s[:n], 0)
					wr, wsize := utf8.DecodeRuneInString(s[:n])
					if r != wr || size != wsize {
						t.Fatalf("decode(% x) = %U,%d, utf8 says %U,%d", s[:n], r, size, wr, wsize)
					}
				}
			}
		}
	}
}

// TestEveryOffset puts each control byte and some forbidden runes at every offset of a
// line long enough for the word-at-a-time scan, which the short table rows never reach.
func TestEveryOffset(t *testing.T) {
	const line = "The quick brown fox jumps over the lazy dog, twice.\n"
	var bad []string
	for c := 0; c < 0x20; c++ {
		if c != '\n' && c != '\t' && c != '\r' && c != esc {
			bad = append(bad, string(rune(c)))
		}
	}
	bad = append(bad, "\x7f", "\u0085", "\u009c", "\u200b", "\u202e", "\ufeff", "\U000e0041")
	for _, b := range bad {
		for i := 0; i <= len(line); i++ {
			in := line[:i] + b + line[i:]
			if got := String(in); got != line {
				t.Fatalf("String(%q) = %q, want %q", in, got, line)
			}
		}
	}
	for i := 0; i <= len(line); i++ {
		in := line[:i] + "\r" + line[i:]
		want := line[:i] + "\n" + line[i:]
		if strings.HasPrefix(line[i:], "\n") {
			want = line // CRLF
		}
		if got := String(in); got != want {
			t.Fatalf("String(%q) = %q, want %q", in, got, want)
		}
	}
}
