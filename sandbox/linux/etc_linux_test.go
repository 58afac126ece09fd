package linux

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-mcp/airlock/sandbox"
)

// TestEtcCopiesPerRun checks the sandbox's /etc files, which the init copies into each
// run's own root (root_linux.c, OP_COPY): every byte is the host's (or the sandbox's own
// passwd, group, hosts, hostname), and a run that tries to change them, with another
// run in flight that reads them before and after, changes nothing either run sees.
func TestEtcCopiesPerRun(t *testing.T) {
	notInTier(t, "no root of its own: the program sees the host's /etc, read-only under Landlock")
	want := map[string]string{}
	for _, f := range etcCopies {
		if b, err := os.ReadFile("/etc/" + f); err == nil {
			want["/etc/"+f] = sum(b)
		}
	}
	for _, op := range etcFiles {
		want[op.Target] = sum(op.Content)
	}
	if len(want) < len(etcFiles)+2 || want["/etc/ld.so.cache"] == "" {
		t.Fatalf("only %d files to compare (no /etc/ld.so.cache on this host?): the test would prove little", len(want))
	}
	paths := make([]string, 0, len(want))
	for p := range want {
		paths = append(paths, p)
	}
	code := `import errno, hashlib, json, os, sys, time
paths = json.loads(sys.argv[2])
def sums():
    return {p: hashlib.sha256(open(p, "rb").read()).hexdigest() for p in paths}
out = {"before": sums(), "tries": {}}
time.sleep(0.3)  # the other run reads now, then tries
for p in paths:
    for what, f in [("write", lambda: open(p, "r+b").write(b"pwned")),
                    ("truncate", lambda: os.truncate(p, 0)),
                    ("unlink", lambda: os.unlink(p)),
                    ("rename", lambda: os.rename(p, p + ".old")),
                    ("chmod", lambda: os.chmod(p, 0o777))]:
        try:
            f()
            out["tries"][what + " " + p] = "ok"
        except OSError as e:
            out["tries"][what + " " + p] = errno.errorcode.get(e.errno, str(e.errno))
time.sleep(0.3)
out["after"] = sums()
print(json.dumps(out))
`
	type result struct {
		Before, After map[string]string
		Tries         map[string]string
	}
	arg, err := json.Marshal(paths)
	if err != nil {
		t.Fatal(err)
	}
	s := testSandbox(t)
	var wg sync.WaitGroup
	runs := make([]sandbox.Result, 2)
	errs := make([]error, 2)
	for i := range runs {
		spec := pySpec(code, newMarker())
		spec.Argv = append(spec.Argv, string(arg))
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i], errs[i] = s.Run(context.Background(), withDefaults(spec))
		}()
	}
	wg.Wait()
	for i, res := range runs {
		var r result
		if errs[i] != nil || res.Status != sandbox.StatusOK {
			t.Fatalf("run %d: %v %s", i, errs[i], brief(res))
		}
		lines := strings.Split(strings.TrimSpace(string(res.Stdout.Bytes())), "\n")
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
			t.Fatalf("run %d: decode: %v\n%s", i, err, brief(res))
		}
		for p, w := range want {
			if r.Before[p] != w || r.After[p] != w {
				t.Errorf("run %d: %s hashed %s before and %s after the runs' attempts, want %s (the host's or the sandbox's own)", i, p, r.Before[p], r.After[p], w)
			}
		}
		for try, got := range r.Tries {
			if got == "ok" || !strings.HasPrefix(got, "E") {
				t.Errorf("run %d: %s: %s, want an error (the root is read-only)", i, try, got)
			}
		}
		if len(r.Tries) != 5*len(want) {
			t.Errorf("run %d: %d attempts reported, want %d", i, len(r.Tries), 5*len(want))
		}
	}
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
