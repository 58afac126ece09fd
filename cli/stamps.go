package cli

import (
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-mcp/airlock/config"
	"github.com/airlock-mcp/airlock/internal/stamp"
	"github.com/airlock-mcp/airlock/policy"
)

// stampMaxAge is how long a passing check stands for the next `airlock run`: long
// enough for a burst of runs from a shell or a script, short enough that what the key
// cannot see (a new LSM policy, a container's seccomp profile) is met by a full check
// within minutes. Every run still builds its whole sandbox and fails closed on it.
const stampMaxAge = 10 * time.Minute

// runStamps is the stamp store of `airlock run`: in sandbox.state_dir, or the default
// private directory. Nil when that directory is not private to this user: every check
// then runs in full. recheck ignores the stamps there (and records new ones).
func runStamps(cfg config.Config, recheck bool) *stamp.Store {
	dir := cfg.Sandbox.StateDir
	if dir == "" {
		dir = stamp.DefaultDir()
	}
	st, err := stamp.Open(dir, stampMaxAge)
	if err != nil {
		slog.Warn("checks run in full on every run: no private state directory for their stamps", "component", "cli", "err", err)
		return nil
	}
	if recheck {
		return st.Recheck()
	}
	return st
}

// stampedProbe is policy.Probe remembering each interpreter's answer in st, per
// binary identity and probe: detecting every language starts every interpreter, which
// costs a one-shot run about as much as its program. Only an answer is stamped; an
// interpreter that fails its probe is probed again next time. Nil st: plain Probe.
func stampedProbe(st *stamp.Store) func(string, []string) (string, error) {
	if st == nil {
		return nil
	}
	return func(bin string, args []string) (string, error) {
		k := &stamp.Key{}
		k.AddFile("exe", "/proc/self/exe")
		k.AddFile("interpreter", bin)
		k.Add("path", bin)
		k.Add("args", strconv.Quote(strings.Join(args, "\x00")))
		k.Add("euid", strconv.Itoa(os.Geteuid()))
		k.AddLink("/proc/self/ns/mnt")
		var out string
		if err := st.Load("interpreter", k, &out); err == nil {
			return out, nil
		} else if !errors.Is(err, stamp.ErrMiss) {
			return "", err
		}
		out, err := policy.Probe(bin, args)
		if err != nil {
			return "", err
		}
		if err := st.Save("interpreter", k, out); err != nil {
			slog.Debug("interpreter probe not stamped", "component", "cli", "err", err)
		}
		return out, nil
	}
}
