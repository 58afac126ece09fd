package soak

import (
	"fmt"
	"strings"
)

// Kind is one sort of program the soak sends, with the status it must come back with. Every program carries its call's marker in its code and in its argv, so a
// process that outlives its call can be found from the host.
type Kind struct {
	Name string
	// Weight is how many of every Weights() calls are of this kind.
	Weight int
	// Timeout is the timeout_seconds sent; 0 leaves the server's default.
	Timeout float64
	// Want is the acceptable status.
	Want string
	// OrWant is the one other acceptable status, for a program that two limits contain
	// and either may end first; empty for every other kind.
	OrWant string
	// WantExit, when not nil, is the only acceptable exit code.
	WantExit *int
	// WantStdout, when set, must appear in stdout (after %s is replaced by the marker).
	WantStdout string
	code       string
}

// Code returns the program for the call marked marker.
func (k Kind) Code(marker string) string {
	return "# " + marker + "\n" + strings.ReplaceAll(k.code, "MARKER", marker)
}

func exit(n int) *int { return &n }

// Kinds is the mix. The server runs with a 128 MiB memory limit (see Options.Memory): at
// the default 512 MiB a memory bomb takes seconds just to touch its pages, and the
// 64 MiB workspace then fills before memory runs out, so a disk fill stays an ENOSPC
// error rather than a memory_limit.
var Kinds = []Kind{
	{Name: "ok", Weight: 10, Want: "ok", WantExit: exit(0), WantStdout: "hello MARKER",
		code: "import sys\nprint('hello', sys.argv[1])\n"},
	{Name: "exit", Weight: 3, Want: "error", WantExit: exit(3),
		code: "import sys\nprint(sys.argv[1], file=sys.stderr)\nsys.exit(3)\n"},
	{Name: "timeout", Weight: 1, Timeout: 0.3, Want: "timeout",
		code: "import time\ntime.sleep(30)\n"},
	// The bomb's 64 processes (the pids limit) keep dirtying their copied heaps: peaks of
	// 42-69 MiB by the time the 0.5 s timeout's kill lands at a load of 21 here, more
	// the longer the kill takes, so on a loaded host the 128 MiB memory limit can end it
	// first (seen once, in CI). Either limit ending it is the bomb contained.
	{Name: "fork_bomb", Weight: 1, Timeout: 0.5, Want: "timeout", OrWant: "memory_limit",
		code: "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"},
	{Name: "memory_bomb", Weight: 1, Timeout: 10, Want: "memory_limit",
		code: "b = []\nwhile True:\n    b.append(b'x' * (16 << 20))\n"},
	{Name: "output_flood", Weight: 1, Timeout: 10, Want: "output_limit",
		code: "import sys\ns = 'x' * 65536\nwhile True:\n    sys.stdout.write(s)\n"},
	{Name: "disk_fill", Weight: 1, Timeout: 10, Want: "error", WantExit: exit(1),
		code: "with open('fill', 'wb') as f:\n    while True:\n        f.write(b'\\0' * (1 << 20))\n"},
	// The grandchild leaves the session and the process group, execs with the marker in
	// its argv and sleeps for minutes; the program itself exits 0 at once. Only the
	// pid-namespace teardown (or the cgroup kill) can end the grandchild.
	{Name: "detached", Weight: 2, Want: "ok", WantExit: exit(0), WantStdout: "detached MARKER",
		code: "import os, sys\n" +
			"if os.fork() == 0:\n" +
			"    os.setsid()\n" +
			"    if os.fork() == 0:\n" +
			"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(300)', sys.argv[1]])\n" +
			"    os._exit(0)\n" +
			"os.wait()\n" +
			"print('detached', sys.argv[1])\n"},
}

// Weights is the length of one round of the mix.
func Weights() int {
	n := 0
	for _, k := range Kinds {
		n += k.Weight
	}
	return n
}

// kindOf spreads the kinds evenly: call i gets the kind at slot i mod Weights().
func kindOf(i int) Kind {
	slot := i % Weights()
	for _, k := range Kinds {
		if slot < k.Weight {
			return k
		}
		slot -= k.Weight
	}
	return Kinds[0]
}

// ExpectTable renders the expected status per kind, for -h and the report.
func ExpectTable() string {
	var b strings.Builder
	for _, k := range Kinds {
		want := k.Want
		if k.OrWant != "" {
			want += " or " + k.OrWant
		}
		if k.WantExit != nil {
			want += fmt.Sprintf(", exit %d", *k.WantExit)
		}
		fmt.Fprintf(&b, "  %-13s weight %2d  timeout %-4g -> %s\n", k.Name, k.Weight, k.Timeout, want)
	}
	return b.String()
}
