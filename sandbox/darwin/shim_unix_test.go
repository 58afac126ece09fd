//go:build unix

package darwin

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// runShim runs memoryShim in /bin/sh the way the darwin child does: limit in KiB, then
// the command, with the error pipe on descriptor 4. It returns the exit code, stdout and
// what the shim wrote on the pipe.
func runShim(t *testing.T, outer string, kib string, argv ...string) (int, string, string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	script := memoryShim
	args := append([]string{"-c", script, "airlock-memory", kib}, argv...)
	if outer != "" {
		// A first shell sets a hard limit the shim cannot exceed, standing in for XNU's
		// refusal below the map size.
		args = append([]string{"-c", outer + `; exec /bin/sh "$@"`, "outer"}, args...)
	}
	cmd := exec.Command(shimShell, args...)
	cmd.ExtraFiles = []*os.File{nil, w} // fd 3 unused, fd 4 the error pipe
	var out strings.Builder
	cmd.Stdout = &out
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	pipe := make([]byte, 4096)
	n, _ := r.Read(pipe)
	_ = cmd.Wait()
	return cmd.ProcessState.ExitCode(), out.String(), string(pipe[:n])
}

func TestMemoryShimSetsLimitsAndCloses(t *testing.T) {
	hostile := `$(touch /tmp/airlock-shim-injected) "; exit 0`
	code, out, pipe := runShim(t, "", "1048576", "/bin/sh", "-c", `ulimit -d; ulimit -v; printf '%s\n' "$1"; [ -e /proc/self/fd/4 ] && echo fd4-open || echo fd4-closed`, "sh", hostile)
	if code != 0 || pipe != "" {
		t.Fatalf("exit %d, pipe %q, stdout %q", code, pipe, out)
	}
	want := "1048576\n1048576\n" + hostile + "\nfd4-closed\n"
	if out != want {
		t.Errorf("stdout %q, want %q (limits in KiB, arguments verbatim, error pipe closed)", out, want)
	}
	if _, err := os.Stat("/tmp/airlock-shim-injected"); err == nil {
		t.Error("an argument was run as script text")
	}
}

func TestMemoryShimReportsRefusal(t *testing.T) {
	code, out, pipe := runShim(t, "ulimit -d 200000", "400000", "/bin/echo", "ran")
	if code != 125 || out != "" {
		t.Fatalf("exit %d, stdout %q: the command must not run when a limit is refused", code, out)
	}
	var se setupErrorForTest
	if err := json.Unmarshal([]byte(pipe), &se); err != nil || se.Stage != stageMemory || !strings.Contains(se.Err, "400000 KiB") {
		t.Fatalf("pipe %q (%v), want a %q setup error naming the value", pipe, err, stageMemory)
	}
}

// setupErrorForTest mirrors the darwin child's setupError (darwin-only file).
type setupErrorForTest struct {
	Stage string `json:"stage"`
	Err   string `json:"err"`
}
