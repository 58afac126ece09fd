package serve

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// duplicateMember returns the first member name of msg that repeats an earlier one of
// the same object, exactly or under Unicode case folding, and the name it repeats; ok is
// false when there is none (or msg is not JSON, which the decoder answers its own way).
//
// Such a message means two things. encoding/json, in mcp-go and in the tools, keeps the
// last of two equal names and matches a struct field's name case-insensitively, while a
// client that shows a call for approval (JSON.parse, most UIs) shows each name as written:
// {"code":"print(1)","Code":"<payload>"} reads as print(1) and runs the payload, and
// {"name":"get_config","Name":"run_code"} as the harmless tool. So a message with one is
// refused before anything reads it (RFC 8259 §4: names SHOULD be unique).
func duplicateMember(msg []byte) (name, first string, ok bool) {
	// A scan of the bytes, not a decoder's tokens: it runs on every message, and
	// encoding/json's Token cost 8 µs and 137 allocations for a 150-byte call (a tenth
	// of a stdio call's whole cost), 9 ms for a 1 MiB one. Only what tells a member name
	// from a value is tracked: in an object, the string after '{' or ',' is a name.
	// Strings are skipped whole, so nothing inside one is read as structure; a message
	// that is not JSON may be refused for what looks like a repeat, which it is anyway.
	var stack []frame
	var names [][]byte // the names of the open objects, innermost last
	for i := 0; i < len(msg); i++ {
		switch msg[i] {
		case '{', '[':
			if len(stack) == maxDepth {
				// Deeper than encoding/json accepts: every decoder of the message
				// refuses it whole as a parse error, so there is nothing to hide. Scanned
				// on, a 16 MiB line of '[' grew this stack to 2.2 GB allocated and the
				// stdio server to 1.6 GB resident (TestE2EDeepNestingBoundedMemory).
				return "", "", false
			}
			stack = append(stack, frame{object: msg[i] == '{', wantKey: msg[i] == '{', names: len(names)})
		case '}', ']':
			if len(stack) == 0 {
				return "", "", false
			}
			names = names[:stack[len(stack)-1].names]
			stack = stack[:len(stack)-1]
		case ',':
			if n := len(stack); n > 0 && stack[n-1].object {
				stack[n-1].wantKey = true
			}
		case '"':
			end := stringEnd(msg, i+1)
			if end < 0 {
				return "", "", false
			}
			n := len(stack)
			if n == 0 || !stack[n-1].object || !stack[n-1].wantKey {
				i = end
				continue
			}
			f := &stack[n-1]
			f.wantKey = false
			key := msg[i+1 : end]
			if bytes.IndexByte(key, '\\') >= 0 {
				var s string
				if json.Unmarshal(msg[i:end+1], &s) != nil {
					return "", "", false
				}
				key = []byte(s)
			}
			i = end
			if prev, dup := f.seen(names[f.names:], key); dup {
				return string(key), prev, true
			}
			names = append(names, key)
		}
	}
	return "", "", false
}

// maxDepth is encoding/json's limit on nesting (its scanner's maxNestingDepth): a
// message nested deeper is not JSON to mcp-go or the tools.
const maxDepth = 10000

// frame is an open object or array of duplicateMember's scan.
type frame struct {
	object, wantKey bool
	names           int               // where its names start in duplicateMember's names
	set             map[string]string // folded name → name, once it has many
}

// seen reports whether key repeats one of names, the object's names so far, exactly or
// under case folding, and which. A map takes over from the scan at 16 names, so that an
// object of many names costs no more than linear time.
func (f *frame) seen(names [][]byte, key []byte) (string, bool) {
	if f.set == nil && len(names) < 16 {
		for _, n := range names {
			if bytes.EqualFold(n, key) {
				return string(n), true
			}
		}
		return "", false
	}
	if f.set == nil {
		f.set = make(map[string]string, 2*len(names))
		for _, n := range names {
			f.set[fold(string(n))] = string(n)
		}
	}
	k := fold(string(key))
	if prev, ok := f.set[k]; ok {
		return prev, true
	}
	f.set[k] = string(key)
	return "", false
}

// stringEnd is the index of the quote that closes the JSON string whose body starts at i,
// or -1 if none does.
func stringEnd(msg []byte, i int) int {
	for {
		j := bytes.IndexByte(msg[i:], '"')
		if j < 0 {
			return -1
		}
		j += i
		esc := 0
		for k := j - 1; k >= i && msg[k] == '\\'; k-- {
			esc++
		}
		if esc%2 == 0 {
			return j
		}
		i = j + 1
	}
}

// duplicateError is the refusal of a message in which name repeats first.
func duplicateError(name, first string) string {
	what := "twice"
	if name != first {
		what = "twice, as " + strconv.Quote(first) + " and " + strconv.Quote(name) + " (names are matched without regard to case)"
	}
	return "malformed JSON-RPC message: the member name " + strconv.Quote(first) + " appears " + what +
		" in one object; send each once"
}

// fold maps s to one representative of its case-folding class: two names fold alike
// exactly when bytes.EqualFold says they are equal (Kelvin sign and long s included, and
// each invalid byte as U+FFFD, which is what encoding/json makes of it).
func fold(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b = utf8.AppendRune(b, m)
	}
	return string(b)
}

// textError says why msg's text is refused before it is decoded, or "": encoding/json
// quietly turns invalid UTF-8 (RFC 8259 §8.1: JSON text must be UTF-8) and a \u escape
// of a lone UTF-16 surrogate (§8.2: behaviour unpredictable) into U+FFFD, so code or
// stdin would run otherwise than the client sent it and showed it: JSON.parse and
// Python's json keep the lone surrogate ("print('\ud800')" ran as print('\ufffd')).
func textError(msg []byte) string {
	if !utf8.Valid(msg) {
		return "message is not valid UTF-8: JSON text must be UTF-8 (RFC 8259)"
	}
	if esc, ok := loneSurrogate(msg); ok {
		return "message has " + esc + ", half of a UTF-16 surrogate pair: send the character itself, or both halves (RFC 8259 §8.2)"
	}
	return ""
}

// loneSurrogate returns the first \u escape in msg of a surrogate that is not half of a
// pair. Backslashes occur only inside strings, and each escape is skipped whole, so an
// escaped backslash followed by "ud800" is text, not an escape.
func loneSurrogate(msg []byte) (string, bool) {
	for i := 0; i < len(msg); {
		j := bytes.IndexByte(msg[i:], '\\')
		if j < 0 {
			return "", false
		}
		i += j
		r, ok := hex4(msg, i)
		switch {
		case !ok:
			i += 2 // any other escape, \\ included
		case utf16.IsSurrogate(r) && r < 0xdc00:
			if lo, ok := hex4(msg, i+6); ok && lo >= 0xdc00 && lo <= 0xdfff {
				i += 12
				continue
			}
			return string(msg[i : i+6]), true
		case utf16.IsSurrogate(r):
			return string(msg[i : i+6]), true
		default:
			i += 6
		}
	}
	return "", false
}

// hex4 reads the \uXXXX escape at msg[i:], if there is one.
func hex4(msg []byte, i int) (rune, bool) {
	if i+6 > len(msg) || msg[i] != '\\' || msg[i+1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range msg[i+2 : i+6] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c|0x20 >= 'a' && c|0x20 <= 'f':
			c = c | 0x20 - 'a' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
