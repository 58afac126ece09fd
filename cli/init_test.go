package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
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
	// /metrics is written by hand (package metrics): prometheus/client_golang linked
	// client_model, common, procfs and protobuf, whose inits (protobuf's detrand reading
	// the binary, timestamppb's and client_model's descriptors, common's regexps) ran at
	// every start, and runtime/metrics (its table of every runtime metric); expvar came
	// with client_golang's expvar collector and registered /debug/vars on
	// http.DefaultServeMux in every process.
	for pkg := range inits {
		for _, gone := range []string{"github.com/prometheus/", "google.golang.org/protobuf/", "runtime/metrics", "expvar"} {
			if strings.HasPrefix(pkg, gone) {
				t.Errorf("%s is linked again (its init runs at every start): who imports it? /metrics needs none of it (package metrics)", pkg)
			}
		}
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
