package sandbox

import (
	"strings"
	"testing"
	"time"
)

// Every branch of Classify, in its order of precedence: each row names the rule it
// checks and, where two rules compete, which one wins.
func TestClassify(t *testing.T) {
	lim := Limits{Wall: 5 * time.Second, CPU: 2 * time.Second, Memory: 256 << 20, Pids: 64, FileSize: 1 << 20, Output: 1 << 10}
	oom := Stream{Head: []byte("Traceback ...\nMemoryError\n"), Total: 26}
	heap := Stream{Head: []byte("start\n"), Tail: []byte("FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory\n"), Total: 1 << 20}
	exit := func(code int) Outcome { return Outcome{Ended: true, Exited: true, Code: code} }
	sig := func(name string) Outcome { return Outcome{Ended: true, Signal: name} }
	with := func(o Outcome, f func(*Outcome)) Outcome { f(&o); return o }
	for _, tc := range []struct {
		name   string
		o      Outcome
		status Status
		detail string // a part of the detail
	}{
		{"exit 0", exit(0), StatusOK, ""},
		{"exit 3", exit(3), StatusError, "exited with code 3"},
		{"exit 1 with MemoryError under an rlimit", with(exit(1), func(o *Outcome) { o.Stderr, o.RlimitMemory = oom, true }), StatusMemoryLimit, "address-space limit 268435456 bytes"},
		{"exit 1 with MemoryError under a cgroup is the program's", with(exit(1), func(o *Outcome) { o.Stderr = oom }), StatusError, "exited with code 1"},
		{"exit 1 at the process limit", with(exit(1), func(o *Outcome) { o.PidsMaxHit = 3 }), StatusError, "exited with code 1; the process limit (64) was reached"},
		{"exit 0 at the process limit is ok", with(exit(0), func(o *Outcome) { o.PidsMaxHit = 3 }), StatusOK, ""},
		{"SIGKILL + OOM kill", with(sig("SIGKILL"), func(o *Outcome) { o.OOMKills = 1 }), StatusMemoryLimit, "killed at the memory limit of 268435456 bytes"},
		{"SIGKILL + OOM kill outranks the CPU limit", with(sig("SIGKILL"), func(o *Outcome) { o.OOMKills, o.CPU = 1, 3*time.Second }), StatusMemoryLimit, "memory limit"},
		{"SIGXCPU", sig("SIGXCPU"), StatusTimeout, "CPU-time limit of 2s"},
		{"SIGKILL at the hard CPU limit", with(sig("SIGKILL"), func(o *Outcome) { o.CPU = 2 * time.Second }), StatusTimeout, "CPU-time limit of 2s"},
		{"SIGKILL below the CPU limit", with(sig("SIGKILL"), func(o *Outcome) { o.CPU = time.Second }), StatusKilled, "killed by SIGKILL"},
		{"SIGSEGV past the CPU limit is not a timeout", with(sig("SIGSEGV"), func(o *Outcome) { o.CPU = 3 * time.Second }), StatusKilled, "killed by SIGSEGV"},
		{"SIGXFSZ", sig("SIGXFSZ"), StatusKilled, "a file larger than 1048576 bytes"},
		{"SIGSYS with a seccomp filter", with(sig("SIGSYS"), func(o *Outcome) { o.Seccomp = true }), StatusKilled, "seccomp filter"},
		{"SIGSYS without one", sig("SIGSYS"), StatusKilled, "killed by SIGSYS"},
		{"SIGABRT with a heap message", with(sig("SIGABRT"), func(o *Outcome) { o.Stderr = heap }), StatusMemoryLimit, "aborted when out of memory (limit 268435456 bytes)"},
		{"SIGABRT", sig("SIGABRT"), StatusKilled, "killed by SIGABRT"},
		{"SIGTERM", sig("SIGTERM"), StatusKilled, "killed by SIGTERM"},
		{"setup failure outranks everything", with(exit(0), func(o *Outcome) { o.Setup, o.Stopped, o.OOMKills = "mount /workspace: EINVAL", StatusTimeout, 1 }), StatusSandboxError, "mount /workspace: EINVAL"},
		{"wall-clock stop", with(sig("SIGKILL"), func(o *Outcome) { o.Stopped, o.StopDetail = StatusTimeout, "killed at the wall-clock limit of 5s" }), StatusTimeout, "wall-clock limit of 5s"},
		{"output flood stop outranks its SIGKILL's CPU", with(sig("SIGKILL"), func(o *Outcome) {
			o.Stopped, o.StopDetail, o.CPU = StatusOutputLimit, "killed for writing more than 16384 bytes", 3*time.Second
		}), StatusOutputLimit, "16384 bytes"},
		{"cancel stop", Outcome{Stopped: StatusCancelled, StopDetail: "cancelled: client went away"}, StatusCancelled, "client went away"},
		{"a stop outranks an OOM kill", with(sig("SIGKILL"), func(o *Outcome) { o.Stopped, o.StopDetail, o.OOMKills = StatusTimeout, "wall", 1 }), StatusTimeout, "wall"},
		{"setup timeout with an OOM kill is memory", Outcome{Stopped: StatusSandboxError, StopDetail: "sandbox setup did not finish within 10s", OOMKills: 1}, StatusMemoryLimit, "did not finish"},
		{"setup timeout", Outcome{Stopped: StatusSandboxError, StopDetail: "sandbox setup did not finish within 10s"}, StatusSandboxError, "did not finish"},
		{"no report", Outcome{}, StatusSandboxError, "sandbox init ended without a report"},
		{"no report, OOM kill", Outcome{OOMKills: 2, PidsMaxHit: 1}, StatusMemoryLimit, "the sandbox ran out of memory (limit 268435456 bytes)"},
		{"no report, process limit", Outcome{PidsMaxHit: 1}, StatusKilled, "the sandbox ended at its process limit (64)"},
		{"refused by the sandbox tool", with(exit(65), func(o *Outcome) { o.Refused = "sandbox-exec refused: syntax error" }), StatusSandboxError, "sandbox-exec refused"},
		{"refused, but killed at the CPU limit first", with(sig("SIGXCPU"), func(o *Outcome) { o.Refused = "sandbox-exec refused: x" }), StatusTimeout, "CPU-time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, detail := Classify(tc.o, lim)
			if status != tc.status || !strings.Contains(detail, tc.detail) {
				t.Errorf("got %s %q, want %s with %q", status, detail, tc.status, tc.detail)
			}
			if (status == StatusOK) != (detail == "") {
				t.Errorf("status %s with detail %q: only ok has none", status, detail)
			}
		})
	}
}

// Own says when the exit code and signal are the program's to report.
func TestOutcomeOwn(t *testing.T) {
	for _, tc := range []struct {
		o    Outcome
		want bool
	}{
		{Outcome{Ended: true, Exited: true}, true},
		{Outcome{Ended: true, Signal: "SIGSEGV"}, true},
		{Outcome{}, false},
		{Outcome{Ended: true, Stopped: StatusTimeout}, false},
		{Outcome{Ended: true, Setup: "exec /x: ENOENT"}, false},
	} {
		if tc.o.Own() != tc.want {
			t.Errorf("%+v: Own() = %v, want %v", tc.o, tc.o.Own(), tc.want)
		}
	}
}
