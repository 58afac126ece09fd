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
// before main: what an init builds is paid on every start. santhosh-tekuri/jsonschema
// (linked by mcp-go's server, never called by airlock) compiled all its metaschemas
// there, 21,279 allocations and ~3 ms of CPU; the patched copy (third_party/jsonschema,
// go.mod's replace) compiles them on first use. airlock's own packages compile their
// patterns on first use too (a regexp with a bounded repetition costs hundreds of
// allocations). prometheus/client_golang's init registered its default registry's
// process and Go collectors (250 allocations, two goroutines), a registry airlock never
// uses; the patched copy (third_party/client_golang) registers them on first use.
// prometheus/procfs compiled its 23 regexps (892 allocations); its patched copy
// (third_party/procfs) compiles each on first use. This
// test binary links the same packages; its init trace says whether their inits are
// cheap. Allocation counts do not depend on the machine's load, unlike
// a time.
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
	const schema = "github.com/santhosh-tekuri/jsonschema/v6"
	if _, ok := inits[schema]; !ok {
		t.Fatalf("no init line of %s in the trace (is it still linked?):\n%s", schema, out)
	}
	if inits[schema] > 1000 {
		t.Errorf("%s's init made %d allocations: it compiles its metaschemas at start again (upstream's init; see third_party/jsonschema/AIRLOCK.md)", schema, inits[schema])
	}
	const prom = "github.com/prometheus/client_golang/prometheus"
	if _, ok := inits[prom]; !ok {
		t.Fatalf("no init line of %s in the trace (is it still linked?):\n%s", prom, out)
	}
	if inits[prom] > 50 {
		t.Errorf("%s's init made %d allocations: it registers the default registry's collectors at start again (upstream's init; see third_party/client_golang/AIRLOCK.md)", prom, inits[prom])
	}
	const procfs = "github.com/prometheus/procfs"
	if _, ok := inits[procfs]; !ok {
		t.Fatalf("no init line of %s in the trace (is it still linked?):\n%s", procfs, out)
	}
	if inits[procfs] > 200 {
		t.Errorf("%s's init made %d allocations: it compiles its regexps at start again (upstream's; see third_party/procfs/AIRLOCK.md)", procfs, inits[procfs])
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
