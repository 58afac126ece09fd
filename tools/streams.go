package tools

import (
	"unicode/utf8"

	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/sanitize"
)

// The output cap counts the program's bytes, but the answer carries them as JSON, twice
// (structuredContent and the text block), and mcp-go writes its HTTP and SSE answers
// HTML-safe: each '<', '>' or '&' becomes six bytes (\u003c) and each invalid byte a
// three-byte U+FFFD. A cap's worth of '<' on both streams was twelve caps on the wire, per
// call, on every transport. streamText therefore keeps each stream within streamBudget as
// encoded, cutting more from the middle when it must; the marker and the *_truncated
// fields say so, and *_bytes still count what the program wrote.

// streamBudget is what one stream's text may cost as JSON under an output cap of limit
// bytes. The eighth over the cap is room for escapes in ordinary text (a newline costs
// two bytes: lines of eight characters or more at the cap are not cut), and bounds an
// answer at 2.25 times the two caps.
func streamBudget(limit int64) int64 { return limit + limit/8 }

// markerRoom bounds the JSON cost of sanitize.Marker: two escaped newlines, the brackets
// and words, and at most 19 digits.
const markerRoom = 49

// streamText is s sanitized, its JSON encoding within streamBudget(limit) bytes plus the
// marker.
func streamText(s sandbox.Stream, limit int64) (string, bool) {
	text := sanitize.Stream(s.Head, s.Tail, s.Dropped())
	budget := streamBudget(limit)
	if limit <= 0 || jsonLen(text) <= budget+markerRoom {
		return text, s.Truncated()
	}
	s = fitStream(s, budget)
	return sanitize.Stream(s.Head, s.Tail, s.Dropped()), true
}

// fitStream keeps a prefix of Head and a suffix of Tail whose encoded costs add up to at
// most budget: half each, unless the head needs less. When nothing was dropped, both are
// cut from the one contiguous text.
func fitStream(s sandbox.Stream, budget int64) sandbox.Stream {
	head, tail := s.Head, s.Tail
	if s.Dropped() <= 0 {
		head = s.Bytes()
		tail = fitSuffix(head, budget-budget/2)
		head = head[:len(head)-len(tail)]
	} else {
		tail = fitSuffix(tail, budget-min(budget/2, encodedCost(head)))
	}
	return sandbox.Stream{Head: fitPrefix(head, budget-encodedCost(tail)), Tail: tail, Total: s.Total}
}

// byteCost bounds what one byte of the program's output costs once sanitized and encoded
// HTML-safe. Controls and escape sequences are removed or become '\n', so they cost at
// most this; a valid multi-byte rune costs one per byte (U+2028 and U+2029 become '\n').
func byteCost(c byte) int64 {
	switch {
	case c == '<' || c == '>' || c == '&':
		return 6
	case c == '"' || c == '\\' || c < 0x20:
		return 2
	}
	return 1
}

// seqCost is the bound for one sequence as utf8.DecodeRune or DecodeLastRune found it
// (first byte c, rune r, size bytes): its bytes, or U+FFFD's three for a byte that starts
// no valid sequence.
func seqCost(c byte, r rune, size int) int64 {
	switch {
	case r == utf8.RuneError && size == 1:
		return 3
	case size == 1:
		return byteCost(c)
	}
	return int64(size)
}

func encodedCost(b []byte) int64 {
	var n int64
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			n += byteCost(b[i])
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		n += seqCost(b[i], r, size)
		i += size
	}
	return n
}

// fitPrefix is the longest prefix of b, on a sequence boundary, costing at most budget.
func fitPrefix(b []byte, budget int64) []byte {
	var n int64
	i := 0
	for i < len(b) {
		if b[i] < utf8.RuneSelf {
			if n += byteCost(b[i]); n > budget {
				break
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		c := seqCost(b[i], r, size)
		if n+c > budget {
			break
		}
		n += c
		i += size
	}
	return b[:i]
}

// fitSuffix is the longest suffix of b, on a sequence boundary, costing at most budget.
func fitSuffix(b []byte, budget int64) []byte {
	var n int64
	i := len(b)
	for i > 0 {
		if b[i-1] < utf8.RuneSelf {
			if n += byteCost(b[i-1]); n > budget {
				break
			}
			i--
			continue
		}
		r, size := utf8.DecodeLastRune(b[:i])
		c := seqCost(b[i-size], r, size)
		if n+c > budget {
			break
		}
		n += c
		i -= size
	}
	return b[i:]
}
