//go:build race && linux

package probe

// raceEnabled: the race detector slows the test binary, which is also the sandbox init,
// several times over; timing bounds do not apply.
const raceEnabled = true
