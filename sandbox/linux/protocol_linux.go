package linux

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/airlock-mcp/airlock/sandbox"
)

// initName is argv[0] of the zygote (started with the argument "zygote"), and the name
// the sandbox's init shows (INIT_NAME in init_linux.c).
const initName = "airlock-sandbox-init"

// Fixed descriptors of the spawner and the init: the parent hands them over as
// ExtraFiles.
const (
	// configFD carries frames from the parent: the config, the cgroup the spawner
	// joins, then the handover with the call itself, which a warm pool sends only when
	// a call arrives.
	configFD = 3
	// reportFD carries frames of reports, written by the init: a unix stream socket,
	// so the init can pass the bridge's listening socket with its REP_LISTENER frame.
	reportFD = 4
)

// Inside the sandbox, everything runs as this uid/gid, mapped to one unprivileged host id.
const (
	sandboxUID = 1000
	sandboxGID = 1000
)

// The wire format between the server and its init. Both ends are the same binary, so
// there is no versioning: a frame is a native-endian uint32 length and its payload;
// fields follow in a fixed order; a string or byte field is a uint32 length and bytes.
// init_linux.c reads and writes exactly what encodeConfig, encodeHandover and
// readReport below write and read.

// initConfig is what the init needs to build the sandbox, sent first over configFD.
type initConfig struct {
	ID string
	// Preload is the argv of an interpreter started before the handover, waiting for
	// the program's argv on its fd 3 (sandbox.Spec.Preload). Empty: the program is
	// started at the handover.
	Preload []string
	Env     []string
	Limits  sandbox.Limits
	Network sandbox.Network
	Mounts  []string
	// Environment is bound read-only at sandbox.EnvironmentDir (sandbox.Spec.Environment).
	Environment string
	OutDir      string
	Artifacts   sandbox.ArtifactLimits
	// RlimitAS applies Limits.Memory (or AddressSpace) as RLIMIT_AS because no memory
	// cgroup enforces it.
	RlimitAS bool
	// Filter is the compiled seccomp program. Empty only in tests that prove a probe can
	// fail without it; no_new_privs is set either way.
	Filter      []byte
	FilterRules int
	// SetupOnly builds the whole sandbox, reports, and exits without running a program
	// (the startup self-check).
	SetupOnly bool
	// NoProc gives the sandbox an empty /proc, and KeepHostname leaves the hostname its
	// new UTS namespace inherits: the substitutes where a container forbids the real
	// thing (adaptations, found by the self-test).
	NoProc, KeepHostname bool
	// ProxyPort is, for network "allowlist", the port on the sandbox's 127.0.0.1 whose
	// listening socket the init passes out (REP_LISTENER); 0 otherwise.
	ProxyPort uint16
	// Landlock: the Landlock tier (cfgLandlock); the landlock frame follows the cgroup
	// frame.
	Landlock bool

	// Set by the launch: the namespaces to create and the host ids the sandbox's ids
	// map to (uids_linux.go). OwnUID: the spawner becomes HostUID/HostGID before it
	// creates the namespace, and proves afterwards that none of that uid's processes is
	// left (a root server). UIDMap, GIDMap: newuidmap and newgidmap write the maps
	// (subordinate ids); empty, the spawner writes them itself.
	CloneFlags       uint32
	HostUID, HostGID uint32
	OwnUID           bool
	UIDMap, GIDMap   string
}

// handover is the call itself: the last frame on configFD.
type handover struct {
	Argv     []string
	Tail     []string // Argv from the code file on, for a preloaded interpreter
	Code     []byte
	CodeFile string
	Files    []sandbox.File
	// Limits are the call's own, never higher than the config's: the init lowers the
	// preloaded interpreter's rlimits to them.
	Limits sandbox.Limits
}

// Report kinds (REP_* in init_linux.c).
const (
	repReady   = 1 // everything up to the call is done
	repStarted = 2 // the program runs
	repExit    = 3 // the program ended; everything else in the sandbox is dead
	repError   = 4 // a setup stage failed; the init exits
	// repLeftover, from the spawner: a process of the sandbox's host uid outlived the
	// sandbox and could not be killed; the uid must not be reused.
	repLeftover = 5
	// repListener comes with the bridge's listening socket (SCM_RIGHTS), during setup.
	repListener = 6
)

// message is one report from the init.
type message struct {
	Kind byte

	// repError: a setup stage failed.
	Stage string
	Errno int
	Err   string

	// repExit: how the program ended, and its artifacts.
	Exit      *exitInfo
	Artifacts []sandbox.Artifact
}

type exitInfo struct {
	Exited  bool
	Code    int
	Signal  int
	CPUUsec int64 // user+system of the program and every reaped descendant
	MaxRSS  int64 // bytes, largest single process
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

// Config flags (CFG_* in init_linux.c).
const (
	cfgSetupOnly = 1 // CFG_SETUP_ONLY
	cfgOwnUID    = 2 // CFG_OWN_UID
)

type encoder struct{ b []byte }

func (e *encoder) u32(v uint32)   { e.b = binary.NativeEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64)   { e.b = binary.NativeEndian.AppendUint64(e.b, v) }
func (e *encoder) bytes(p []byte) { e.u32(uint32(len(p))); e.b = append(e.b, p...) }
func (e *encoder) str(s string)   { e.u32(uint32(len(s))); e.b = append(e.b, s...) }
func (e *encoder) strs(v []string) {
	e.u32(uint32(len(v)))
	for _, s := range v {
		e.str(s)
	}
}

func (e *encoder) rlimits(plan []rlimit) {
	e.u32(uint32(len(plan)))
	for _, r := range plan {
		e.u32(uint32(r.Resource))
		e.u64(r.Value)
	}
}

// frame is the payload with its length in front.
func (e *encoder) frame() []byte {
	out := binary.NativeEndian.AppendUint32(make([]byte, 0, 4+len(e.b)), uint32(len(e.b)))
	return append(out, e.b...)
}

// noNUL is the init's rule for strings it passes to the kernel as C strings.
func noNUL(what string, vals ...string) error {
	for _, v := range vals {
		for i := 0; i < len(v); i++ {
			if v[i] == 0 {
				return fmt.Errorf("%s %q contains a NUL byte", what, v)
			}
		}
	}
	return nil
}

// encodeConfig is the config frame: the root plan, the seccomp program, the environment, the preloaded interpreter, the output
// directory and its limits, and the preloaded interpreter's rlimits.
func encodeConfig(cfg *initConfig, host hostFS) ([]byte, error) {
	if err := noNUL("environment entry", cfg.Env...); err != nil {
		return nil, err
	}
	if err := noNUL("preload argument", cfg.Preload...); err != nil {
		return nil, err
	}
	if err := noNUL("output directory", cfg.OutDir); err != nil {
		return nil, err
	}
	var e encoder
	var flags uint32
	if cfg.SetupOnly {
		flags |= cfgSetupOnly
	}
	if cfg.OwnUID {
		flags |= cfgOwnUID
	}
	if cfg.Landlock {
		flags |= cfgLandlock
	}
	if err := noNUL("id map helper", cfg.UIDMap, cfg.GIDMap); err != nil {
		return nil, err
	}
	e.u32(flags)
	e.u32(cfg.CloneFlags)
	e.u32(cfg.HostUID)
	e.u32(cfg.HostGID)
	e.str(cfg.UIDMap)
	e.str(cfg.GIDMap)
	if cfg.KeepHostname {
		e.str("") // the init leaves the hostname alone
	} else {
		e.str(hostname)
	}
	plan := rootPlan(cfg, host)
	e.u32(uint32(len(plan)))
	for _, op := range plan {
		if err := noNUL("mount plan path", op.Source, op.Target, op.Link, op.Data); err != nil {
			return nil, err
		}
		e.u32(uint32(op.Kind))
		var isFile uint32
		if op.IsFile {
			isFile = 1
		}
		e.u32(isFile)
		e.u64(uint64(op.Flags))
		e.str(op.Source)
		e.str(op.Target)
		e.str(op.Link)
		e.str(op.Data)
		e.bytes(op.Content)
	}
	e.bytes(cfg.Filter)
	e.strs(cfg.Env)
	e.strs(cfg.Preload)
	e.str(cfg.OutDir)
	e.u64(uint64(cfg.Artifacts.MaxFiles))
	e.u64(uint64(cfg.Artifacts.MaxFileBytes))
	e.u64(uint64(cfg.Artifacts.MaxTotal))
	e.u32(maxArtifactEntries)
	e.u32(maxArtifactDepth)
	e.rlimits(rlimits(cfg.Limits, cfg.RlimitAS))
	e.u32(uint32(cfg.ProxyPort))
	return e.frame(), nil
}

// encodeCgroup is the frame after the config: the v1 tasks files the spawner moves
// itself into before it clones the init (none without v1 cgroups).
func encodeCgroup(tasks []string) ([]byte, error) {
	if err := noNUL("cgroup path", tasks...); err != nil {
		return nil, err
	}
	var e encoder
	e.strs(tasks)
	return e.frame(), nil
}

// encodeHandover is the call's frame. applyAS is the config's RlimitAS.
func encodeHandover(h *handover, applyAS bool) ([]byte, error) {
	if err := noNUL("argument", h.Argv...); err != nil {
		return nil, err
	}
	if err := noNUL("file path", h.CodeFile); err != nil {
		return nil, err
	}
	var e encoder
	e.strs(h.Argv)
	e.strs(h.Tail)
	e.bytes(h.Code)
	e.str(h.CodeFile)
	e.u32(uint32(len(h.Files)))
	for _, f := range h.Files {
		if err := noNUL("file path", f.Path); err != nil {
			return nil, err
		}
		e.str(f.Path)
		e.u32(uint32(f.Mode.Perm()))
		e.bytes(f.Data)
	}
	e.rlimits(rlimits(h.Limits, applyAS))
	return e.frame(), nil
}

// maxReport bounds one report frame: the exit report carries the artifacts, which
// their own limits bound far below this.
const maxReport = 1 << 30

// readReport reads one report frame from the init.
func readReport(r io.Reader) (*message, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.NativeEndian.Uint32(hdr[:])
	if n == 0 || n > maxReport {
		return nil, fmt.Errorf("report frame of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	d := decoder{b: b[1:]}
	m := &message{Kind: b[0]}
	switch m.Kind {
	case repReady, repStarted, repLeftover, repListener:
	case repError:
		m.Stage = d.str()
		m.Errno = int(d.u32())
		m.Err = d.str()
	case repExit:
		x := &exitInfo{Exited: d.u8() != 0, Code: int(int32(d.u32())), Signal: int(int32(d.u32())),
			CPUUsec: int64(d.u64()), MaxRSS: int64(d.u64())}
		m.Exit = x
		n := d.u32()
		for i := uint32(0); i < n && d.err == nil; i++ {
			a := sandbox.Artifact{Path: d.str(), Size: int64(d.u64()), Skipped: d.str()}
			hasData := d.u8() != 0
			data := d.bytes()
			if hasData {
				a.Data = append([]byte{}, data...)
				sum := sha256.Sum256(a.Data)
				a.SHA256 = hex.EncodeToString(sum[:])
			}
			m.Artifacts = append(m.Artifacts, a)
		}
	default:
		return nil, fmt.Errorf("unknown report kind %d", m.Kind)
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errors.New("trailing bytes")
	}
	if d.err != nil {
		return nil, fmt.Errorf("malformed report of kind %d: %w", m.Kind, d.err)
	}
	return m, nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil || n < 0 || len(d.b) < n {
		d.err = io.ErrUnexpectedEOF
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) u8() byte {
	if p := d.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.NativeEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if p := d.take(8); p != nil {
		return binary.NativeEndian.Uint64(p)
	}
	return 0
}

func (d *decoder) bytes() []byte { return d.take(int(d.u32())) }
func (d *decoder) str() string   { return string(d.bytes()) }
