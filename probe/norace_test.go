//go:build !race && linux

package probe

const raceEnabled = false
