package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/internal/sandboxtest"
)

// v1Controllers are the cgroup v1 controllers a sandbox gets a cgroup in (cpuacct for the
// run's CPU time; where it shares cpu's hierarchy the cpu cgroup is it).
var v1Controllers = []string{"memory", "pids", "cpu", "cpuacct"}

// freshCgroups makes a new, empty cgroup in each v1 controller for one `airlock run`,
// so that anything it leaves shows up as a subdirectory. It skips loudly where that is
// impossible (not root, or a cgroup v2 host, where the CLI's cgroups are not v1's).
func freshCgroups(t *testing.T) []string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: only root can make the v1 cgroups this test runs the CLI in")
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		t.Skip("SKIPPING: a cgroup v2 host; this test places the CLI in fresh v1 cgroups")
	}
	var dirs []string
	for _, c := range v1Controllers {
		d := filepath.Join("/sys/fs/cgroup", c, fmt.Sprintf("cli-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatalf("cannot make a test cgroup: %v", err)
		}
		dirs = append(dirs, d)
	}
	t.Cleanup(func() {
		for _, d := range dirs {
			// Whatever the CLI left is removed here (the test has already failed).
			ents, _ := os.ReadDir(d)
			for _, e := range ents {
				if e.IsDir() {
					sub, _ := os.ReadDir(filepath.Join(d, e.Name()))
					for _, s := range sub {
						if s.IsDir() {
							_ = syscall.Rmdir(filepath.Join(d, e.Name(), s.Name()))
						}
					}
					_ = syscall.Rmdir(filepath.Join(d, e.Name()))
				}
			}
			_ = syscall.Rmdir(d)
		}
	})
	return dirs
}

// cliIn starts `airlock run ARGS...` as a member of the cgroups dirs; its stdout is
// read from the pipe returned.
func cliIn(t *testing.T, bin string, dirs []string, code string, args ...string) (*exec.Cmd, io.Reader) {
	t.Helper()
	// The shell joins each cgroup and then becomes airlock: no interpolation, every
	// path and argument is a positional parameter.
	script := `bin=$1; shift; while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs" || exit 99; shift; done; shift; exec "$bin" "$@"`
	argv := append([]string{"-c", script, "sh", bin}, dirs...)
	argv = append(argv, "--")
	argv = append(argv, "run")
	argv = append(argv, args...)
	argv = append(argv, "-")
	cmd := exec.Command("/bin/sh", argv...)
	cmd.Stdin = strings.NewReader(code)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out
}

// answer is what a run printed: its JSON result as soon as that is complete (on
// answered), then whatever followed once stdout is closed (on rest). Stdout closes when
// the run and everything that inherited it have exited: a teardown finishing after the
// run must not hold the caller's pipe.
type answer struct {
	answered chan error
	result   map[string]any
	rest     chan []byte
}

func readAnswer(out io.Reader) *answer {
	a := &answer{answered: make(chan error, 1), rest: make(chan []byte, 1)}
	go func() {
		dec := json.NewDecoder(out)
		a.answered <- dec.Decode(&a.result)
		rest, _ := io.ReadAll(io.MultiReader(dec.Buffered(), out))
		a.rest <- rest
	}()
	return a
}

// finished waits for the run's stdout to close and for its exit.
func finished(t *testing.T, cmd *exec.Cmd, a *answer) {
	t.Helper()
	select {
	case <-a.rest:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("airlock run's stdout stayed open for 30 s")
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("airlock run did not exit")
	}
}

// settled waits until dirs hold no process and no cgroup: a run's zygote ends its
// sandboxes and removes their cgroups after the run has exited (zygote_linux.c), so
// what must hold is that this happens, within a bound, however the run ended.
func settled(t *testing.T, dirs []string, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(5 * time.Millisecond) {
		left, procs := leftovers(dirs), processes(dirs)
		if len(left) == 0 && len(procs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after airlock run exited, still there: cgroups %v, processes %v", within, left, procs)
		}
	}
}

// processes lists the pids in the cgroups dirs themselves (the run's own, its zygote's).
func processes(dirs []string) []string {
	var pids []string
	for _, d := range dirs {
		b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		pids = append(pids, strings.Fields(string(b))...)
	}
	return pids
}

// leftovers lists every cgroup under dirs.
func leftovers(dirs []string) []string {
	var left []string
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() && p != d {
				left = append(left, p)
			}
			return nil
		})
	}
	return left
}

// waitRunning waits until a sandbox's cgroup under dirs holds a process.
func waitRunning(t *testing.T, dirs []string, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, p := range leftovers(dirs[:1]) {
			if strings.Contains(filepath.Base(p), "selftest") {
				continue
			}
			if b, err := os.ReadFile(filepath.Join(p, "cgroup.procs")); err == nil && len(strings.TrimSpace(string(b))) > 0 {
				return
			}
		}
	}
	t.Fatalf("no sandbox started in %v within %s", dirs, within)
}

// `airlock run` leaves nothing behind: no process, no cgroup (not its base ("airlock"),
// not a sandbox's, not the self-check's); after a normal run, a full self-check, a
// timeout, SIGINT and SIGTERM, and SIGKILL right after its answer or while its program
// runs. Its answer and exit status are the run's, and nothing of it holds its stdout.
func TestE2ERunLeavesNoCgroup(t *testing.T) {
	bin := needSandbox(t)
	cases := []struct {
		name   string
		code   string
		args   []string
		signal syscall.Signal
		// afterAnswer: the signal comes as soon as the whole answer has been read.
		afterAnswer bool
	}{
		{"ok", "print(1)", nil, 0, false},
		{"full self-check", "print(1)", []string{"--recheck"}, 0, false},
		{"timeout", "while True: pass", []string{"--timeout", "1"}, 0, false},
		{"SIGINT", "import time; time.sleep(60)", nil, syscall.SIGINT, false},
		{"SIGTERM", "import time; time.sleep(60)", nil, syscall.SIGTERM, false},
		{"SIGKILL after the answer", "print(1)", nil, syscall.SIGKILL, true},
		{"SIGKILL while running", "import time; time.sleep(60)", nil, syscall.SIGKILL, false},
		// The Landlock tier's run takes no prefork zygote: the one forked must go too.
		{"landlock tier", "print(1)", []string{"--isolation", "landlock"}, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dirs := freshCgroups(t)
			cmd, out := cliIn(t, bin, dirs, c.code, c.args...)
			a := readAnswer(out)
			switch {
			case c.afterAnswer:
				if err := <-a.answered; err != nil {
					t.Fatalf("no answer: %v", err)
				}
				_ = cmd.Process.Signal(c.signal) // it may have exited already
			case c.signal != 0:
				waitRunning(t, dirs, 20*time.Second)
				if err := cmd.Process.Signal(c.signal); err != nil {
					t.Fatal(err)
				}
			}
			finished(t, cmd, a)
			st := cmd.ProcessState
			if st.ExitCode() == 99 {
				t.Fatalf("airlock run ended %v: it did not run in the test cgroups", st)
			}
			if ws := st.Sys().(syscall.WaitStatus); st.ExitCode() < 0 && !(c.signal == syscall.SIGKILL && ws.Signal() == syscall.SIGKILL) {
				t.Fatalf("airlock run ended %v: it died of its signal without cleaning up", st)
			}
			if c.name == "ok" || c.name == "landlock tier" {
				if st.ExitCode() != 0 || a.result["status"] != "ok" || a.result["stdout"] != "1\n" {
					t.Fatalf("exit %d, answer %v: want 0 and the program's output", st.ExitCode(), a.result)
				}
			}
			settled(t, dirs, 10*time.Second)
		})
	}
}

// Two runs at once in the same cgroups share the base ("airlock") either may have made
// and may remove: neither's teardown, finishing after its exit, breaks the other's run,
// and nothing is left once both have gone.
func TestE2ERunTwoAtOnceLeaveNothing(t *testing.T) {
	bin := needSandbox(t)
	dirs := freshCgroups(t)
	for round := range 4 {
		var cmds []*exec.Cmd
		var answers []*answer
		for i := range 2 {
			// The second starts as the first ends, in the odd rounds: its base is
			// being removed while it makes its own dirs.
			if i == 1 && round%2 == 1 {
				<-answers[0].answered
			}
			cmd, out := cliIn(t, bin, dirs, fmt.Sprintf("print(%d)", 10*round+i))
			cmds, answers = append(cmds, cmd), append(answers, readAnswer(out))
		}
		for i, cmd := range cmds {
			finished(t, cmd, answers[i])
			want := fmt.Sprintf("%d\n", 10*round+i)
			if code := cmd.ProcessState.ExitCode(); code != 0 || answers[i].result["stdout"] != want {
				t.Fatalf("round %d, run %d: exit %d, answer %v; want 0 and %q", round, i, code, answers[i].result, want)
			}
		}
	}
	settled(t, dirs, 10*time.Second)
}

// `airlock run` forks its zygote before the Go runtime (zygote_linux.c, prefork), so the
// zygote's memory, and every spawner's and init's after it, began as the run's: none of
// its arguments, environment or name may show to the program, where its init's
// cmdline, environ and auxv are one open away; nor may its caller's ignored signals or
// descriptors (here SIGHUP, SIGINT and SIGQUIT ignored, fd 7 open) reach the program.
func TestE2ERunShowsNothingOfItsCaller(t *testing.T) {
	bin := needSandbox(t)
	const secret = "airlock-secret-7f3a9c"
	code := `
import os
for f in ["/proc/1/cmdline", "/proc/1/environ", "/proc/1/auxv", "/proc/self/environ", "/proc/self/cmdline"]:
    try:
        print(f, open(f, "rb").read())
    except OSError as e:
        print(f, e.errno)
st = open("/proc/self/status").read().splitlines()
print([l.split()[1] for l in st if l.startswith(("SigBlk", "SigIgn"))], sorted(os.listdir("/proc/self/fd")))
`
	file := filepath.Join(t.TempDir(), secret+".py")
	if err := os.WriteFile(file, []byte(code), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", `trap "" HUP INT QUIT; exec "$0" run "$1" 7</dev/null`, bin, file)
	cmd.Env = append(os.Environ(), "AIRLOCK_TEST_TOKEN="+secret)
	out, err := cmd.Output()
	var res map[string]any
	if jerr := json.Unmarshal(out, &res); err != nil || jerr != nil || res["status"] != "ok" {
		t.Fatalf("%v %v: %s", err, jerr, out)
	}
	got, _ := res["stdout"].(string)
	if !strings.Contains(got, "/proc/1/cmdline b'") {
		sandboxtest.SkipOrFail(t, "the sandbox has no /proc here (a container's substitute), so its init cannot be read:\n%s", got)
	}
	if strings.Contains(got, secret) || !strings.Contains(got, "/proc/1/cmdline b'airlock-sandbox-init") {
		t.Fatalf("the sandbox sees its caller's arguments or environment, or not its init:\n%s", got)
	}
	// Python ignores SIGPIPE and SIGXFSZ itself; its fd 3 is the listing's own.
	if want := "['0000000000000000', '0000000001001000'] ['0', '1', '2', '3']"; !strings.Contains(got, want) {
		t.Fatalf("the caller's signal dispositions or descriptors reached the program: want %s in\n%s", want, got)
	}
}

// A run's stale sweep leaves the dirs of a run that has exited to that run's one-shot
// zygote for as long as the zygote lives (it finishes their teardown: zygote_linux.c),
// and takes them once the zygote is gone without finishing. The zygote is frozen (the
// cgroup v2 freezer: a SIGSTOP would not do, since the run's death orphans the zygote's
// process group and the kernel sends a stopped one SIGHUP) so that it is alive but has
// not finished when the next run sweeps: back to back, that next run's sweep killed and
// removed the previous run's dirs beside their own zygote (docs/performance.md, the
// tenth round), here the sandbox itself, still running. Then a zygote killed before it
// could finish: its run's dirs are stale, and the next run's sweep removes them.
func TestE2ERunSweepSparesAFinishingZygote(t *testing.T) {
	bin := needSandbox(t)
	dirs := freshCgroups(t)
	freezer := freezerCgroup(t)

	// held starts a run whose program sleeps, freezes its zygote and kills the run: its
	// owner is gone, its zygote alive. It returns the zygote's pid and the run's own
	// dirs (its instance dirs and their sandboxes' cgroups).
	held := func() (int, []string) {
		cmd, out := cliIn(t, bin, dirs, "import time; time.sleep(60)")
		a := readAnswer(out)
		waitRunning(t, dirs, 20*time.Second)
		zyg := zygoteOf(t, dirs, cmd.Process.Pid)
		freeze(t, freezer, zyg, true)
		t.Cleanup(func() { _ = syscall.Kill(zyg, syscall.SIGKILL) })
		_ = cmd.Process.Kill()
		finished(t, cmd, a)
		var own []string
		for _, d := range leftovers(dirs) {
			if strings.Contains(d, fmt.Sprintf("/airlock/%d.", cmd.Process.Pid)) {
				own = append(own, d)
			}
		}
		if len(own) == 0 {
			t.Fatalf("no dirs of the run %d under %v: %v", cmd.Process.Pid, dirs, leftovers(dirs))
		}
		if !alive(zyg) {
			t.Fatalf("the frozen zygote %d died with its run", zyg)
		}
		return zyg, own
	}
	// next runs a program that outlasts its run's sweep (it starts with the spawn).
	next := func() {
		cmd, out := cliIn(t, bin, dirs, "import time; time.sleep(1); print(2)")
		a := readAnswer(out)
		finished(t, cmd, a)
		if code := cmd.ProcessState.ExitCode(); code != 0 || a.result["stdout"] != "2\n" {
			t.Fatalf("the next run: exit %d, answer %v", code, a.result)
		}
	}

	zyg, own := held()
	next()
	for _, d := range own {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("the next run's sweep removed %s, whose zygote (%d) is alive: %v", d, zyg, err)
		}
	}
	if len(processes(own)) == 0 {
		t.Errorf("the next run's sweep killed the sandbox of a run whose zygote (%d) is alive", zyg)
	}
	freeze(t, freezer, zyg, false)
	settled(t, dirs, 15*time.Second)

	zyg, own = held()
	if err := syscall.Kill(zyg, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); alive(zyg); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("zygote %d did not die of SIGKILL", zyg)
		}
	}
	next()
	for _, d := range own {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s is left after the next run's sweep, though its run and zygote are gone", d)
		}
	}
}

// freezerCgroup makes a cgroup v2 dir to freeze processes in (the unified hierarchy
// beside this host's v1 controllers; freezing needs no controller), removed at the end.
func freezerCgroup(t *testing.T) string {
	t.Helper()
	b, _ := os.ReadFile("/proc/self/mountinfo")
	root := ""
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 8 && slices.Contains(f, "-") && f[slices.Index(f, "-")+1] == "cgroup2" {
			root = f[4]
		}
	}
	if root == "" {
		sandboxtest.SkipOrFail(t, "no cgroup2 hierarchy is mounted beside the v1 controllers: nothing can freeze the zygote")
	}
	d := filepath.Join(root, fmt.Sprintf("cli-test-freeze-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatalf("cannot make a freezer cgroup: %v", err)
	}
	if _, err := os.Stat(filepath.Join(d, "cgroup.freeze")); err != nil {
		_ = syscall.Rmdir(d)
		sandboxtest.SkipOrFail(t, "this kernel's cgroup2 has no freezer (5.2+): %v", err)
	}
	t.Cleanup(func() {
		for deadline := time.Now().Add(10 * time.Second); syscall.Rmdir(d) == syscall.EBUSY && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	})
	return d
}

// freeze moves pid into the freezer cgroup d and freezes it (on), or thaws it, and
// waits until that is done.
func freeze(t *testing.T, d string, pid int, on bool) {
	t.Helper()
	if on {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			t.Fatal(err)
		}
	}
	want := map[bool]string{true: "1", false: "0"}[on]
	if err := os.WriteFile(filepath.Join(d, "cgroup.freeze"), []byte(want), 0); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(d, "cgroup.events"))
		if strings.Contains(string(b), "frozen "+want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not frozen %s within 10 s: %s", d, want, b)
		}
	}
}

// zygoteOf is the one-shot zygote of the run pid: its child in dirs (the run's cgroups,
// which its zygote shares until it exits) named airlock-zygote.
func zygoteOf(t *testing.T, dirs []string, pid int) int {
	t.Helper()
	for _, p := range processes(dirs) {
		b, err := os.ReadFile("/proc/" + p + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+1:]))
		cmdline, _ := os.ReadFile("/proc/" + p + "/cmdline")
		if len(f) > 1 && f[1] == strconv.Itoa(pid) && bytes.HasPrefix(cmdline, []byte("airlock-zygote")) {
			z, _ := strconv.Atoi(p)
			return z
		}
	}
	t.Fatalf("no zygote of the run %d in %v", pid, dirs)
	return 0
}

// alive reports whether pid names a process that has not exited (a zombie has).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z'
}
