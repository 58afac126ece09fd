package sanitize

import (
	"strings"
	"testing"
)

const mib = 1 << 20

// fill repeats unit to exactly n bytes, cutting on a rune boundary.
func fill(unit string, n int) string {
	s := strings.Repeat(unit, n/len(unit)+1)
	return s[:runeStart(s, n)]
}

var (
	cleanASCII = fill("2026-11-29T10:00:00Z INFO worker 7 processed batch 1234 in 56ms\tok\n", mib)
	mixedUTF8  = fill("résumé 日本語のテキスト 👍🏽 e\u0301 مرحبا plain ascii words here\n", mib)
	escapes    = fill("\x1b[1;32mPASS\x1b[0m test_\x1b[36mname\x1b[0m \x1b]8;;file:///x\x1b\\link\x1b]8;;\x1b\\\r\n", mib)
)

func benchString(b *testing.B, in string) {
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		_ = String(in)
	}
}

func BenchmarkString_CleanASCII_1MiB(b *testing.B) { benchString(b, cleanASCII) }
func BenchmarkString_MixedUTF8_1MiB(b *testing.B)  { benchString(b, mixedUTF8) }
func BenchmarkString_Escapes_1MiB(b *testing.B)    { benchString(b, escapes) }

func BenchmarkStream_Truncated(b *testing.B) {
	// A 1 MiB capture of a flood: half head, half tail, with colour codes in both.
	head := []byte(escapes[:mib/2])
	tail := []byte(cleanASCII[:mib/2])
	b.SetBytes(int64(len(head) + len(tail)))
	b.ReportAllocs()
	for b.Loop() {
		_ = Stream(head, tail, 123456789)
	}
}
