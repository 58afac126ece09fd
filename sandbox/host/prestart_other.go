//go:build !linux

package host

// Prestart does nothing here: New starts nothing that could be started ahead of it.
func Prestart() {}
