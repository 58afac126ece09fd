package policy

import _ "embed"

// Session drivers: the program a session's sandbox runs (sandbox.Sessions). Each is the
// language's own interpreter running the driver as its code file, so a session's
// sandbox is built, and served from the warm pool, exactly like a single-use call's.
//
// The protocol, on the driver's stdin, stdout and stderr (KEY is 32 hex digits the
// server draws per session; M is "\x1eAIRLOCK-KEY:"):
//
//	server → stdin:   KEY "\n"                         once, first
//	driver → both:    M "ready:PID\n"                  the supervisor is up; PID is its
//	                                                   pid in the sandbox (no call has run)
//	server → stdin:   M "call:SEQ:NCODE:NSTDIN\n" code stdin    one per call
//	driver → both:    (the call's output) M "end:SEQ:RC\n"     the call is over
//	driver → both:    M "up\n"                         a worker is ready for calls
//	driver → both:    M "restart:exit:N\n" | M "restart:signal:N\n"
//	                  the worker ended (exit(), a kill) and a new one is starting; the
//	                  call it was running ends at the new worker's "up"
//
// The server attributes output between its frame and the end markers on both streams
// to the call; it trusts the markers for nothing but that split and the exit code. The
// code can forge a marker (the key is in the driver's memory), which only misattributes
// its own session's output.
var (
	//go:embed drivers/python.py
	pythonDriver []byte
	//go:embed drivers/node.js
	nodeDriver []byte
	//go:embed drivers/bash.sh
	bashDriver []byte
)

// SessionDriver is the driver source of the language named lang, or false when the
// language has no sessions.
func SessionDriver(lang string) ([]byte, bool) {
	switch lang {
	case "python":
		return pythonDriver, true
	case "javascript":
		return nodeDriver, true
	case "bash":
		return bashDriver, true
	}
	return nil, false
}

// SessionStdin reports whether a session in lang can give each call its own stdin.
func SessionStdin(lang string) bool { return lang != "javascript" }
