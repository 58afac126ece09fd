package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/airlock-mcp/airlock/internal/trust"
	"github.com/airlock-mcp/airlock/sandbox"
)

// ErrAudit means a run's audit line could not be written. The run's result is then
// withheld: an execution the log does not show must not be reported as a success.
var ErrAudit = errors.New("audit log")

// Audit appends one JSON line per run to a file, rotating it to PATH.1 when it grows
// past a size, so a busy server cannot fill the disk. Each line is written with one
// write(2) on an O_APPEND descriptor and fsync'd before Write returns, so a line is on
// disk before the caller answers the client, and a crash right after an answer loses
// nothing.
//
// Calls that end together share an fsync (group commit): a Write appends its line, then
// waits for the fsync in progress, if any, and does the next one itself unless that one
// covered its line. An fsync covers every line written before it began; with 8 calls in
// flight one fsync often serves several, and each line is still on disk before its Write
// returns.
type Audit struct {
	// syncMu is held while an fsync runs (and around a rotation, which must not close
	// the file under it). Lock order: syncMu, then mu.
	syncMu sync.Mutex
	// written counts the lines written to the file, synced those an fsync that
	// succeeded covered; failed is the last line of a failed fsync: those lines may be
	// lost (Linux reports a writeback error once), so their Writes fail.
	written, synced, failed uint64
	syncErr                 error
	mu                      sync.Mutex
	path                    string
	max                     int64
	f                       auditFile
	size                    int64
	open                    func(path string) (auditFile, error)
	// torn is set after a short write (a full disk), so the next line starts on a line
	// of its own instead of extending the torn one.
	torn bool
	// log, when set, takes the records instead of a file (OpenDefaultAudit's last resort).
	log *slog.Logger
}

// auditFile is the part of *os.File the log uses; tests substitute it.
type auditFile interface {
	io.Writer
	Sync() error
	Close() error
	Stat() (os.FileInfo, error)
}

// AuditRecord is one line of the audit log. It holds the code's hash and size, never the
// code, its stdin or its output.
type AuditRecord struct {
	Time      time.Time `json:"time"`
	ID        string    `json:"id"`
	Transport string    `json:"transport,omitempty"`
	Client    string    `json:"client,omitempty"`
	Principal string    `json:"principal,omitempty"`
	Language  string    `json:"language"`
	// Environment is the environment the call ran in, if any.
	Environment string `json:"environment,omitempty"`
	CodeSHA256  string `json:"code_sha256"`
	CodeBytes   int    `json:"code_bytes"`
	Status      string `json:"status"`
	ExitCode    int    `json:"exit_code"`
	WallMs      int64  `json:"wall_ms"`
	CPUMs       int64  `json:"cpu_ms"`
	PeakMemory  int64  `json:"peak_memory_bytes"`
	DurationMs  int64  `json:"duration_ms"`
	Limits      struct {
		WallMs      int64 `json:"wall_ms"`
		MemoryBytes int64 `json:"memory_bytes"`
		Pids        int   `json:"pids"`
		OutputBytes int64 `json:"output_bytes"`
	} `json:"limits"`
	Violation string `json:"violation,omitempty"`
	Error     string `json:"error,omitempty"`
	// Session is the run_code session the call ran in, if any ("new" when a session
	// could not be started); SessionRestarted says its processes were restarted.
	Session          string `json:"session,omitempty"`
	SessionRestarted bool   `json:"session_restarted,omitempty"`
	// Egress lists the call's connections through the egress proxy (network
	// "allowlist"): host, port, address, bytes and verdict of each.
	Egress *sandbox.NetworkUse `json:"egress,omitempty"`
}

// DefaultAuditPath is $XDG_STATE_HOME/airlock/audit.jsonl, or
// ~/.local/state/airlock/audit.jsonl when XDG_STATE_HOME is unset or relative (the XDG
// spec says to ignore relative values).
func DefaultAuditPath(getenv func(string) string) (string, error) {
	if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "airlock", "audit.jsonl"), nil
	}
	home := getenv("HOME")
	if !filepath.IsAbs(home) {
		return "", fmt.Errorf("%w: no default path: neither XDG_STATE_HOME nor HOME is an absolute path; set audit.path", ErrAudit)
	}
	return filepath.Join(home, ".local", "state", "airlock", "audit.jsonl"), nil
}

// OpenDefaultAudit opens the audit log where no audit.path is configured: at the default
// path, or, where that cannot be written (a read-only root, a user without a home, as
// containers run), in a private directory under the temporary one, or else on the log
// stream as records of their own. It warns once where the records go instead.
func OpenDefaultAudit(getenv func(string) string, maxBytes int64, log *slog.Logger) (*Audit, error) {
	path, err := DefaultAuditPath(getenv)
	if err == nil {
		a, err2 := OpenAudit(path, maxBytes)
		if err2 == nil {
			return a, nil
		}
		err = err2
	}
	fallback := filepath.Join(os.TempDir(), fmt.Sprintf("airlock-%d", os.Geteuid()), "audit.jsonl")
	if ferr := privateDir(filepath.Dir(fallback)); ferr == nil {
		if a, ferr := OpenAudit(fallback, maxBytes); ferr == nil {
			log.Warn("the default audit log cannot be written; audit records go to a fallback file (set audit.path to choose)", "path", fallback, "err", err)
			return a, nil
		}
	}
	log.Warn("the default audit log cannot be written; audit records go to the log stream (set audit.path to choose)", "err", err)
	return &Audit{log: log}, nil
}

// privateDir creates dir, or accepts an existing one, only if it is a real directory of
// this user that no one else may enter: in a shared temporary directory another user
// could have made it first, or put a symlink there.
func privateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() || !ownedByMe(fi) || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s is not a private directory of uid %d", dir, os.Geteuid())
	}
	return nil
}

// OpenAudit opens (appending, creating it and its directory) the audit log at path. An
// unwritable log is an error here, at startup, not at the first run.
func OpenAudit(path string, maxBytes int64) (*Audit, error) {
	return openAudit(path, maxBytes, func(p string) (auditFile, error) {
		return trust.OpenAppend(p)
	})
}

func openAudit(path string, maxBytes int64, open func(string) (auditFile, error)) (*Audit, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrAudit, err)
	}
	a := &Audit{path: path, max: maxBytes, open: open}
	if err := a.reopen(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Audit) reopen() error {
	f, err := a.open(a.path)
	if err != nil {
		return fmt.Errorf("%w: open: %w", ErrAudit, err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("%w: stat: %w", ErrAudit, err)
	}
	a.f, a.size = f, st.Size()
	return nil
}

// Path is the log's file name ("" when the records go to the log stream).
func (a *Audit) Path() string { return a.path }

// Write appends rec and syncs it to disk. An error wraps ErrAudit.
func (a *Audit) Write(rec AuditRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("%w: encode: %w", ErrAudit, err)
	}
	if a.log != nil {
		a.log.Info("audit", "record", json.RawMessage(b))
		return nil
	}
	b = append(b, '\n')
	a.mu.Lock()
	if a.max > 0 && a.size > 0 && a.size+int64(len(b)) > a.max {
		// Rotation closes the file: no fsync may be running on it.
		a.mu.Unlock()
		a.syncMu.Lock()
		a.mu.Lock()
		err := a.rotate(int64(len(b)))
		a.syncMu.Unlock()
		if err != nil {
			a.mu.Unlock()
			return err
		}
	}
	seq, err := a.append(b)
	a.mu.Unlock()
	if err != nil {
		return err
	}
	return a.syncTo(seq)
}

// rotate moves a full log to PATH.1 and opens a new one, if the line of n bytes does
// not fit (again: another Write may have rotated meanwhile). The old file's lines are
// synced first. Called with syncMu and mu held.
func (a *Audit) rotate(n int64) error {
	if a.f != nil && !(a.size > 0 && a.size+n > a.max) {
		return nil
	}
	if a.f != nil {
		if a.synced < a.written {
			if err := a.f.Sync(); err != nil {
				a.failed, a.syncErr = a.written, err
			} else {
				a.synced = a.written
			}
		}
		_ = a.f.Close()
		a.f = nil
		if err := os.Rename(a.path, a.path+".1"); err != nil {
			return fmt.Errorf("%w: rotate: %w", ErrAudit, err)
		}
	}
	return a.reopen()
}

// append writes one line and returns its number. Called with mu held.
func (a *Audit) append(b []byte) (uint64, error) {
	if a.f == nil {
		if err := a.reopen(); err != nil {
			return 0, err
		}
	}
	if a.torn {
		b = append([]byte{'\n'}, b...)
	}
	n, err := a.f.Write(b)
	a.size += int64(n)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	a.torn = err != nil && n > 0 || a.torn && n == 0
	if err != nil {
		return 0, fmt.Errorf("%w: write: %w", ErrAudit, err)
	}
	a.written++
	return a.written, nil
}

// syncTo returns once line seq is on disk: synced by an fsync that began after it was
// written, this Write's own or one that another Write ran meanwhile.
func (a *Audit) syncTo(seq uint64) error {
	a.syncMu.Lock()
	defer a.syncMu.Unlock()
	a.mu.Lock()
	if seq <= a.failed {
		err := a.syncErr
		a.mu.Unlock()
		return fmt.Errorf("%w: sync: %w", ErrAudit, err)
	}
	if seq <= a.synced {
		a.mu.Unlock()
		return nil
	}
	upTo, f := a.written, a.f
	a.mu.Unlock()
	if f == nil { // cannot happen: a rotation syncs the lines of the file it closes
		return fmt.Errorf("%w: sync: no file", ErrAudit)
	}
	err := f.Sync()
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.failed, a.syncErr = upTo, err
		return fmt.Errorf("%w: sync: %w", ErrAudit, err)
	}
	a.synced = max(a.synced, upTo)
	return nil
}

// Close closes the file.
func (a *Audit) Close() error {
	a.syncMu.Lock()
	defer a.syncMu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	err := a.f.Close()
	a.f = nil
	return err
}
