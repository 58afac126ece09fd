package linux

// The channels between the server and the sandbox's C processes, in order. Every number
// on them (descriptors, frame kinds, flags, mount steps, the sync byte) is defined once,
// in protocol_linux.h, which the C includes and Go reads through cgo (below and in
// mount_linux.go). Both ends are this one binary, so there is no versioning.
//
//	server (Go)       zygote        spawner             init (pid 1)        interpreter
//	  |--[zygote socket]->|  one-shot only: ZYG_LEAVE, cgroup dirs; SCM_RIGHTS lock
//	  |--[zygote socket]->|  ZYG_SPAWN(_CGROUP); SCM_RIGHTS fds 0-4 (+ the v2 cgroup)
//	  |                   |--clone3--->|
//	  |<-[zygote socket]--|  int32 pid, int32 errno; SCM_RIGHTS pidfd
//	  |--[fd 3] config frame --------->|
//	  |--[fd 3] cgroup frame --------->| joins the v1 cgroup
//	  |                                |--clone(namespaces)->|
//	  |                                |--[sync] SYNC_MAPS-->| id maps written
//	  |                                |                     | setup (root_linux.c)
//	  |<-[fd 4] REP_NETNS + SCM_RIGHTS network namespace ----| a fresh one (netns_linux.go)
//	  |<-[fd 4] REP_LISTENER + SCM_RIGHTS listener ----------| network allowlist only
//	  |                                |                     |--start------------>|
//	  |                                |                     |<-[its fd 4] 1 byte| loaded
//	  |<-[fd 4] REP_READY -----------------------------------|
//	  |--[fd 3] handover frame ----------------------------->|
//	  |                                |                     |--[its fd 3] argv-->|
//	  |<-[fd 4] REP_STARTED ---------------------------------|
//	  |<-[fd 4] REP_EXIT: exit, rusage, artifacts -----------| after every process died
//	  |--SIGTERM---------------------->|--SIGKILL----------->|
//	  |<-[fd 4] REP_LEFTOVER ----------| a root server's spawner, if a process outlived
//	  |--EOF------------->|  one-shot: SIGTERM to its spawners, reap, remove the dirs
//
// fd 3 and fd 4 are the spawner's and the init's: the config pipe's read end and the
// report socket. The interpreter's fd 3 and 4 (PRELOAD_ARGV_FD, PRELOAD_LOADED_FD) are
// two pipes of the init's, only when the config names a preloaded interpreter. A setup
// failure anywhere from the config frame on ends with REP_ERROR {stage, errno, message}
// and exit code EXIT_SETUP_FAILED; a setup-only config (the startup self-check) goes from
// setup straight to REP_STARTED and an empty REP_EXIT.
//
// The wire format of fd 3 and fd 4: a frame is a native-endian uint32 length and its
// payload; fields follow in a fixed order; a string or byte field is a uint32 length and
// bytes. wireConfig.encode and wireHandover.encode write what parse_config and
// parse_handover (wire_linux.c) read; readReport reads what its report functions write.
// wirecheck_linux.go runs that C in-process, so the codec's tests need no sandbox.

// #include "protocol_linux.h"
import "C"

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
// the sandbox's init shows.
const initName = C.INIT_NAME

// Fixed descriptors of the spawner and the init: the parent hands them over as
// ExtraFiles.
const (
	// configFD carries frames from the parent: the config, the cgroup the spawner
	// joins, then the handover with the call itself, which a warm pool sends only when
	// a call arrives.
	configFD = C.CONFIG_FD
	// reportFD carries frames of reports, written by the init: a unix stream socket,
	// so the init can pass the bridge's listening socket with its REP_LISTENER frame.
	reportFD = C.REPORT_FD
)

// exitSetupFailed is the exit code of a spawner or init whose setup failed.
const exitSetupFailed = C.EXIT_SETUP_FAILED

// Inside the sandbox, everything runs as this uid/gid, mapped to one unprivileged host id.
const (
	sandboxUID = 1000
	sandboxGID = 1000
)

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

	// faultWorkspaceMount makes the plan's workspace tmpfs mount fail; only tests set it.
	// Not sent: rootPlan reads it.
	faultWorkspaceMount bool
	// faultMaskSource gives the /proc masks a source that does not exist; only tests
	// set it. Not sent: rootPlan reads it.
	faultMaskSource bool
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

// Report kinds (REP_* in protocol_linux.h).
const (
	repReady   = C.REP_READY   // everything up to the call is done
	repStarted = C.REP_STARTED // the program runs
	repExit    = C.REP_EXIT    // the program ended; everything else in the sandbox is dead
	repError   = C.REP_ERROR   // a setup stage failed; the init exits
	// repLeftover, from the spawner: a process of the sandbox's host uid outlived the
	// sandbox and could not be killed; the uid must not be reused.
	repLeftover = C.REP_LEFTOVER
	// repListener comes with the bridge's listening socket (SCM_RIGHTS), during setup.
	repListener = C.REP_LISTENER
	// repNetns comes with the sandbox's network namespace (SCM_RIGHTS), during setup.
	repNetns = C.REP_NETNS
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

// Config flags (CFG_* in protocol_linux.h).
const (
	cfgSetupOnly = C.CFG_SETUP_ONLY
	cfgOwnUID    = C.CFG_OWN_UID
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

func (e *encoder) rlimits(plan []wireRlimit) {
	e.u32(uint32(len(plan)))
	for _, r := range plan {
		e.u32(r.Resource)
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

// wireConfig is the config frame field by field, in the order of the wire: what the
// init's struct config holds once parse_config has read it.
type wireConfig struct {
	Flags, CloneFlags, HostUID, HostGID uint32
	UIDMap, GIDMap, Hostname            string
	Plan                                []mountOp
	Filter                              []byte
	Env, Preload                        []string
	OutDir                              string
	MaxFiles, MaxFileBytes, MaxTotal    int64
	MaxEntries, MaxDepth, MaxWalk       uint32
	Rlimits                             []wireRlimit
	ProxyPort                           uint32
}

// wireRlimit is one rlimit as the init sets it.
type wireRlimit struct {
	Resource uint32
	Value    uint64
}

func wireRlimits(plan []rlimit) []wireRlimit {
	out := make([]wireRlimit, 0, len(plan))
	for _, r := range plan {
		out = append(out, wireRlimit{uint32(r.Resource), r.Value})
	}
	return out
}

// encodeConfig is the config frame: the root plan, the seccomp program, the environment, the preloaded interpreter, the output
// directory and its limits, and the preloaded interpreter's rlimits.
func encodeConfig(cfg *initConfig, host hostFS) ([]byte, error) {
	w, err := configWire(cfg, host)
	if err != nil {
		return nil, err
	}
	return w.encode(), nil
}

// configWire checks cfg against the init's rules and lays it out as the wire carries it.
func configWire(cfg *initConfig, host hostFS) (*wireConfig, error) {
	if err := noNUL("environment entry", cfg.Env...); err != nil {
		return nil, err
	}
	if err := noNUL("preload argument", cfg.Preload...); err != nil {
		return nil, err
	}
	if err := noNUL("output directory", cfg.OutDir); err != nil {
		return nil, err
	}
	if err := noNUL("id map helper", cfg.UIDMap, cfg.GIDMap); err != nil {
		return nil, err
	}
	arts := cfg.Artifacts // validate refused a zero cap
	w := &wireConfig{
		CloneFlags:   cfg.CloneFlags,
		HostUID:      cfg.HostUID,
		HostGID:      cfg.HostGID,
		UIDMap:       cfg.UIDMap,
		GIDMap:       cfg.GIDMap,
		Hostname:     hostname,
		Plan:         rootPlan(cfg, host),
		Filter:       cfg.Filter,
		Env:          cfg.Env,
		Preload:      cfg.Preload,
		OutDir:       cfg.OutDir,
		MaxFiles:     int64(arts.MaxFiles),
		MaxFileBytes: arts.MaxFileBytes,
		MaxTotal:     arts.MaxTotal,
		MaxEntries:   sandbox.MaxArtifactEntries,
		MaxDepth:     sandbox.MaxArtifactDepth,
		MaxWalk:      sandbox.MaxArtifactWalk,
		Rlimits:      wireRlimits(rlimits(cfg.Limits, cfg.RlimitAS)),
		ProxyPort:    uint32(cfg.ProxyPort),
	}
	if cfg.SetupOnly {
		w.Flags |= cfgSetupOnly
	}
	if cfg.OwnUID {
		w.Flags |= cfgOwnUID
	}
	if cfg.Landlock {
		w.Flags |= cfgLandlock
	}
	if cfg.KeepHostname {
		w.Hostname = "" // the init leaves the hostname alone
	}
	for _, op := range w.Plan {
		if err := noNUL("mount plan path", op.Source, op.Target, op.Link, op.Data); err != nil {
			return nil, err
		}
	}
	return w, nil
}

func (w *wireConfig) encode() []byte {
	// A python run's config is ≈ 10 KiB (the mount plan and the seccomp filter): room
	// for it at once, not the dozen doublings of an empty buffer.
	e := encoder{b: make([]byte, 0, 16<<10)}
	e.u32(w.Flags)
	e.u32(w.CloneFlags)
	e.u32(w.HostUID)
	e.u32(w.HostGID)
	e.str(w.UIDMap)
	e.str(w.GIDMap)
	e.str(w.Hostname)
	e.u32(uint32(len(w.Plan)))
	for _, op := range w.Plan {
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
	e.bytes(w.Filter)
	e.strs(w.Env)
	e.strs(w.Preload)
	e.str(w.OutDir)
	e.u64(uint64(w.MaxFiles))
	e.u64(uint64(w.MaxFileBytes))
	e.u64(uint64(w.MaxTotal))
	e.u32(w.MaxEntries)
	e.u32(w.MaxDepth)
	e.u32(w.MaxWalk)
	e.rlimits(w.Rlimits)
	e.u32(w.ProxyPort)
	return e.frame()
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

// wireHandover is the handover frame field by field, in the order of the wire.
type wireHandover struct {
	Argv, Tail []string
	Code       []byte
	CodeFile   string
	Files      []wireFile
	Rlimits    []wireRlimit
}

// wireFile is one input file as the init writes it into the workspace.
type wireFile struct {
	Path string
	Mode uint32
	Data []byte
}

// encodeHandover is the call's frame. applyAS is the config's RlimitAS.
func encodeHandover(h *handover, applyAS bool) ([]byte, error) {
	if err := noNUL("argument", h.Argv...); err != nil {
		return nil, err
	}
	if err := noNUL("file path", h.CodeFile); err != nil {
		return nil, err
	}
	w := &wireHandover{Argv: h.Argv, Tail: h.Tail, Code: h.Code, CodeFile: h.CodeFile,
		Rlimits: wireRlimits(rlimits(h.Limits, applyAS))}
	for _, f := range h.Files {
		if err := noNUL("file path", f.Path); err != nil {
			return nil, err
		}
		w.Files = append(w.Files, wireFile{f.Path, uint32(f.Mode.Perm()), f.Data})
	}
	return w.encode(), nil
}

func (w *wireHandover) encode() []byte {
	var e encoder
	e.strs(w.Argv)
	e.strs(w.Tail)
	e.bytes(w.Code)
	e.str(w.CodeFile)
	e.u32(uint32(len(w.Files)))
	for _, f := range w.Files {
		e.str(f.Path)
		e.u32(f.Mode)
		e.bytes(f.Data)
	}
	e.rlimits(w.Rlimits)
	return e.frame()
}

// maxOps bounds the mount plan's steps, as the init checks it.
const maxOps = C.MAX_OPS

// maxReport bounds one report frame: the exit report carries the artifacts, which
// their own limits bound far below this.
const maxReport = C.MAX_FRAME

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
	case repReady, repStarted, repLeftover, repListener, repNetns:
	case repError:
		m.Stage = d.str()
		m.Errno = int(d.u32())
		m.Err = d.str()
	case repExit:
		x := &exitInfo{Exited: d.flag(), Code: int(int32(d.u32())), Signal: int(int32(d.u32())),
			CPUUsec: int64(d.u64()), MaxRSS: int64(d.u64())}
		m.Exit = x
		n := d.u32()
		for i := uint32(0); i < n && d.err == nil; i++ {
			a, err := d.artifact()
			if err != nil && d.err == nil {
				d.err = err
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

// artifactSkips maps the walker's reason codes (ART_* in protocol_linux.h) to the
// reasons every OS gives (sandbox/artifacts.go).
var artifactSkips = map[byte]sandbox.Skip{
	C.ART_RETURNED:       sandbox.SkipNone,
	C.ART_HARD_LINK:      sandbox.SkipHardLink,
	C.ART_TOO_MANY_FILES: sandbox.SkipTooManyFiles,
	C.ART_FILE_TOO_LARGE: sandbox.SkipFileTooLarge,
	C.ART_TOTAL_CAP:      sandbox.SkipTotalCap,
	C.ART_UNREADABLE:     sandbox.SkipUnreadable,
	C.ART_CHANGED:        sandbox.SkipChanged,
	C.ART_PATH_TOO_LONG:  sandbox.SkipPathTooLong,
	C.ART_SYMLINK:        sandbox.SkipSymlink,
	C.ART_NOT_REGULAR:    sandbox.SkipNotRegular,
	C.ART_TOO_DEEP:       sandbox.SkipTooDeep,
}

// artUnlisted is the code of the closing entry, whose size counts the entries left out.
const artUnlisted = C.ART_UNLISTED

// artCut is the closing entry's code when the walk stopped at sandbox.MaxArtifactWalk.
const artCut = C.ART_CUT

// artifact reads one entry of the exit report's list: path, size, reason code, data
// (only a returned file's, exactly its size).
func (d *decoder) artifact() (sandbox.Artifact, error) {
	path, size, code, data := d.str(), int64(d.u64()), d.u8(), d.bytes()
	if d.err != nil {
		return sandbox.Artifact{}, nil
	}
	if code == artUnlisted || code == artCut {
		if size < 0 || len(data) != 0 || path != "..." {
			return sandbox.Artifact{}, fmt.Errorf("closing entry %q of %d, with %d bytes", path, size, len(data))
		}
		if code == artCut {
			return sandbox.CutArtifact(int(size)), nil
		}
		return sandbox.UnlistedArtifact(int(size)), nil
	}
	skip, ok := artifactSkips[code]
	switch {
	case !ok:
		return sandbox.Artifact{}, fmt.Errorf("unknown artifact reason %d", code)
	case skip != sandbox.SkipNone && len(data) != 0:
		return sandbox.Artifact{}, errors.New("data on a skipped entry")
	case skip == sandbox.SkipNone && int64(len(data)) != size:
		return sandbox.Artifact{}, fmt.Errorf("%d bytes of a %d-byte file", len(data), size)
	}
	a := sandbox.Artifact{Path: path, Size: size, Skipped: skip.Reason()}
	if skip == sandbox.SkipNone {
		a.Data = append([]byte{}, data...)
		sum := sha256.Sum256(a.Data)
		a.SHA256 = hex.EncodeToString(sum[:])
	}
	return a, nil
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

// flag is a boolean byte: 0 or 1, nothing else.
func (d *decoder) flag() bool {
	v := d.u8()
	if v > 1 && d.err == nil {
		d.err = fmt.Errorf("flag byte %d", v)
	}
	return v == 1
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
