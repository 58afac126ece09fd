// Package sandbox defines the platform-neutral contract between airlock's tools and the
// per-OS isolation backends: what to run (Spec), how it ended (Result), and which
// isolation is really in effect (Report).
//
// The program's own outcome is always a Status in the Result. A Go error from Run means
// the sandbox itself failed (or refused to start because isolation is missing), never
// that the user's code failed.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/airlock-mcp/airlock/internal/stamp"
)

// Sandbox runs one program in a fresh, disposable sandbox per call.
type Sandbox interface {
	// Run builds a new sandbox for spec, runs it once and destroys it.
	Run(ctx context.Context, spec Spec) (Result, error)
	// Probe reports which isolation layers are really in effect on this host.
	Probe(ctx context.Context) (Report, error)
}

// Network is the network mode of a sandbox.
type Network string

const (
	// NetworkNone gives the sandbox its own network namespace with only loopback.
	NetworkNone Network = "none"
	// NetworkHost shares the host network. Only the operator may enable it.
	NetworkHost Network = "host"
	// NetworkAllowlist gives the sandbox loopback only, plus a bridge to the server's
	// egress proxy, which lets through the destinations of Spec.Egress and nothing else.
	NetworkAllowlist Network = "allowlist"
)

// Egress is what a sandbox with NetworkAllowlist may reach, through the proxy.
type Egress struct {
	// Domains are exact names ("pypi.org"), "*.suffix" patterns that match subdomains
	// only ("*.pythonhosted.org" matches files.pythonhosted.org, not pythonhosted.org),
	// or IP literals, which are refused unless listed.
	Domains []string `json:"domains"`
	Ports   []int    `json:"ports"`
	// AllowPrivate lets names resolve to other hosts' private addresses: RFC 1918,
	// link-local, CGNAT, ULA and documentation ranges. It does not open this host
	// (AllowLoopback). Cloud metadata, unspecified and multicast addresses stay refused.
	AllowPrivate bool `json:"allow_private"`
	// AllowLoopback lets names (and listed IP literals) reach this host on the listed
	// ports: loopback, and the host's own interface addresses (an own address in a
	// private range takes AllowPrivate too). Those reach every local service, the
	// server's own HTTP transport included, so it is a choice of its own.
	AllowLoopback bool `json:"allow_loopback"`
	// MaxBytes caps the bytes of one call, both directions, every connection together.
	MaxBytes int64 `json:"max_bytes"`
	// MaxConnections caps the connections of one call open at once.
	MaxConnections int `json:"max_connections"`
}

// Connection is one connection the sandbox asked the egress proxy for.
type Connection struct {
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Addr     string `json:"addr,omitempty"` // the address connected to (or refused)
	Sent     int64  `json:"sent"`           // bytes from the sandbox
	Received int64  `json:"received"`       // bytes to the sandbox
	// Verdict is "allowed", "refused" (Rule says why), "failed" (the destination did
	// not answer) or "cut" (the byte cap ended it).
	Verdict string `json:"verdict"`
	Rule    string `json:"rule,omitempty"`
}

// NetworkUse is what a call did through the egress proxy.
type NetworkUse struct {
	// Connections lists the first connections of the call; Omitted counts the rest.
	Connections []Connection `json:"connections"`
	Omitted     int          `json:"omitted,omitempty"`
	Allowed     int          `json:"allowed"`
	Refused     int          `json:"refused"`
	Sent        int64        `json:"sent"`
	Received    int64        `json:"received"`
	// Capped is set when the byte cap (MaxBytes) cut the call's traffic.
	Capped   bool  `json:"capped,omitempty"`
	MaxBytes int64 `json:"max_bytes"`
}

// EnvironmentDir is where a Spec's Environment appears inside the sandbox, whatever its
// host path: programs, the interpreter's prefix and the pool's templates see one fixed
// path. (The host path is not secret: /proc/self/mountinfo names a bind's source.)
const EnvironmentDir = "/env"

// Limits bound one run. Policy fills every field; a backend refuses a spec with a zero
// (Validate), because a zero must never mean "unlimited" and a backend's guess would be
// a second set of defaults.
type Limits struct {
	Wall      time.Duration `json:"wall"`       // wall-clock timeout, counted from program start
	CPU       time.Duration `json:"cpu"`        // CPU time (RLIMIT_CPU, cgroup quota accounting)
	Memory    int64         `json:"memory"`     // bytes of memory (cgroup) or address space (fallback)
	Pids      int           `json:"pids"`       // processes and threads
	FileSize  int64         `json:"file_size"`  // largest single file the program may write
	OpenFiles int           `json:"open_files"` // RLIMIT_NOFILE
	Workspace int64         `json:"workspace"`  // size of the writable workspace
	Output    int64         `json:"output"`     // bytes kept per stream (stdout, stderr)
	// AddressSpace is RLIMIT_AS, applied only where no memory cgroup enforces Memory.
	// Zero means Memory. Languages that reserve large virtual memory (node) raise it.
	AddressSpace int64 `json:"address_space"`
}

// Validate refuses a zero or negative limit, naming it; only AddressSpace may be zero.
func (l Limits) Validate() error {
	var bad []string
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"wall", int64(l.Wall)}, {"cpu", int64(l.CPU)}, {"memory", l.Memory}, {"pids", int64(l.Pids)},
		{"file_size", l.FileSize}, {"open_files", int64(l.OpenFiles)}, {"workspace", l.Workspace}, {"output", l.Output},
	} {
		if f.v <= 0 {
			bad = append(bad, f.name)
		}
	}
	if l.AddressSpace < 0 {
		bad = append(bad, "address_space")
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: limits %s must be positive (policy fills every limit)", ErrInvalidSpec, strings.Join(bad, ", "))
	}
	return nil
}

// SelfTestLimits bound a backend's own start-up runs, to which no call's limits apply:
// they start an interpreter at most.
func SelfTestLimits() Limits {
	return Limits{Wall: 30 * time.Second, CPU: 10 * time.Second, Memory: 512 << 20, Pids: 32,
		FileSize: 16 << 20, OpenFiles: 64, Workspace: 64 << 20, Output: 64 << 10}
}

// File is an input file placed in the workspace before the program starts.
type File struct {
	Path string      `json:"path"` // slash-separated, relative, already validated by policy
	Data []byte      `json:"data"`
	Mode fs.FileMode `json:"mode"` // permission bits; 0 means 0644
}

// ArtifactLimits bound what comes back from the output directory.
type ArtifactLimits struct {
	MaxFiles     int   `json:"max_files"`
	MaxFileBytes int64 `json:"max_file_bytes"`
	MaxTotal     int64 `json:"max_total"`
}

// Progress is a snapshot of a running program, for MCP progress notifications.
type Progress struct {
	Elapsed     time.Duration
	StdoutBytes int64
	StderrBytes int64
}

// Spec is one program to run.
type Spec struct {
	ID       string   // execution id; Run generates one when empty
	Language string   // for logs and reports only
	Argv     []string // argv[0] is the absolute path of a real interpreter binary
	Code     []byte   // written to CodeFile in the workspace before start
	CodeFile string   // workspace-relative name of the code file, e.g. "main.py"
	Stdin    []byte
	Files    []File
	// Env holds the language's own variables (KEY=VALUE). The backend sets the fixed base
	// (PATH, HOME, LANG, TMPDIR) itself and never passes the server's environment on.
	Env     []string
	Limits  Limits
	Network Network
	// Egress is the allowlist of NetworkAllowlist (nil otherwise).
	Egress *Egress `json:"egress,omitempty"`
	// Mounts are extra host directories the interpreter needs, bound read-only
	// (an install prefix outside /usr, e.g. /opt/python).
	Mounts []string
	// Environment is a host directory (a venv, a prefix, a node_modules parent) bound
	// read-only at EnvironmentDir, where Argv and Env refer to it; empty: none.
	Environment string
	// OutDir is the workspace-relative directory whose regular files come back as
	// artifacts; empty disables artifacts.
	OutDir    string
	Artifacts ArtifactLimits
	// Preload is how a warm pool may start the interpreter before the call arrives: an
	// argv that loads the interpreter, writes one byte to fd 4 and closes it, reads the
	// program's argv from fd 3 (Argv from CodeFile on, each argument NUL-terminated,
	// until EOF) and then runs it as Argv would. Empty: a pool starts the program itself at the call. The cold path ignores
	// it. Anything that changes how Argv runs (an import guard) must clear it.
	Preload []string
	// Progress, when set, is called periodically while the program runs. It must not block.
	Progress func(Progress) `json:"-"`
}

// Warmer is implemented by backends that can prepare single-use sandboxes before the
// calls that will use them. Each prepared sandbox serves exactly one call and is then
// destroyed like any other.
type Warmer interface {
	// Warm keeps size sandboxes ready for each template (a Spec without code). A Run
	// whose spec is the template's plus code, files, stdin and args, with limits no
	// higher than the template's, takes one; any other Run is built cold.
	Warm(templates []Spec, size int)
	// PoolStats reports the pool's state and its idle cost.
	PoolStats() PoolStats
	// Close kills every prepared sandbox and stops refilling.
	Close() error
}

// PoolStats describes a warm pool.
type PoolStats struct {
	Size       int   `json:"size"`        // sandboxes kept ready per template
	Templates  int   `json:"templates"`   // how many templates
	Ready      int   `json:"ready"`       // prepared and waiting now
	Hits       int64 `json:"hits"`        // calls served from the pool
	Misses     int64 `json:"misses"`      // calls built cold while a template matched
	IdleMemory int64 `json:"idle_memory"` // bytes held by the waiting sandboxes
}

// Status is how a program ended.
type Status string

const (
	StatusOK            Status = "ok"             // exited 0
	StatusError         Status = "error"          // exited non-zero
	StatusTimeout       Status = "timeout"        // killed at the wall or CPU limit
	StatusMemoryLimit   Status = "memory_limit"   // killed or failed at the memory limit
	StatusOutputLimit   Status = "output_limit"   // killed for flooding output past the ceiling
	StatusKilled        Status = "killed"         // ended by a signal (not one of the above)
	StatusCancelled     Status = "cancelled"      // the caller cancelled (client cancel, disconnect, shutdown)
	StatusPolicyDenied  Status = "policy_denied"  // refused by policy before or while running
	StatusSandboxError  Status = "sandbox_error"  // the sandbox failed; nothing reliable ran
	StatusNotApplicable Status = "not_applicable" // reserved for probe reports
)

// Stream is one captured output stream. When the program wrote more than the cap, Head
// holds the first bytes and Tail the last ones; Total counts everything it wrote.
type Stream struct {
	Head  []byte `json:"head"`
	Tail  []byte `json:"tail"`
	Total int64  `json:"total"`
}

// Truncated reports whether bytes were dropped between Head and Tail.
func (s Stream) Truncated() bool { return s.Dropped() > 0 }

// Dropped is the number of bytes the program wrote that are not kept.
func (s Stream) Dropped() int64 { return s.Total - int64(len(s.Head)) - int64(len(s.Tail)) }

// Bytes joins Head and Tail without a marker (callers that show output use sanitize).
func (s Stream) Bytes() []byte {
	if len(s.Tail) == 0 {
		return s.Head
	}
	b := make([]byte, 0, len(s.Head)+len(s.Tail))
	return append(append(b, s.Head...), s.Tail...)
}

// Artifact is a file the program left in the output directory.
type Artifact struct {
	Path    string `json:"path"` // relative to the output directory
	Size    int64  `json:"size"`
	SHA256  string `json:"sha256,omitempty"`
	Data    []byte `json:"data,omitempty"`    // nil when skipped
	Skipped string `json:"skipped,omitempty"` // why it was not returned (size, type, link)
}

// Result is how one run ended. It is meaningful whenever Run returns a nil error.
type Result struct {
	ID         string        `json:"id"`
	Status     Status        `json:"status"`
	ExitCode   int           `json:"exit_code"` // -1 when ended by a signal
	Signal     string        `json:"signal,omitempty"`
	Stdout     Stream        `json:"stdout"`
	Stderr     Stream        `json:"stderr"`
	Wall       time.Duration `json:"wall"`
	CPU        time.Duration `json:"cpu"`
	PeakMemory int64         `json:"peak_memory"` // bytes
	Artifacts  []Artifact    `json:"artifacts,omitempty"`
	// Network is what the call did through the egress proxy (NetworkAllowlist only).
	Network *NetworkUse `json:"network,omitempty"`
	// Detail says why, in one line, when Status is not ok: which limit, which stage.
	Detail string `json:"detail,omitempty"`
	// Isolation is the tier the run had (IsolationNamespaces or IsolationLandlock on
	// Linux; empty elsewhere).
	Isolation string `json:"isolation,omitempty"`
	// Restarted: a session call whose session's processes were killed and its driver
	// started again (sandbox.Session); the files are kept, the interpreter's state is not.
	Restarted bool `json:"restarted,omitempty"`
}

// Report describes the isolation really in effect.
type Report struct {
	Platform string `json:"platform"` // GOOS
	Backend  string `json:"backend"`  // e.g. "linux-namespaces", "darwin-seatbelt"
	// Isolation is the Linux tier (IsolationNamespaces, IsolationLandlock); empty
	// elsewhere.
	Isolation string  `json:"isolation,omitempty"`
	Layers    []Layer `json:"layers"`
}

// Layer is one isolation mechanism and whether it is in effect.
type Layer struct {
	Name     string `json:"name"`             // e.g. "user-namespace", "seccomp", "cgroup-memory"
	Active   bool   `json:"active"`           // really in effect on this host now
	Required bool   `json:"required"`         // the configuration refuses to run without it
	Detail   string `json:"detail,omitempty"` // how: mode, rule count, version, path
	Fix      string `json:"fix,omitempty"`    // what a user can do when it is not active
}

// Layer looks a layer up by name.
func (r Report) Layer(name string) (Layer, bool) {
	for _, l := range r.Layers {
		if l.Name == name {
			return l, true
		}
	}
	return Layer{}, false
}

// Missing lists the required layers that are not active.
func (r Report) Missing() []Layer {
	var out []Layer
	for _, l := range r.Layers {
		if l.Required && !l.Active {
			out = append(out, l)
		}
	}
	return out
}

var (
	// ErrUnavailable means isolation the configuration requires is not available on this
	// host. Run refuses instead of running unsandboxed; the wrapped error names the cause
	// and the fix.
	ErrUnavailable = errors.New("sandbox unavailable")
	// ErrInvalidSpec means the Spec itself is unusable (no argv, relative interpreter, …).
	ErrInvalidSpec = errors.New("invalid sandbox spec")
)

// The Linux isolation tiers (Options.Isolation, Result.Isolation).
const (
	IsolationAuto       = "auto"
	IsolationNamespaces = "namespaces"
	IsolationLandlock   = "landlock"
)

// Options configure a backend once, at startup.
type Options struct {
	// HostUser is the unprivileged host account that every sandbox runs as when the
	// server runs as root and UIDRange is "off" (default "nobody").
	HostUser string `json:"host_user"`
	// UIDRange is the block of host ids ("FIRST-LAST") a root server gives its sandboxes,
	// one uid and gid per live sandbox; empty means the backend's default block, "off"
	// the shared HostUser. An unprivileged server uses its subordinate ids instead.
	UIDRange string `json:"uid_range"`
	// Cgroups is "auto" (use them where available), "require" (refuse without them) or
	// "off" (rlimits only).
	Cgroups string `json:"cgroups"`
	// AllowDegraded lets the server run when an optional layer is missing. Required
	// layers (namespaces, seccomp, no_new_privs) are never optional.
	AllowDegraded bool `json:"allow_degraded"`
	// StateDir holds what must survive a crash for cleanup (per-platform default when empty).
	StateDir string `json:"state_dir"`
	// Isolation is the Linux tier: IsolationAuto (the default: namespaces, refusing
	// where they are unavailable), IsolationNamespaces, or IsolationLandlock, the weaker
	// tier for hosts without user namespaces, entered only when the operator asks.
	Isolation string `json:"isolation"`
	// SelfTest are programs a backend's start-up self-test runs once under the real
	// sandbox before it serves: each enabled language with an empty program, exactly as a
	// call would run it (argv, env, mounts). The darwin backend runs them; Linux does not
	// need them. Their Limits are the backend's own.
	SelfTest []Spec `json:"-"`
	// Stamps, when set, lets the backend reuse a self-check that passed recently for the
	// same binary, kernel and settings instead of building one more sandbox, and record
	// the one it passes (a one-shot command: `airlock run`). Nil: always check in full.
	Stamps *stamp.Store `json:"-"`
	// Networks are the network modes calls will use; a backend may prepare only those
	// (Linux compiles a seccomp filter per mode) and refuse a spec with another. Empty:
	// every mode.
	Networks []Network `json:"-"`
	// OneShot: the backend serves one call and is closed right after it (`airlock run`).
	// A finished sandbox is then torn down at once, beside the delivery of its result,
	// instead of after the pause that keeps a server's teardown out of its way.
	OneShot bool `json:"-"`
}
