package serve

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/airlock-mcp/airlock/internal/trust"
)

// minTokenBytes refuses tokens short enough to guess: 16 bytes of base64 is 96 bits.
const minTokenBytes = 16

// Clients are the bearer tokens the HTTP transports accept, each with the name of the
// client it belongs to. The set can be swapped while serving (Reload on SIGHUP); a
// request sees either the old set or the new one, never a mix.
type Clients struct {
	single string // http.auth_token, named "default"
	path   string // http.tokens_file
	set    atomic.Pointer[[]token]
}

// token is a client name and the SHA-256 of its token: comparing fixed-length digests keeps
// the comparison's time independent of the token's length as well as its content.
type token struct {
	name string
	sum  [sha256.Size]byte
}

// clientName compiles on first use: at init every airlock process, `airlock run`
// included, would pay for it (the bounded repetition expands to hundreds of instructions).
var clientName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })

// NewClients loads the single token (if any) and the tokens file (if any). With
// neither, Enabled is false and every request is let through (loopback only: see
// CheckBind).
func NewClients(single, path string) (*Clients, error) {
	c := &Clients{single: single, path: path}
	if err := c.Reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// Reload reads the tokens file again. On an error the old set stays in force.
func (c *Clients) Reload() error {
	var set []token
	if c.single != "" {
		// The same rule as the file's: a short token is guessable, and one with spaces
		// around it matches no header (Authenticate trims them), which reads as "auth on"
		// while no client can get in.
		if len(c.single) < minTokenBytes || strings.TrimSpace(c.single) != c.single || strings.ContainsAny(c.single, " \t") {
			return fmt.Errorf("http.auth_token: a token is at least %d bytes without spaces; make one with `openssl rand -base64 32`", minTokenBytes)
		}
		set = append(set, token{name: "default", sum: sha256.Sum256([]byte(c.single))})
	}
	if c.path != "" {
		f, err := os.Open(c.path)
		if err != nil {
			return fmt.Errorf("http.tokens_file: %w", err)
		}
		defer f.Close()
		if err := private(f); err != nil {
			return fmt.Errorf("http.tokens_file %s: %w", c.path, err)
		}
		more, err := parseTokens(f)
		if err != nil {
			return fmt.Errorf("http.tokens_file %s: %w", c.path, err)
		}
		set = append(set, more...)
	}
	if c.single != "" && slices.ContainsFunc(set[1:], func(t token) bool { return t.name == "default" || t.sum == set[0].sum }) {
		return fmt.Errorf("http.tokens_file %s: the name \"default\" or its token is http.auth_token's", c.path)
	}
	c.set.Store(&set)
	return nil
}

// private refuses a tokens file that anyone but its owner may write, or whose owner is
// neither root nor the server's user (who may chmod it and write): a local user who can
// add a line can add a client, and run code as it. One that other users may read is
// served with a warning, not refused: each token read is a client to run code as (ssh
// refuses such a private key), but Kubernetes mounts a Secret 0644 unless its defaultMode
// says otherwise, and podman before 4.8 ignores defaultMode, so inside a container the
// mode says little. Windows has no such bits (Go reports 0666 for any writable file).
func private(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if runtime.GOOS == "windows" {
		return nil
	}
	m := fi.Mode().Perm()
	if m&0o022 != 0 {
		return fmt.Errorf("mode %04o lets other users change the tokens (and add their own): chmod 600 it (640 or 440 to share it with a group)", m)
	}
	// Its owner may chmod it and write, whatever the mode says.
	if err := trust.Private("the tokens file", fi); err != nil {
		return err
	}
	if m&0o004 != 0 {
		slog.Default().Warn("the tokens file is readable by every user of this host: chmod 600 it (640 or 440 to share it with a group)",
			"component", "http", "path", f.Name(), "mode", fmt.Sprintf("%04o", m))
	}
	return nil
}

// parseTokens reads "NAME TOKEN" lines; blank lines and lines starting with # are
// skipped. Names are unique, tokens at least minTokenBytes long and distinct.
func parseTokens(r io.Reader) ([]token, error) {
	var out []token
	sums := map[[sha256.Size]byte]bool{}
	names := map[string]bool{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		switch {
		case len(f) != 2:
			return nil, fmt.Errorf("line %d: want NAME TOKEN", n)
		case !clientName().MatchString(f[0]):
			return nil, fmt.Errorf("line %d: client name %q: use 1-64 letters, digits, '.', '_' or '-'", n, f[0])
		case names[f[0]]:
			return nil, fmt.Errorf("line %d: client name %q is used twice", n, f[0])
		case len(f[1]) < minTokenBytes:
			return nil, fmt.Errorf("line %d: the token of %q is shorter than %d bytes; make one with `openssl rand -base64 32`", n, f[0], minTokenBytes)
		}
		sum := sha256.Sum256([]byte(f[1]))
		if sums[sum] {
			return nil, fmt.Errorf("line %d: the token of %q is already another client's", n, f[0])
		}
		sums[sum], names[f[0]] = true, true
		out = append(out, token{name: f[0], sum: sum})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no tokens in the file")
	}
	return out, nil
}

// Enabled reports whether any token is configured.
func (c *Clients) Enabled() bool { return c != nil && len(*c.set.Load()) > 0 }

// Count is the number of clients.
func (c *Clients) Count() int { return len(*c.set.Load()) }

// Authenticate returns the name of the client whose token the Authorization header
// carries. The scheme is matched case-insensitively (RFC 9110 §11.1); every token is
// compared, in constant time, whichever matches.
func (c *Clients) Authenticate(header string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	found := -1
	set := *c.set.Load()
	for i := range set {
		eq := subtle.ConstantTimeCompare(sum[:], set[i].sum[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return "", false
	}
	return set[found].name, true
}
