package policy

import (
	"encoding/base64"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/airlock-mcp/airlock/sandbox"
)

// DefaultMaxCodeBytes is the code size cap ValidateCode uses when given none.
const DefaultMaxCodeBytes = 1 << 20

// ValidateCode checks one call's code: at most max bytes (max <= 0 means
// DefaultMaxCodeBytes) and no NUL byte. Every registry language is a text language whose
// interpreter rejects or silently truncates at a NUL (CPython: "source code string cannot
// contain null bytes"), so it is refused up front with its offset.
func ValidateCode(code string, max int) error {
	if max <= 0 {
		max = DefaultMaxCodeBytes
	}
	if len(code) > max {
		return fmt.Errorf("%w: code is %d bytes, the limit is %d", ErrCodeTooLarge, len(code), max)
	}
	if i := strings.IndexByte(code, 0); i >= 0 {
		return fmt.Errorf("%w: code contains a NUL byte at offset %d", ErrInvalidRequest, i)
	}
	return nil
}

// FileInput is one input file of a call, as the client sent it.
type FileInput struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty"` // "utf8" (default) or "base64"
}

// FileCaps bound a call's input files. A zero field takes its DefaultFileCaps value.
type FileCaps struct {
	MaxFiles      int   `json:"max_files"`
	MaxFileBytes  int64 `json:"max_file_bytes"`
	MaxTotalBytes int64 `json:"max_total_bytes"`
	MaxPathLen    int   `json:"max_path_len"`
}

// DefaultFileCaps are the built-in input file caps.
func DefaultFileCaps() FileCaps {
	return FileCaps{MaxFiles: 64, MaxFileBytes: 8 << 20, MaxTotalBytes: 32 << 20, MaxPathLen: 256}
}

// WithDefaults fills every zero or negative cap with DefaultFileCaps' value.
func (c FileCaps) WithDefaults() FileCaps {
	d := DefaultFileCaps()
	if c.MaxFiles <= 0 {
		c.MaxFiles = d.MaxFiles
	}
	if c.MaxFileBytes <= 0 {
		c.MaxFileBytes = d.MaxFileBytes
	}
	if c.MaxTotalBytes <= 0 {
		c.MaxTotalBytes = d.MaxTotalBytes
	}
	if c.MaxPathLen <= 0 {
		c.MaxPathLen = d.MaxPathLen
	}
	return c
}

// maxComponent is NAME_MAX on Linux and macOS.
const maxComponent = 255

// reservedPrefix marks workspace names airlock itself writes (the import guard).
const reservedPrefix = ".airlock"

// Files validates a call's input files and turns them into sandbox files. Paths must be
// relative, slash-separated, printable UTF-8, free of ".." and backslashes, unique after
// normalisation (case-insensitively), and must not collide with a code file, an airlock file (".airlock*") or
// each other as file and directory. Every error wraps ErrInvalidRequest and names the
// file.
func Files(in []FileInput, caps FileCaps) ([]sandbox.File, error) {
	caps = caps.WithDefaults()
	if len(in) > caps.MaxFiles {
		return nil, fmt.Errorf("%w: %d files, the limit is %d", ErrInvalidRequest, len(in), caps.MaxFiles)
	}
	out := make([]sandbox.File, 0, len(in))
	seen := map[string]int{}
	var total int64
	for i, f := range in {
		p, err := cleanPath(f.Path, caps.MaxPathLen)
		if err != nil {
			return nil, fmt.Errorf("%w: files[%d] %s: %w", ErrInvalidRequest, i, quote(f.Path), err)
		}
		key := nameKey(p)
		if j, dup := seen[key]; dup {
			return nil, fmt.Errorf("%w: files[%d] %s: same path as files[%d]", ErrInvalidRequest, i, quote(p), j)
		}
		seen[key] = i
		data, err := decode(f, caps.MaxFileBytes)
		if err != nil {
			return nil, fmt.Errorf("%w: files[%d] %s: %w", ErrInvalidRequest, i, quote(p), err)
		}
		total += int64(len(data))
		if total > caps.MaxTotalBytes {
			return nil, fmt.Errorf("%w: files[%d] %s: input files total more than %d bytes", ErrInvalidRequest, i, quote(p), caps.MaxTotalBytes)
		}
		out = append(out, sandbox.File{Path: p, Data: data, Mode: 0o644})
	}
	// "a" as a file and "a/b" would need "a" to be a directory too.
	for p, i := range seen {
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if j, ok := seen[dir]; ok {
				return nil, fmt.Errorf("%w: files[%d] %s: its directory %s is files[%d]", ErrInvalidRequest, i, quote(p), quote(dir), j)
			}
		}
	}
	return out, nil
}

// nameKey is what two paths share when a file system would make them one file. macOS's
// (APFS, HFS+) are case-insensitive and normalization-insensitive by default: "A.txt"
// and "a.txt", "café" composed and decomposed, "s" and the long s "ſ" name one file there,
// so the second input would fail to be created. Upper then lower case folds the runes
// whose lower case is not their folding (ſ, the Kelvin sign).
func nameKey(p string) string { return strings.ToLower(strings.ToUpper(norm.NFD.String(p))) }

func cleanPath(p string, maxLen int) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("path is empty")
	case !utf8.ValidString(p):
		return "", fmt.Errorf("path is not valid UTF-8")
	case strings.IndexByte(p, 0) >= 0:
		return "", fmt.Errorf("path contains a NUL byte")
	case strings.ContainsRune(p, '\\'):
		return "", fmt.Errorf("path contains a backslash; use /")
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("path is absolute; paths are relative to the workspace")
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return "", fmt.Errorf("path contains control character %U", r)
		}
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return "", fmt.Errorf("path contains a .. component")
		}
		if len(c) > maxComponent {
			return "", fmt.Errorf("path component is %d bytes, the limit is %d", len(c), maxComponent)
		}
	}
	clean := path.Clean(p)
	if clean == "." {
		return "", fmt.Errorf("path names the workspace itself")
	}
	if len(clean) > maxLen {
		return "", fmt.Errorf("path is %d bytes, the limit is %d", len(clean), maxLen)
	}
	first, _, _ := strings.Cut(clean, "/")
	if strings.HasPrefix(strings.ToLower(first), reservedPrefix) {
		return "", fmt.Errorf("names starting with %s are reserved for airlock", reservedPrefix)
	}
	for _, d := range defs {
		if strings.EqualFold(clean, d.file) {
			return "", fmt.Errorf("%s is reserved for the code", d.file)
		}
	}
	return clean, nil
}

func decode(f FileInput, max int64) ([]byte, error) {
	switch strings.ToLower(f.Encoding) {
	case "", "utf8", "utf-8", "text":
		if int64(len(f.Content)) > max {
			return nil, fmt.Errorf("%d bytes, the limit is %d", len(f.Content), max)
		}
		return []byte(f.Content), nil
	case "base64":
		// Refuse before allocating: the decoded size is known from the encoded one.
		if n := int64(base64.StdEncoding.DecodedLen(len(f.Content))); n > max+2 {
			return nil, fmt.Errorf("about %d bytes decoded, the limit is %d", n, max)
		}
		data, err := base64.StdEncoding.DecodeString(f.Content)
		if err != nil {
			return nil, fmt.Errorf("bad base64: %w", err)
		}
		if int64(len(data)) > max {
			return nil, fmt.Errorf("%d bytes decoded, the limit is %d", len(data), max)
		}
		return data, nil
	default:
		return nil, fmt.Errorf("unknown encoding %s (want utf8 or base64)", quote(f.Encoding))
	}
}

// quote shows a client-supplied string in an error: escaped and bounded.
func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return fmt.Sprintf("%q", s)
}
