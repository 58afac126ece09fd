// Package sanitize makes program output safe to show to a model or a terminal.
//
// The sandboxed program is hostile, so its output may try to drive the reader's terminal
// (cursor moves, OSC 52 clipboard writes, OSC 8 links), hide text from a human reviewer
// or smuggle instructions past one (BiDi overrides, zero-width, tag and variation
// characters) or confuse a decoder (invalid UTF-8). Everything here is a pure function;
// the output is valid UTF-8 containing no C0 control other than '\n' and '\t', no DEL,
// no C1 control, no line or paragraph separator and no invisible character as [String]
// defines them.
//
// Escape sequences are removed whole, following the ECMA-48 shapes:
//
//   - CSI (ESC [ or U+009B): parameter and intermediate bytes 0x20-0x3F, then one final
//     byte 0x40-0x7E. A CSI ends early, dropping only what was read so far, at any other
//     byte, at the end of input, or after maxCSI body bytes. Real sequences are short
//     (a 24-bit SGR colour pair is under 40 bytes), so an ESC [ followed by a long run of
//     digits and punctuation costs at most maxCSI bytes of text, never the rest of a line.
//   - OSC (ESC ] or U+009D) runs to BEL, ST (ESC \) or U+009C. DCS (ESC P, U+0090), SOS
//     (ESC X, U+0098), PM (ESC ^, U+009E) and APC (ESC _, U+009F) run to ST or U+009C.
//     An ESC inside such a string that is not part of ST does not end it, and a string
//     with no terminator runs to the end of the input: its payload (a clipboard write, a
//     link target) is never shown, at the price of losing any text after it.
//   - Any other ESC starts an ECMA-35 sequence: up to maxIntermediates bytes 0x20-0x2F,
//     then one final byte 0x30-0x7E (ESC c, ESC 7, ESC ( B). Without a final byte, the
//     ESC and its intermediates are dropped and the following byte is read as usual.
//
// The 8-bit introducers are recognised only as UTF-8 encoded runes. A raw byte 0x9B is
// invalid UTF-8 and becomes U+FFFD like any other: reading it as CSI would let one stray
// byte swallow the text after it.
package sanitize

//go:generate go run gen_tables.go

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	esc = 0x1b
	bel = 0x07

	// maxCSI bounds the parameter and intermediate bytes of one CSI, so a stray ESC [
	// cannot eat an unbounded run of digits and punctuation.
	maxCSI = 64
	// maxIntermediates bounds the intermediate bytes of a plain ESC sequence; ECMA-35
	// sequences in use have at most two.
	maxIntermediates = 4

	replacement = "\uFFFD"
)

// Invalid UTF-8 becomes one U+FFFD per byte that does not start a valid sequence, the
// convention of utf8.DecodeRune: a truncated three-byte sequence yields two U+FFFD, and an
// encoded surrogate (ED A0 80) yields three.

// safeASCII marks the bytes below utf8.RuneSelf that pass through unchanged.
var safeASCII = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = true
	}
	t['\n'] = true
	t['\t'] = true
	return t
}()

// String strips control characters, escape sequences and invisible characters, and
// replaces invalid UTF-8. Clean input is returned as is, without allocating.
//
// Besides C0 (except '\n' and '\t'), DEL and C1, the dropped runes are Unicode's
// Default_Ignorable_Code_Point set and the other invisible format characters (tables.go,
// generated from the UCD): BiDi controls, zero-width characters, the BOM, soft hyphen,
// variation selectors, tags, Hangul fillers, musical formatting, the interlinear
// annotation controls U+FFF9-FFFB and the rest, each of which can hide text or carry a
// payload (a run of variation selectors after one emoji encodes a message, and a run of
// tags spells ASCII that a model reads and a human does not see). The format characters
// that render as a mark (Arabic number signs, Prepended_Concatenation_Mark) are kept. Two are kept where
// emoji need them: a single U+FE0E or U+FE0F right after a character that has a
// variation sequence (emoji-variation-sequences.txt), and U+200D between a pictograph
// (or its skin tone or U+FE0F) and another pictograph. "\r\n", a lone '\r', U+2028 and
// U+2029 all become '\n'.
func String(s string) string {
	i := cleanPrefix(s, noRune)
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	write(&b, s[i:])
	return b.String()
}

// Bytes is String for a byte slice.
func Bytes(b []byte) string { return String(string(b)) }

// Marker is the text that stands for dropped bytes in Truncate and Stream output.
func Marker(dropped int64) string {
	return "\n[... " + strconv.FormatInt(dropped, 10) + " bytes truncated ...]\n"
}

// Truncate keeps the head and tail of s within max bytes, never cutting a UTF-8 sequence,
// with a marker saying how many bytes were dropped.
//
// s is sanitized first and the byte counts refer to the sanitized text, so the result is
// never longer than max+len(Marker(dropped)) even when U+FFFD replacements grow it. The
// head gets half of max and the tail the rest, so an error printed last survives.
func Truncate(s string, max int) string {
	c := String(s)
	max = clampMax(max)
	if len(c) <= max {
		return c
	}
	h := runeStart(c, max/2)
	t := len(c) - (max - h)
	for t < len(c) && !utf8.RuneStart(c[t]) {
		t++
	}
	// An emoji's joiner or selector cut off from its emoji is invisible again: the head
	// may not end with a joiner, nor the tail start with either.
	for h > 0 && strings.HasSuffix(c[:h], "\u200d") {
		h -= len("\u200d")
	}
	for t < len(c) {
		r, n := utf8.DecodeRuneInString(c[t:])
		if r != zwj && r != textStyle && r != emojiStyle {
			break
		}
		t += n
	}
	return c[:h] + Marker(int64(t-h)) + c[t:]
}

// Stream sanitizes a captured stream's head and tail and joins them with a marker saying
// how many bytes were dropped in between (no marker when dropped is 0).
//
// The capture cuts at arbitrary bytes, so when dropped > 0 the edges are repaired and the
// bytes removed are added to the marker's count:
//   - a rune split at the end of head or the start of tail is dropped, not shown as U+FFFD;
//   - an escape sequence open at the end of head is dropped as unterminated;
//   - if tail holds a string terminator (BEL, ST, U+009C) before any escape introducer,
//     the cut fell inside an OSC/DCS/APC payload, and the tail up to the terminator is
//     dropped rather than shown as text.
func Stream(head, tail []byte, dropped int64) string {
	if dropped <= 0 {
		if len(tail) == 0 {
			return Bytes(head)
		}
		// Nothing was lost between them, so a sequence may span the join.
		return Bytes(append(head[:len(head):len(head)], tail...))
	}
	h := string(head)
	cut := partialRuneSuffix(h)
	h = h[:len(h)-cut]
	t := string(tail)
	skip := orphanPrefix(t)
	t = t[skip:]
	m := Marker(dropped + int64(cut+skip))
	var b strings.Builder
	b.Grow(len(h) + len(m) + len(t))
	write(&b, h)
	b.WriteString(m)
	write(&b, t)
	return b.String()
}

func clampMax(max int) int {
	if max < 0 {
		return 0
	}
	return max
}

// runeStart moves i back to the start of the rune that contains it.
func runeStart(s string, i int) int {
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// partialRuneSuffix is the length of an incomplete but so far valid UTF-8 sequence at the
// end of s, 0 when s ends on a whole rune or on bytes that are invalid anyway.
func partialRuneSuffix(s string) int {
	for n := 1; n < utf8.UTFMax && n <= len(s); n++ {
		c := s[len(s)-n]
		if utf8.RuneStart(c) {
			if c >= 0xC0 && !utf8.FullRuneInString(s[len(s)-n:]) {
				return n
			}
			return 0
		}
	}
	return 0
}

// orphanPrefix is how many bytes at the start of a tail belong to a control string whose
// introducer was dropped: the bytes through the first string terminator, if one comes
// before any introducer. Leading continuation bytes of a split rune are included.
func orphanPrefix(t string) int {
	lead := 0
	for lead < len(t) && lead < utf8.UTFMax-1 && !utf8.RuneStart(t[lead]) {
		lead++
	}
	for i := lead; i < len(t); i++ {
		switch t[i] {
		case bel:
			return i + 1
		case esc:
			if i+1 < len(t) && t[i+1] == '\\' {
				return i + 2
			}
			return lead
		case 0xC2:
			if i+1 < len(t) {
				switch t[i+1] {
				case 0x9C:
					return i + 2
				case 0x90, 0x98, 0x9B, 0x9D, 0x9E, 0x9F:
					return lead
				}
			}
		}
	}
	return lead
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// load64 reads s[i:i+8] little-endian; the compiler turns it into one load.
func load64(s string, i int) uint64 {
	w := s[i : i+8] // one bounds check instead of eight
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}

// asciiWordClean reports whether the eight bytes in x are all printable ASCII, '\n' or '\t'.
// Once no byte has its high bit set, adding at most 0x7F to a byte cannot carry into the
// next one, so each test below is exact per byte (unlike the classic haszero tricks,
// which may flag a byte next to a real match and would reject every word holding '\n').
func asciiWordClean(x uint64) bool {
	if x&highs != 0 {
		return false
	}
	control := ^(x + (0x80-0x20)*ones) // high bit set where byte < 0x20
	nl := x ^ ('\n' * ones)
	tab := x ^ ('\t' * ones)
	del := x ^ (0x7f * ones)
	allowed := ^(nl + 0x7f*ones) | ^(tab + 0x7f*ones) // high bit set where byte is '\n' or '\t'
	isDel := ^(del + 0x7f*ones)
	return (control&^allowed|isDel)&highs == 0
}

// noRune stands for "no rune before": the start of the text.
const noRune = -1

// cleanPrefix returns the length of the longest prefix of s that String keeps unchanged;
// prev is the rune already written before s (noRune at the start).
func cleanPrefix(s string, prev rune) int {
	i := 0
	for i < len(s) {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := decode(s, i)
			if n == 1 || dropRune(r) {
				if n == 1 || r < 0xa0 || r == lineSeparator || r == paragraphSeparator {
					return i
				}
				if i > 0 {
					prev, _ = utf8.DecodeLastRuneInString(s[:i])
				}
				if !keepIgnorable(prev, r, s[i+n:]) {
					return i
				}
			}
			i += n
			continue
		}
		// Word-at-a-time only from an ASCII byte: in CJK or Cyrillic text the next
		// word would almost never pass.
		for i+16 <= len(s) && asciiWordClean(load64(s, i)) && asciiWordClean(load64(s, i+8)) {
			i += 16
		}
		if i+8 <= len(s) && asciiWordClean(load64(s, i)) {
			i += 8
		}
		for i < len(s) && s[i] < utf8.RuneSelf {
			if !safeASCII[s[i]] {
				return i
			}
			i++
		}
	}
	return i
}

// decode is utf8.DecodeRuneInString(s[i:]) with the two- and three-byte cases inline,
// which covers Latin, Cyrillic, Arabic, CJK and most symbols; s[i] must be >= 0x80.
func decode(s string, i int) (rune, int) {
	c := s[i]
	switch {
	case c >= 0xc2 && c < 0xe0 && i+1 < len(s):
		if d := s[i+1]; d&0xc0 == 0x80 {
			return rune(c&0x1f)<<6 | rune(d&0x3f), 2
		}
	case c >= 0xe0 && c < 0xf0 && i+2 < len(s):
		d, e := s[i+1], s[i+2]
		lo, hi := byte(0x80), byte(0xbf)
		switch c {
		case 0xe0:
			lo = 0xa0 // overlong below
		case 0xed:
			hi = 0x9f // surrogates above
		}
		if d >= lo && d <= hi && e&0xc0 == 0x80 {
			return rune(c&0x0f)<<12 | rune(d&0x3f)<<6 | rune(e&0x3f), 3
		}
	}
	return utf8.DecodeRuneInString(s[i:])
}

// write appends the sanitized form of s to b; s starts in the ground state.
func write(b *strings.Builder, s string) {
	i := 0
	for i < len(s) {
		prev := rune(noRune)
		if b.Len() > 0 {
			prev, _ = utf8.DecodeLastRuneInString(b.String())
		}
		j := i + cleanPrefix(s[i:], prev)
		b.WriteString(s[i:j])
		i = j
		if i >= len(s) {
			return
		}
		c := s[i]
		switch {
		case c == '\r':
			b.WriteByte('\n')
			i++
			if i < len(s) && s[i] == '\n' {
				i++
			}
		case c == esc:
			i = skipEscape(s, i+1)
		case c < utf8.RuneSelf:
			i++ // other C0 and DEL
		default:
			r, n := decode(s, i)
			i += n
			switch {
			case n == 1:
				b.WriteString(replacement)
			case r == lineSeparator, r == paragraphSeparator:
				b.WriteByte('\n')
			case r == 0x9b:
				i = skipCSI(s, i)
			case r == 0x9d:
				i = skipString(s, i, true)
			case r == 0x90, r == 0x98, r == 0x9e, r == 0x9f:
				i = skipString(s, i, false)
			}
		}
	}
}

// skipEscape returns the index after the sequence whose ESC ends just before i.
func skipEscape(s string, i int) int {
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '[':
		return skipCSI(s, i+1)
	case ']':
		return skipString(s, i+1, true)
	case 'P', 'X', '^', '_':
		return skipString(s, i+1, false)
	}
	j := i
	for j < len(s) && j-i < maxIntermediates && s[j] >= 0x20 && s[j] <= 0x2f {
		j++
	}
	if j < len(s) && s[j] >= 0x30 && s[j] <= 0x7e {
		return j + 1
	}
	return j
}

// skipCSI returns the index after a CSI body starting at i, or where it was abandoned.
func skipCSI(s string, i int) int {
	for j := i; j < len(s); j++ {
		c := s[j]
		if c >= 0x40 && c <= 0x7e {
			return j + 1
		}
		if c < 0x20 || c > 0x3f || j-i >= maxCSI {
			return j
		}
	}
	return len(s)
}

// skipString returns the index after the terminator of a control string starting at i,
// or len(s) when there is none.
func skipString(s string, i int, belEnds bool) int {
	for j := i; j < len(s); j++ {
		switch s[j] {
		case bel:
			if belEnds {
				return j + 1
			}
		case esc:
			if j+1 < len(s) && s[j+1] == '\\' {
				return j + 2
			}
		case 0xC2:
			if j+1 < len(s) && s[j+1] == 0x9c {
				return j + 2
			}
		}
	}
	return len(s)
}

const (
	lineSeparator      = 0x2028
	paragraphSeparator = 0x2029
	zwj                = 0x200d
	textStyle          = 0xfe0e
	emojiStyle         = 0xfe0f
)

// dropRune reports whether a valid rune at or above utf8.RuneSelf is not kept as it is:
// C1, U+2028/2029 (rewritten as '\n') and the invisible characters (kept only where
// keepIgnorable says).
func dropRune(r rune) bool {
	switch {
	case r < 0xa0: // C1
		return true
	case r < 0xad: // the first invisible rune
		return false
	case r == lineSeparator, r == paragraphSeparator:
		return true
	case r <= 0xffff:
		return bmpInvisible[r>>6]&(1<<(r&63)) != 0
	}
	return unicode.Is(invisible, r)
}

// bmpInvisible is the BMP part of invisible as a bitmap (8 KiB): most text never leaves
// the BMP, and a bit test costs a fraction of the table's binary search.
var bmpInvisible = func() (b [0x10000 / 64]uint64) {
	for _, rg := range invisible.R16 {
		for r := rune(rg.Lo); r <= rune(rg.Hi); r += rune(rg.Stride) {
			b[r>>6] |= 1 << (r & 63)
		}
	}
	return b
}()

// keepIgnorable reports whether the invisible rune r, after prev and before rest, is part
// of an emoji: a single presentation selector after a character that takes one, or a
// joiner inside an emoji ZWJ sequence. Each kept one sits next to a visible pictograph,
// so no run of them can carry a hidden message.
func keepIgnorable(prev, r rune, rest string) bool {
	switch r {
	case textStyle, emojiStyle:
		return prev != noRune && unicode.Is(emojiVariationBase, prev)
	case zwj:
		if prev == noRune || !(prev == emojiStyle || unicode.Is(pictographic, prev) || unicode.Is(emojiModifier, prev)) {
			return false
		}
		next, n := utf8.DecodeRuneInString(rest)
		return n > 0 && unicode.Is(pictographic, next)
	}
	return false
}
