package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// Audit appends one JSON line per run to a file, rotating it to PATH.1 when it grows
// past a size, so a busy server cannot fill the disk.
type Audit struct {
	mu   sync.Mutex
	path string
	max  int64
	f    *os.File
	size int64
}

// AuditRecord is one line of the audit log. It holds the code's hash, never the code or
// its output.
type AuditRecord struct {
	Time       time.Time `json:"time"`
	ID         string    `json:"id"`
	Language   string    `json:"language"`
	CodeSHA256 string    `json:"code_sha256"`
	CodeBytes  int       `json:"code_bytes"`
	Status     string    `json:"status"`
	ExitCode   int       `json:"exit_code"`
	WallMs     int64     `json:"wall_ms"`
	DurationMs int64     `json:"duration_ms"`
	Limits     struct {
		WallMs      int64 `json:"wall_ms"`
		MemoryBytes int64 `json:"memory_bytes"`
	} `json:"limits"`
	Violation string `json:"violation,omitempty"`
	Error     string `json:"error,omitempty"`
}

// OpenAudit opens (appending) the audit log at path.
func OpenAudit(path string, maxBytes int64) (*Audit, error) {
	a := &Audit{path: path, max: maxBytes}
	if err := a.open(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Audit) open() error {
	f, err := os.OpenFile(a.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open audit log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("stat audit log: %w", err)
	}
	a.f, a.size = f, st.Size()
	return nil
}

// Write appends rec.
func (a *Audit) Write(rec AuditRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("audit record: %w", err)
	}
	b = append(b, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.max > 0 && a.size+int64(len(b)) > a.max {
		_ = a.f.Close()
		if err := os.Rename(a.path, a.path+".1"); err != nil {
			return fmt.Errorf("rotate audit log: %w", err)
		}
		if err := a.open(); err != nil {
			return err
		}
	}
	n, err := a.f.Write(b)
	a.size += int64(n)
	if err != nil {
		return fmt.Errorf("write audit log: %w", err)
	}
	return nil
}

// Close closes the file.
func (a *Audit) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.f.Close()
}
