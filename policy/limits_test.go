package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

func TestDefaultBoundsValid(t *testing.T) {
	if err := DefaultBounds().Validate(); err != nil {
		t.Fatalf("built-in bounds invalid: %v", err)
	}
}

func TestBoundsValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(b *Bounds)
		want   string
	}{
		{"max memory zero", func(b *Bounds) { b.Max.Memory = 0 }, "limits.max.memory: must be positive, got 0"},
		{"max wall negative", func(b *Bounds) { b.Max.Wall = -time.Second }, "limits.max.wall: must be positive"},
		{"default pids zero", func(b *Bounds) { b.Default.Pids = 0 }, "limits.default.pids: must be positive, got 0"},
		{"default output negative", func(b *Bounds) { b.Default.Output = -1 }, "limits.default.output: must be positive, got -1"},
		{"default wall above max", func(b *Bounds) { b.Default.Wall = 10 * time.Minute }, "limits.default.wall: must not exceed limits.max.wall (10m > 5m)"},
		{"default memory above max", func(b *Bounds) { b.Default.Memory = 5 << 30 }, "limits.default.memory: must not exceed limits.max.memory (5GiB > 4GiB)"},
		{"address space negative", func(b *Bounds) { b.Default.AddressSpace = -1 }, "limits.address_space: must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := DefaultBounds()
			tt.modify(&b)
			err := b.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.want)
			}
		})
	}
	b := DefaultBounds()
	b.Default.AddressSpace, b.Max.AddressSpace = 0, 0
	if err := b.Validate(); err != nil {
		t.Fatalf("zero address space (means memory) rejected: %v", err)
	}
}

func TestClamp(t *testing.T) {
	d := DefaultBounds()
	tests := []struct {
		name   string
		bounds Bounds
		req    Request
		check  func(t *testing.T, l sandbox.Limits)
	}{
		{"zero request is the default", d, Request{}, func(t *testing.T, l sandbox.Limits) {
			want := d.Default
			want.AddressSpace = want.Memory
			if l != want {
				t.Fatalf("got %+v, want %+v", l, want)
			}
		}},
		{"lower timeout lowers wall and cpu", d, Request{Timeout: 5 * time.Second}, func(t *testing.T, l sandbox.Limits) {
			if l.Wall != 5*time.Second || l.CPU != 5*time.Second {
				t.Fatalf("wall %v cpu %v, want 5s 5s", l.Wall, l.CPU)
			}
		}},
		{"higher timeout up to max", d, Request{Timeout: 100 * time.Second}, func(t *testing.T, l sandbox.Limits) {
			if l.Wall != 100*time.Second || l.CPU != 100*time.Second {
				t.Fatalf("wall %v cpu %v, want 100s", l.Wall, l.CPU)
			}
		}},
		{"timeout past max is max", d, Request{Timeout: time.Hour, CPU: time.Hour}, func(t *testing.T, l sandbox.Limits) {
			if l.Wall != d.Max.Wall || l.CPU != d.Max.CPU {
				t.Fatalf("wall %v cpu %v, want max %v", l.Wall, l.CPU, d.Max.Wall)
			}
		}},
		{"explicit cpu independent of timeout", d, Request{Timeout: 10 * time.Second, CPU: 2 * time.Second}, func(t *testing.T, l sandbox.Limits) {
			if l.CPU != 2*time.Second {
				t.Fatalf("cpu %v, want 2s", l.CPU)
			}
		}},
		{"negative means default", d, Request{Timeout: -time.Second, Memory: -5, Output: -1, CPU: -1}, func(t *testing.T, l sandbox.Limits) {
			if l.Wall != d.Default.Wall || l.Memory != d.Default.Memory || l.Output != d.Default.Output || l.CPU != d.Default.CPU {
				t.Fatalf("got %+v", l)
			}
		}},
		{"memory past max is max", d, Request{Memory: 1 << 40}, func(t *testing.T, l sandbox.Limits) {
			if l.Memory != d.Max.Memory || l.AddressSpace != d.Max.Memory {
				t.Fatalf("memory %d as %d, want %d", l.Memory, l.AddressSpace, d.Max.Memory)
			}
		}},
		{"tiny memory raised to start floor", d, Request{Memory: 1}, func(t *testing.T, l sandbox.Limits) {
			if l.Memory != minMemory {
				t.Fatalf("memory %d, want %d", l.Memory, minMemory)
			}
		}},
		{"lower output", d, Request{Output: 4096}, func(t *testing.T, l sandbox.Limits) {
			if l.Output != 4096 {
				t.Fatalf("output %d", l.Output)
			}
		}},
		{"zero bounds fall back to built-in values", Bounds{}, Request{}, func(t *testing.T, l sandbox.Limits) {
			want := d.Default
			want.AddressSpace = want.Memory
			if l != want {
				t.Fatalf("got %+v, want %+v", l, want)
			}
		}},
		{"fallback still capped by a valid max", Bounds{Max: sandbox.Limits{Wall: time.Second}}, Request{}, func(t *testing.T, l sandbox.Limits) {
			if l.Wall != time.Second {
				t.Fatalf("wall %v, want 1s", l.Wall)
			}
		}},
		{"operator address space kept when above memory", func() Bounds {
			b := d
			b.Default.AddressSpace, b.Max.AddressSpace = 3<<30, 3<<30
			return b
		}(), Request{}, func(t *testing.T, l sandbox.Limits) {
			if l.AddressSpace != 3<<30 {
				t.Fatalf("as %d", l.AddressSpace)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := tt.bounds.Clamp(tt.req)
			assertPositive(t, l)
			tt.check(t, l)
		})
	}
}

// TestClampTotal drives Clamp with hostile combinations and checks the two promises that
// hold for every input: every limit positive, none above a positive Max.
func TestClampTotal(t *testing.T) {
	vals := []int64{-1 << 62, -1, 0, 1, 1 << 20, 1 << 40, 1<<63 - 1}
	for _, bv := range vals {
		for _, rv := range vals {
			b := Bounds{
				Default: sandbox.Limits{Wall: time.Duration(bv), CPU: time.Duration(bv), Memory: bv, Pids: int(bv), FileSize: bv, OpenFiles: int(bv), Workspace: bv, Output: bv, AddressSpace: bv},
				Max:     DefaultBounds().Max,
			}
			req := Request{Timeout: time.Duration(rv), CPU: time.Duration(rv), Memory: rv, Output: rv}
			l := b.Clamp(req)
			assertPositive(t, l)
			m := b.Max
			if l.Wall > m.Wall || l.CPU > m.CPU || l.Memory > m.Memory || l.Pids > m.Pids || l.FileSize > m.FileSize ||
				l.OpenFiles > m.OpenFiles || l.Workspace > m.Workspace || l.Output > m.Output {
				t.Fatalf("bounds %d req %d: %+v above max %+v", bv, rv, l, m)
			}
		}
	}
}

func assertPositive(t *testing.T, l sandbox.Limits) {
	t.Helper()
	if l.Wall <= 0 || l.CPU <= 0 || l.Memory <= 0 || l.Pids <= 0 || l.FileSize <= 0 || l.OpenFiles <= 0 ||
		l.Workspace <= 0 || l.Output <= 0 || l.AddressSpace < l.Memory {
		t.Fatalf("non-positive limit in %+v", l)
	}
}

func TestRequestValidate(t *testing.T) {
	if err := (Request{Timeout: time.Second}).Validate(); err != nil {
		t.Fatal(err)
	}
	err := Request{Timeout: -1, Memory: -1}.Validate()
	if err == nil || !strings.Contains(err.Error(), "timeout: must not be negative") || !strings.Contains(err.Error(), "memory") {
		t.Fatalf("got %v", err)
	}
}

func TestLowered(t *testing.T) {
	b := DefaultBounds()
	tests := []struct {
		name string
		req  Request
		want string
	}{
		{"nothing asked", Request{}, ""},
		{"within the maximum", Request{Timeout: 2 * time.Minute, Memory: 1 << 30}, ""},
		{"at the maximum", Request{Timeout: 5 * time.Minute}, ""},
		{"timeout above", Request{Timeout: time.Hour}, "timeout 1h was lowered to 5m, the maximum (limits.max.wall)"},
		{"memory and output above", Request{Memory: 8 << 30, Output: 64 << 20},
			"memory 8GiB was lowered to 4GiB, the maximum (limits.max.memory); output 64MiB was lowered to 16MiB, the maximum (limits.max.output)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, l := range b.Lowered(tt.req, b.Clamp(tt.req)) {
				got = append(got, l.String())
			}
			if s := strings.Join(got, "; "); s != tt.want {
				t.Errorf("Lowered = %q, want %q", s, tt.want)
			}
		})
	}
}

func TestFormatUnits(t *testing.T) {
	for d, want := range map[time.Duration]string{
		10 * time.Minute: "10m", time.Hour: "1h", 90 * time.Second: "1m30s", 30 * time.Second: "30s",
		250 * time.Millisecond: "250ms", 2*time.Hour + 10*time.Minute: "2h10m", time.Hour + 30*time.Second: "1h0m30s",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%d) = %q, want %q", d, got, want)
		}
	}
	for n, want := range map[int64]string{512 << 20: "512MiB", 4 << 30: "4GiB", 64 << 10: "64KiB", 1000: "1000", 0: "0", 1536 << 20: "1536MiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}
