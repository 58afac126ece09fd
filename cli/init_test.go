package cli

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

// Every airlock process, `airlock run` included, runs the init of every linked package.
// santhosh-tekuri/jsonschema (linked by mcp-go's server, never called by airlock) compiled
// all its metaschemas there: 21,279 allocations, ~3 ms of CPU per start. The patched copy
// (third_party/jsonschema, go.mod's replace) compiles them on first use. This test binary
// links the same packages; its init trace says whether that init is cheap again.
// Allocation counts do not depend on the machine's load, unlike a time.
func TestStartSkipsSchemaCompile(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	m := regexp.MustCompile(`init github\.com/santhosh-tekuri/jsonschema/v6 @\S+ ms, \S+ ms clock, \d+ bytes, (\d+) allocs`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no init line of santhosh-tekuri/jsonschema in the trace (is it still linked?):\n%s", out)
	}
	if allocs, _ := strconv.Atoi(string(m[1])); allocs > 1000 {
		t.Errorf("santhosh-tekuri/jsonschema's init made %d allocations: it compiles its metaschemas at start again (upstream's init; see third_party/jsonschema/AIRLOCK.md)", allocs)
	}
}
