// Package stamp keeps the record that a check passed, so a one-shot command (`airlock
// run`) need not repeat an expensive check that passed a moment ago for exactly the same
// inputs. A stamp is trusted only when everything about it is as this process would have
// written it: a regular file in a directory private to this user (mode 0700, owned by
// the effective uid: root's is under /run, which no sandbox can see), itself owned by the
// effective uid and writable by no one else, naming the same inputs, younger than its
// maximum age and not from the future. Anything else (missing, stale, foreign, corrupt,
// mismatching) is a miss: the caller runs the full check again. Nothing is ever written
// for a check that did not pass; the caller saves only after a pass.
package stamp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock-mcp/airlock/internal/sysfile"
)

// maxSize bounds what Load reads: a stamp is a few hundred bytes, a self-check's with
// its seccomp programs ≈ 6 KB.
const maxSize = 64 << 10

// format is the version of the file layout; a stamp of another version is a miss.
// Format 2: the record's JSON on one line, a newline, then the value's attachment.
const format = 2

// Store is a directory of stamps.
type Store struct {
	dir     string
	maxAge  time.Duration
	now     func() time.Time
	recheck bool // every Load misses; Save still records
}

// Open returns the store in dir (created 0700 if missing). It refuses a directory that
// is a symlink, not owned by the effective uid, or open to group or others: someone else
// could plant a passing result there.
func Open(dir string, maxAge time.Duration) (*Store, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("stamp directory %q is not absolute", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("stamp directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("stamp directory: %w", err)
	}
	if !fi.IsDir() || !private(fi) {
		return nil, fmt.Errorf("stamp directory %s must be a directory of uid %d that no one else may enter", dir, os.Geteuid())
	}
	return &Store{dir: dir, maxAge: maxAge, now: time.Now}, nil
}

// DefaultDir is where a process keeps its stamps (and host-id locks): /run/airlock for
// root; else $XDG_RUNTIME_DIR/airlock, or /tmp/airlock-UID. None of them is in a
// sandbox's root.
func DefaultDir() string {
	if os.Geteuid() == 0 {
		return "/run/airlock"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "airlock")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("airlock-%d", os.Geteuid()))
}

// Recheck returns the store with every stamp ignored: each check runs in full, and a
// pass is recorded as usual (`airlock run --recheck`).
func (s *Store) Recheck() *Store {
	c := *s
	c.recheck = true
	return &c
}

// Key is the inputs a check's result depends on, one "name=value" line each.
type Key struct{ lines []string }

// Add records one input.
func (k *Key) Add(name, value string) { k.lines = append(k.lines, name+"="+value) }

// AddFile records a file's identity: device, inode, size, modification and change time.
// The change time cannot be set back by a user, so a replaced or rewritten file changes
// the key even when its size and mtime were forged. A file that cannot be read makes the
// key unusable (Sum is empty): its check must run.
func (k *Key) AddFile(name, path string) {
	id, err := fileID(path)
	if err != nil {
		k.Add(name, "\x00unreadable")
		return
	}
	k.Add(name, id)
}

// AddRead records a small file's content (a sysctl, /proc/self/cgroup); a missing file
// is recorded as missing, which is itself an input.
func (k *Key) AddRead(path string) {
	b, err := sysfile.Read(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		k.Add(path, "\x00absent")
	case err != nil:
		k.Add(path, "\x00unreadable")
	default:
		k.Add(path, strings.TrimSpace(string(b)))
	}
}

// AddLink records a symlink's target (a namespace: /proc/self/ns/user).
func (k *Key) AddLink(path string) {
	t, err := os.Readlink(path)
	if err != nil {
		t = "\x00unreadable"
	}
	k.Add(path, t)
}

// Sum is the key's digest, or "" when an input could not be read.
func (k *Key) Sum() string {
	h := sha256.New()
	for _, l := range k.lines {
		if strings.Contains(l, "\x00unreadable") {
			return ""
		}
		fmt.Fprintf(h, "%d:%s\n", len(l), l)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// record is a stamp's file.
type record struct {
	Format int       `json:"format"`
	Kind   string    `json:"kind"`
	Key    string    `json:"key"`
	Passed time.Time `json:"passed"`
	// Attached is the length of the attachment after the record's line (Attacher).
	Attached int             `json:"attached"`
	Value    json.RawMessage `json:"value"`
}

// An Attacher is a value that keeps its bulk out of its JSON, as raw bytes after the
// record: a self-check's seccomp programs (≈ 6 KB) as base64 in the JSON were most of
// a load, and a load is on every `airlock run`'s start. The attachment is trusted
// exactly as the record is (the same file, the same checks).
type Attacher interface {
	// Attachment is the bytes Save stores after the record.
	Attachment() []byte
	// Attach gives a decoded value its attachment; an error makes the stamp a miss.
	Attach(b []byte) error
}

// ErrMiss wraps every reason a stamp is not used.
var ErrMiss = errors.New("no usable stamp")

func (s *Store) path(kind, sum string) string {
	return filepath.Join(s.dir, kind+"-"+sum[:16]+".json")
}

// Load fills v from the stamp of kind for key and returns nil, or returns an error
// wrapping ErrMiss that says why the stamp cannot be trusted.
func (s *Store) Load(kind string, key *Key, v any) error {
	if s.recheck {
		return fmt.Errorf("%w: a full check was asked for", ErrMiss)
	}
	sum := key.Sum()
	if sum == "" {
		return fmt.Errorf("%w: an input of the check cannot be read", ErrMiss)
	}
	p := s.path(kind, sum)
	f, err := os.OpenFile(p, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMiss, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMiss, err)
	}
	if !fi.Mode().IsRegular() || !private(fi) {
		return fmt.Errorf("%w: %s is not a private file of uid %d", ErrMiss, p, os.Geteuid())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSize+1))
	if err != nil || len(b) > maxSize {
		return fmt.Errorf("%w: %s cannot be read whole", ErrMiss, p)
	}
	// json.Marshal escapes every newline in a string, so the record's line ends at the
	// first one.
	line, att, ok := bytes.Cut(b, []byte{'\n'})
	if !ok {
		return fmt.Errorf("%w: %s is corrupt: no end to its record", ErrMiss, p)
	}
	r, err := decodeRecord(line, v)
	if err != nil {
		return fmt.Errorf("%w: %s is corrupt: %w", ErrMiss, p, err)
	}
	now := s.now()
	switch {
	case r.Format != format || r.Kind != kind:
		return fmt.Errorf("%w: %s is of another format or kind", ErrMiss, p)
	case r.Key != sum:
		return fmt.Errorf("%w: %s is for other inputs", ErrMiss, p)
	case r.Passed.After(now):
		return fmt.Errorf("%w: %s passed in the future (%s)", ErrMiss, p, r.Passed)
	case now.Sub(r.Passed) > s.maxAge:
		return fmt.Errorf("%w: %s is older than %s", ErrMiss, p, s.maxAge)
	case r.Attached != len(att):
		return fmt.Errorf("%w: %s is corrupt: an attachment of %d bytes, %d said", ErrMiss, p, len(att), r.Attached)
	}
	if a, ok := v.(Attacher); ok {
		if err := a.Attach(att); err != nil {
			return fmt.Errorf("%w: %s is corrupt: %w", ErrMiss, p, err)
		}
	} else if len(att) > 0 {
		return fmt.Errorf("%w: %s is corrupt: an attachment for a value that takes none", ErrMiss, p)
	}
	return nil
}

// decodeRecord reads a stamp's fields from b, and its value straight into v, in one
// pass: keeping the value as a json.RawMessage to decode afterwards scanned it twice
// more (190 → 95 µs a load of a self-check's with its programs in the JSON, when they
// were). Every field must be
// present and known, nested ones too. v is filled before the record is checked, so on a
// miss it may hold part of a value that must not be used: Load's callers use v only on
// a nil error.
func decodeRecord(b []byte, v any) (record, error) {
	var r record
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return r, fmt.Errorf("not an object (%w)", err)
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return r, err
		}
		name, _ := t.(string)
		if seen[name] {
			return r, fmt.Errorf("field %q twice", name)
		}
		seen[name] = true
		switch name {
		case "format":
			err = dec.Decode(&r.Format)
		case "kind":
			err = dec.Decode(&r.Kind)
		case "key":
			err = dec.Decode(&r.Key)
		case "passed":
			err = dec.Decode(&r.Passed)
		case "attached":
			err = dec.Decode(&r.Attached)
		case "value":
			err = dec.Decode(v)
		default:
			err = fmt.Errorf("unknown field %q", name)
		}
		if err != nil {
			return r, err
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return r, fmt.Errorf("unterminated object (%w)", err)
	}
	if len(seen) != 6 {
		return r, fmt.Errorf("fields missing: have %d of 6", len(seen))
	}
	return r, nil
}

// Save records that the check of kind passed now for key, with its result v (and v's
// attachment, for an Attacher). The file is replaced atomically (a reader sees the old
// stamp or the new one), and the stamps of the same kind that have outlived their age
// are removed.
func (s *Store) Save(kind string, key *Key, v any) error {
	sum := key.Sum()
	if sum == "" {
		return errors.New("an input of the check cannot be read: nothing to stamp")
	}
	var att []byte
	if a, ok := v.(Attacher); ok {
		att = a.Attachment()
	}
	val, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b, err := json.Marshal(record{Format: format, Kind: kind, Key: sum, Passed: s.now(), Attached: len(att), Value: val})
	if err != nil {
		return err
	}
	b = append(append(b, '\n'), att...)
	tmp, err := os.CreateTemp(s.dir, "."+kind+"-*")
	if err != nil {
		return fmt.Errorf("save stamp: %w", err)
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), s.path(kind, sum))
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("save stamp: %w", err)
	}
	s.prune(kind, s.path(kind, sum))
	return nil
}

// prune removes stamps of kind older than the maximum age (another binary's, another
// configuration's), so the directory does not grow with every build.
func (s *Store) prune(kind, keep string) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		p := filepath.Join(s.dir, e.Name())
		if p == keep || !strings.HasPrefix(e.Name(), kind+"-") || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		if fi, err := e.Info(); err == nil && s.now().Sub(fi.ModTime()) > s.maxAge {
			_ = os.Remove(p)
		}
	}
}
