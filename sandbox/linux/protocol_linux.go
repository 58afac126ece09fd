package linux

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/airlock-mcp/airlock/sandbox"
)

// initName is argv[0] of the re-exec'd sandbox init.
const initName = "airlock-sandbox-init"

// Fixed descriptors of the init: the parent hands them over as ExtraFiles.
const (
	// configFD carries JSON lines from the parent: the initConfig, then "joined" once
	// the init is in its cgroup (it builds its root meanwhile), then the handover with
	// the call itself, which a warm pool sends only when a call arrives.
	configFD = 3
	reportFD = 4 // JSON lines of message, written by the init
)

// exitSetupFailed is the init's exit code after it reported a setup error.
const exitSetupFailed = 125

// Inside the sandbox, everything runs as this uid/gid, mapped to one unprivileged host id.
const (
	sandboxUID = 1000
	sandboxGID = 1000
)

// initConfig is what the init needs to build the sandbox, sent first over configFD.
type initConfig struct {
	ID string `json:"id"`
	// Preload is the argv of an interpreter started before the handover, waiting for
	// the program's argv on its fd 3 (sandbox.Spec.Preload). Empty: the program is
	// started at the handover.
	Preload   []string               `json:"preload,omitempty"`
	Env       []string               `json:"env"`
	Limits    sandbox.Limits         `json:"limits"`
	Network   sandbox.Network        `json:"network"`
	Mounts    []string               `json:"mounts"`
	OutDir    string                 `json:"out_dir"`
	Artifacts sandbox.ArtifactLimits `json:"artifacts"`
	// RlimitAS applies Limits.Memory (or AddressSpace) as RLIMIT_AS because no memory
	// cgroup enforces it.
	RlimitAS bool `json:"rlimit_as"`
	// Filter is the compiled seccomp program. Empty only in tests that prove a probe can
	// fail without it; no_new_privs is set either way.
	Filter      []byte `json:"filter"`
	FilterRules int    `json:"filter_rules"`
	// SetupOnly builds the whole sandbox, reports, and exits without running a program
	// (the startup self-check).
	SetupOnly bool `json:"setup_only"`
}

// joined is the second line on configFD.
type joined struct {
	Joined bool `json:"joined"`
}

// handover is the call itself: the last line on configFD.
type handover struct {
	Argv     []string       `json:"argv"`
	Tail     []string       `json:"tail,omitempty"` // Argv from the code file on, for a preloaded interpreter
	Code     []byte         `json:"code"`
	CodeFile string         `json:"code_file"`
	Files    []sandbox.File `json:"files"`
	// Limits are the call's own, never higher than the config's: the init lowers the
	// preloaded interpreter's rlimits to them.
	Limits sandbox.Limits `json:"limits"`
}

// message is one line the init writes on reportFD.
type message struct {
	Kind string `json:"kind"` // "ready", "started", "exit", "error"

	// kind "error": a setup stage failed.
	Stage string `json:"stage,omitempty"`
	Errno int    `json:"errno,omitempty"`
	Err   string `json:"err,omitempty"`

	// kind "exit": how the program ended, and its artifacts.
	Exit      *exitInfo          `json:"exit,omitempty"`
	Artifacts []sandbox.Artifact `json:"artifacts,omitempty"`
	// SeccompRules is the number of rules in the loaded filter (kind "started").
	SeccompRules int `json:"seccomp_rules,omitempty"`
}

type exitInfo struct {
	Exited  bool  `json:"exited"`
	Code    int   `json:"code"`
	Signal  int   `json:"signal"`
	CPUUsec int64 `json:"cpu_usec"` // user+system of the program and every reaped descendant
	MaxRSS  int64 `json:"max_rss"`  // bytes, largest single process
}

// SetupError is a failure of one stage of the sandbox setup inside the init.
type SetupError struct {
	Stage string
	Errno syscall.Errno
	Msg   string
}

func (e *SetupError) Error() string {
	return fmt.Sprintf("sandbox setup failed at %s: %s", e.Stage, e.Msg)
}

func (e *SetupError) Unwrap() error {
	if e.Errno != 0 {
		return e.Errno
	}
	return nil
}

// stageError ties an error to a setup stage and keeps its errno for the report.
func stageError(stage string, err error) *SetupError {
	se := &SetupError{Stage: stage, Msg: err.Error()}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		se.Errno = errno
	}
	return se
}
