package policy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

// Request is what one call asks for; zero fields mean "the default". A call may ask for
// less than the default or more, up to the operator's maximum; never past it.
type Request struct {
	Timeout time.Duration // wall clock
	CPU     time.Duration // CPU time; zero follows Timeout when that is set
	Memory  int64         // bytes
	Output  int64         // bytes kept per stream
}

// Validate rejects negative knobs, naming the field. Values above the maximum are not an
// error: Clamp lowers them.
func (r Request) Validate() error {
	var errs []error
	check := func(name string, v int64) {
		if v < 0 {
			errs = append(errs, fmt.Errorf("%w: %s: must not be negative", ErrInvalidRequest, name))
		}
	}
	check("timeout", int64(r.Timeout))
	check("cpu", int64(r.CPU))
	check("memory", r.Memory)
	check("output", r.Output)
	return errors.Join(errs...)
}

// minMemory is the smallest memory limit Clamp hands out: below it no interpreter starts,
// and the program would fail with an unhelpful error instead of a memory status.
const minMemory = 16 * mib

// Bounds are the operator's defaults and maximums.
type Bounds struct {
	Default sandbox.Limits `json:"default"`
	Max     sandbox.Limits `json:"max"`
}

// DefaultBounds are airlock's built-in defaults and maximums. The 30 s default wall stays
// under the 60 s request timeout many MCP clients use.
func DefaultBounds() Bounds {
	return Bounds{
		Default: sandbox.Limits{
			Wall:      30 * time.Second,
			CPU:       30 * time.Second,
			Memory:    512 * mib,
			Pids:      64,
			FileSize:  64 * mib,
			OpenFiles: 256,
			Workspace: 64 * mib,
			Output:    1 * mib,
		},
		Max: sandbox.Limits{
			Wall:      300 * time.Second,
			CPU:       300 * time.Second,
			Memory:    4 * gib,
			Pids:      1024,
			FileSize:  1 * gib,
			OpenFiles: 4096,
			Workspace: 1 * gib,
			Output:    16 * mib,
		},
	}
}

// Validate checks that every default and maximum is positive and no default is above
// its maximum, naming each offending field as it appears in the configuration
// (limits.max.memory) and writing values in the units a person writes ("10m > 5m",
// "8GiB"), never as nanoseconds. It is the only check of the limits: the configuration
// runs it.
func (b Bounds) Validate() error {
	dur := func(v int64) string { return FormatDuration(time.Duration(v)) }
	count := func(v int64) string { return strconv.FormatInt(v, 10) }
	d, m := b.Default, b.Max
	var errs []error
	for _, f := range []struct {
		name     string
		def, max int64
		text     func(int64) string
	}{
		{"wall", int64(d.Wall), int64(m.Wall), dur},
		{"cpu", int64(d.CPU), int64(m.CPU), dur},
		{"memory", d.Memory, m.Memory, FormatSize},
		{"pids", int64(d.Pids), int64(m.Pids), count},
		{"file_size", d.FileSize, m.FileSize, FormatSize},
		{"open_files", int64(d.OpenFiles), int64(m.OpenFiles), count},
		{"workspace", d.Workspace, m.Workspace, FormatSize},
		{"output", d.Output, m.Output, FormatSize},
	} {
		if f.max <= 0 {
			errs = append(errs, fmt.Errorf("limits.max.%s: must be positive, got %d", f.name, f.max))
		}
		if f.def <= 0 {
			errs = append(errs, fmt.Errorf("limits.default.%s: must be positive, got %d", f.name, f.def))
		} else if f.max > 0 && f.def > f.max {
			errs = append(errs, fmt.Errorf("limits.default.%s: must not exceed limits.max.%s (%s > %s)", f.name, f.name, f.text(f.def), f.text(f.max)))
		}
	}
	// Zero address space means "the memory limit".
	if d.AddressSpace < 0 || m.AddressSpace < 0 {
		errs = append(errs, errors.New("limits.address_space: must not be negative"))
	}
	return errors.Join(errs...)
}

// Clamp returns the limits for one call: defaults, replaced by the request's positive
// knobs, never above Max. It is total: whatever the bounds and request, every limit it
// returns is positive (an invalid bound falls back to the built-in value).
func (b Bounds) Clamp(req Request) sandbox.Limits {
	builtin := DefaultBounds()
	pick := func(req, def, max, fallback int64) int64 {
		v := def
		if req > 0 {
			v = req
		}
		if v <= 0 {
			v = fallback
		}
		if max > 0 && v > max {
			v = max
		}
		return v
	}
	d, m, f := b.Default, b.Max, builtin.Default
	wall := pick(int64(req.Timeout), int64(d.Wall), int64(m.Wall), int64(f.Wall))
	// CPU follows a requested timeout: a call that asks for 120 s of wall clock wants a
	// CPU-bound loop to get them too, and one that asks for 5 s wants no more.
	cpuDefault := int64(d.CPU)
	if req.Timeout > 0 && req.CPU <= 0 {
		cpuDefault = wall
	}
	l := sandbox.Limits{
		Wall:      time.Duration(wall),
		CPU:       time.Duration(pick(int64(req.CPU), cpuDefault, int64(m.CPU), int64(f.CPU))),
		Memory:    pick(req.Memory, d.Memory, m.Memory, f.Memory),
		Pids:      int(pick(0, int64(d.Pids), int64(m.Pids), int64(f.Pids))),
		FileSize:  pick(0, d.FileSize, m.FileSize, f.FileSize),
		OpenFiles: int(pick(0, int64(d.OpenFiles), int64(m.OpenFiles), int64(f.OpenFiles))),
		Workspace: pick(0, d.Workspace, m.Workspace, f.Workspace),
		Output:    pick(req.Output, d.Output, m.Output, f.Output),
	}
	if l.Memory < minMemory {
		l.Memory = minMemory
		if m.Memory > 0 {
			l.Memory = min(minMemory, m.Memory)
		}
	}
	as := d.AddressSpace
	if m.AddressSpace > 0 {
		as = min(as, m.AddressSpace)
	}
	l.AddressSpace = max(as, l.Memory)
	return l
}

// Lowering is one limit a call asked for that the operator's maximum lowered. Results
// say so: a call must never believe it got more time or memory than it has.
type Lowering struct {
	Limit     string // the Request knob: "timeout", "cpu", "memory" or "output"
	Setting   string // the maximum that applied, as in the configuration: "limits.max.wall"
	Requested int64  // nanoseconds for durations, bytes otherwise
	Granted   int64
	Duration  bool
}

// Lowered lists the knobs of req that Clamp gave less than asked for in l, in the
// Request's field order; nil when the call got everything it asked for.
func (b Bounds) Lowered(req Request, l sandbox.Limits) []Lowering {
	var out []Lowering
	add := func(limit, setting string, asked, got int64, isDuration bool) {
		if asked > 0 && got < asked {
			out = append(out, Lowering{Limit: limit, Setting: setting, Requested: asked, Granted: got, Duration: isDuration})
		}
	}
	add("timeout", "limits.max.wall", int64(req.Timeout), int64(l.Wall), true)
	add("cpu", "limits.max.cpu", int64(req.CPU), int64(l.CPU), true)
	add("memory", "limits.max.memory", req.Memory, l.Memory, false)
	add("output", "limits.max.output", req.Output, l.Output, false)
	return out
}

// String says what was asked and what was granted, in the units a person writes.
func (l Lowering) String() string {
	format := FormatSize
	if l.Duration {
		format = func(v int64) string { return FormatDuration(time.Duration(v)) }
	}
	return fmt.Sprintf("%s %s was lowered to %s, the maximum (%s)", l.Limit, format(l.Requested), format(l.Granted), l.Setting)
}

// FormatDuration writes d the way a person writes it in the configuration: "10m", "1h30m",
// "90ms", not "10m0s" or nanoseconds.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if d < time.Minute {
		return s
	}
	for _, z := range []string{"0s", "0m"} {
		if strings.HasSuffix(s, z) && len(s) > len(z) && !isDigit(s[len(s)-len(z)-1]) {
			s = strings.TrimSuffix(s, z)
		}
	}
	return s
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// FormatSize writes a byte count in the largest binary unit that divides it exactly
// ("512MiB", "4GiB", "1000"), the form the configuration accepts back.
func FormatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", gib}, {"MiB", mib}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
