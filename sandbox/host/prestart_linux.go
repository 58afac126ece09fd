package host

import "github.com/airlock-mcp/airlock/sandbox/linux"

// Prestart starts, ahead of New, what the backend's New would start first (Linux: the
// zygote, an exec), so that it overlaps the caller's own start-up. A one-shot command
// calls it once; New takes what it started.
func Prestart() { linux.Prestart() }
