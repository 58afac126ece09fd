// Package sanitize makes program output safe to show to a model or a terminal.
package sanitize

// CONTRACT STUB: the sanitize owner replaces the bodies; keep the names and shapes.

// String strips control characters, escape sequences, BiDi/zero-width/tag runes and
// replaces invalid UTF-8. Clean input is returned as is, without allocating.
func String(s string) string { return s }

// Bytes is String for a byte slice.
func Bytes(b []byte) string { return string(b) }

// Truncate keeps the head and tail of s within max bytes, never cutting a UTF-8 sequence,
// with a marker saying how many bytes were dropped.
func Truncate(s string, max int) string { return s }

// Stream sanitizes a captured stream's head and tail and joins them with a marker saying
// how many bytes were dropped in between (no marker when dropped is 0).
func Stream(head, tail []byte, dropped int64) string { return string(head) + string(tail) }
