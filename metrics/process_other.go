//go:build !linux

package metrics

// processFamilies: client_golang's process_* families come from /proc; elsewhere
// (macOS serves only stdio in practice) they are left out.
func processFamilies() []family { return nil }
