// Package policy holds airlock's rules as pure data and functions: which languages exist
// and are enabled, how a call's requested limits are clamped to the operator's maximums,
// and the advisory Python import policy. It makes no OS calls except interpreter
// discovery at startup (Detect).
package policy

// CONTRACT STUB: the signatures below are the contract the tools layer builds on.
// The policy owner replaces the bodies; keep the names and shapes.

import (
	"errors"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

var (
	// ErrLanguageNotEnabled: the operator did not enable the language.
	ErrLanguageNotEnabled = errors.New("language not enabled")
	// ErrLanguageNotInstalled: enabled, but no real interpreter binary was found.
	ErrLanguageNotInstalled = errors.New("language not installed")
	// ErrCodeTooLarge: code over the configured size cap.
	ErrCodeTooLarge = errors.New("code too large")
	// ErrInvalidRequest: any other bad argument (bad file path, bad limit).
	ErrInvalidRequest = errors.New("invalid request")
)

// Language is one entry of the registry, as detected on this host.
type Language struct {
	Name        string   `json:"name"`
	Interpreter string   `json:"interpreter"` // absolute real binary; "" when not installed
	Version     string   `json:"version"`
	Enabled     bool     `json:"enabled"`
	Installed   bool     `json:"installed"`
	File        string   `json:"file"`   // code file name in the workspace, e.g. main.py
	Argv        []string `json:"argv"`   // full argv, argv[0] == Interpreter
	Env         []string `json:"env"`    // the language's own variables
	Mounts      []string `json:"mounts"` // install prefixes outside the standard dirs
}

// Spec builds the sandbox spec for running code in this language with the given limits:
// argv (plus the program's own args), code file, env, mounts and the language's limit
// adjustments (e.g. node's address-space floor).
func (l Language) Spec(code []byte, args []string, limits sandbox.Limits) sandbox.Spec {
	return sandbox.Spec{}
}

// Registry is the set of known languages, detected once at startup.
type Registry struct {
	langs []Language
}

// Detect resolves every known language's interpreter to a real binary (never a shim) and
// its version, and marks the names in enabled as enabled. An unknown name is an error.
func Detect(enabled []string) (*Registry, error) { return &Registry{}, nil }

// Lookup returns an enabled, installed language, or an error wrapping
// ErrLanguageNotEnabled / ErrLanguageNotInstalled whose text lists the enabled languages.
func (r *Registry) Lookup(name string) (Language, error) { return Language{}, ErrLanguageNotEnabled }

// Languages returns every known language, enabled or not, in a stable order.
func (r *Registry) Languages() []Language { return r.langs }

// Enabled returns the names of the enabled and installed languages, sorted.
func (r *Registry) Enabled() []string { return nil }

// Request is what one call asks for; zero fields mean "the default".
type Request struct {
	Timeout time.Duration
	Memory  int64
	// further per-call knobs may be added; each may only lower limits
}

// Bounds are the operator's defaults and maximums.
type Bounds struct {
	Default sandbox.Limits `json:"default"`
	Max     sandbox.Limits `json:"max"`
}

// DefaultBounds are airlock's built-in defaults and maximums.
func DefaultBounds() Bounds { return Bounds{} }

// Validate checks that every Default is positive and within Max.
func (b Bounds) Validate() error { return nil }

// Clamp returns the limits for one call: defaults, lowered by the request, never above Max.
func (b Bounds) Clamp(req Request) sandbox.Limits { return b.Default }

// Imports is the advisory Python import policy (defence in depth, not a boundary).
type Imports struct {
	DenyImport []string `json:"deny_import"` // modules denied for `import X`
	DenyFrom   []string `json:"deny_from"`   // modules denied for `from X import ...`
}

// Violation is an import the policy denied.
type Violation struct {
	Module string `json:"module"`
	Line   int    `json:"line"`
	How    string `json:"how"` // "static" or "runtime"
}

// Apply rewrites spec so the import policy is enforced inside the sandbox before user code
// runs (python only; other languages are returned unchanged).
func (p Imports) Apply(spec sandbox.Spec) sandbox.Spec { return spec }

// Denied reports whether a finished run was stopped by the import policy.
func (p Imports) Denied(res sandbox.Result) (Violation, bool) { return Violation{}, false }
