package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"

	"github.com/airlock-mcp/airlock/runner"
	"github.com/airlock-mcp/airlock/tools"
)

// Every airlock process, `airlock run` included, runs the init of every linked package
// before main: what an init builds is paid on every start, on the run's main thread
// before its spawn request. Each package below built, in upstream's init, what airlock
// never or rarely uses; its patched copy (third_party/*, go.mod's replaces; AIRLOCK.md
// in each says what changed) builds it on first use:
//   - santhosh-tekuri/jsonschema (linked by mcp-go's server, never called) compiled all
//     its metaschemas: 21,279 allocations and ~3 ms of CPU;
//   - prometheus/client_golang registered its default registry's process and Go
//     collectors (250 allocations, two goroutines), a registry airlock never uses;
//   - prometheus/procfs compiled its 23 regexps (892 allocations);
//   - google/jsonschema-go (mcp-go's mcp package, never called) reflected over its
//     Schema type and built a regexp (296 allocations, ~0.3 ms of CPU);
//   - go.yaml.in/yaml (invopop's ordered maps, never called) compiled two regexps
//     (278 allocations);
//   - BurntSushi/toml asked for the local zone's offset, reading /etc/localtime (26
//     allocations), which an `airlock run` never needs otherwise (the audit's times
//     are UTC).
//
// airlock's own packages compile their patterns on first use too (a regexp with a
// bounded repetition costs hundreds of allocations). This test binary links the same
// packages; its init trace says whether their inits are cheap. Allocation counts do not
// depend on the machine's load, unlike a time.
func TestStartInitsAreCheap(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	line := regexp.MustCompile(`(?m)^init (\S+) @\S+ ms, \S+ ms clock, \d+ bytes, (\d+) allocs$`)
	inits := map[string]int{}
	for _, m := range line.FindAllSubmatch(out, -1) {
		inits[string(m[1])], _ = strconv.Atoi(string(m[2]))
	}
	for _, p := range []struct {
		pkg      string
		max      int    // upstream's init made many more (above)
		upstream string // what upstream's init does again if over max
	}{
		{"github.com/santhosh-tekuri/jsonschema/v6", 1000, "compiles its metaschemas"},
		{"github.com/prometheus/client_golang/prometheus", 50, "registers the default registry's collectors"},
		{"github.com/prometheus/procfs", 200, "compiles its regexps"},
		{"github.com/google/jsonschema-go/jsonschema", 50, "builds its field tables and regexp"},
		{"go.yaml.in/yaml/v4", 100, "compiles its regexps"},
		{"github.com/BurntSushi/toml/internal", 10, "reads the local time zone"},
	} {
		n, ok := inits[p.pkg]
		if !ok {
			t.Errorf("no init line of %s in the trace (is it still linked? drop its copy in third_party if not):\n%s", p.pkg, out)
			continue
		}
		if n > p.max {
			t.Errorf("%s's init made %d allocations (at most %d): it %s at start again (upstream's init; see its AIRLOCK.md in third_party)", p.pkg, n, p.max, p.upstream)
		}
	}
	// expvar came only with client_golang's deprecated expvar collector, left out of the
	// copy: its init registered /debug/vars on http.DefaultServeMux in every process.
	if _, ok := inits["expvar"]; ok {
		t.Error("expvar is linked again (its init publishes the command line and registers /debug/vars on http.DefaultServeMux): who imports it? see third_party/client_golang/AIRLOCK.md")
	}
	own := regexp.MustCompile(`^github\.com/airlock-mcp/airlock/`)
	for pkg, allocs := range inits {
		if own.MatchString(pkg) && allocs > 100 {
			t.Errorf("%s's init made %d allocations: build it on first use (sync.OnceValue), not at every start", pkg, allocs)
		}
	}
}

// warmEncoders runs beside every `airlock run` and drops a panic rather than end the
// run; the zero values it encodes must not need that, or the warm-up does nothing.
func TestWarmEncodersEncodeZeroValues(t *testing.T) {
	if _, err := json.Marshal(runner.AuditRecord{}); err != nil {
		t.Fatal(err)
	}
	if _, err := json.Marshal(tools.ResultOf(runner.Outcome{})); err != nil {
		t.Fatal(err)
	}
	warmEncoders()
}
