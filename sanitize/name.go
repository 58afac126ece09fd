package sanitize

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape makes a string the program chose (a file name) safe to show inside a line of
// text the model reads: every rune that is not a visible character (controls, line and
// paragraph separators, BiDi and other invisible characters, spaces other than U+0020)
// and every byte of invalid UTF-8 becomes a Go escape (\n, \x1b, \u202e, \U000e0041), and
// a backslash becomes \\. The result is one line, shows the name in its own order, and
// reads back as exactly one name. Clean input is returned as is.
func Escape(s string) string { return escape(s, false) }

// Quote is Escape in double quotes, with '"' escaped too: the name's end is unambiguous
// however the line goes on.
func Quote(s string) string { return `"` + escape(s, true) + `"` }

func escape(s string, quote bool) string {
	i := 0
	for i < len(s) {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '\\' && !(quote && c == '"') {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			break
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if n == 1 || !visible(r) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case n == 1 && r == utf8.RuneError:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case r == '\\' || quote && r == '"':
			b.WriteByte('\\')
			b.WriteByte(s[i])
		case r < utf8.RuneSelf && r >= 0x20 && r < 0x7f:
			b.WriteByte(s[i])
		case r < utf8.RuneSelf:
			switch r {
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			default:
				b.WriteString(`\x`)
				b.WriteString(hex2(s[i]))
			}
		case visible(r):
			b.WriteString(s[i : i+n])
		case r <= 0xffff:
			b.WriteString(`\u`)
			b.WriteString(pad(strconv.FormatUint(uint64(r), 16), 4))
		default:
			b.WriteString(`\U`)
			b.WriteString(pad(strconv.FormatUint(uint64(r), 16), 8))
		}
		i += n
	}
	return b.String()
}

// visible reports whether a non-ASCII rune shows as itself: printable (letters, marks,
// numbers, punctuation, symbols; no separators but U+0020) and not invisible (dropRune).
func visible(r rune) bool {
	return unicode.IsPrint(r) && !dropRune(r)
}

func hex2(c byte) string { return pad(strconv.FormatUint(uint64(c), 16), 2) }

func pad(h string, n int) string {
	if len(h) >= n {
		return h
	}
	return strings.Repeat("0", n-len(h)) + h
}
