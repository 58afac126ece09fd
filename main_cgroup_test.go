package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// v1Controllers are the cgroup v1 controllers a sandbox gets a cgroup in.
var v1Controllers = []string{"memory", "pids", "cpu"}

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

// cliIn starts `airlock run ARGS...` as a member of the cgroups dirs.
func cliIn(t *testing.T, bin string, dirs []string, code string, args ...string) *exec.Cmd {
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
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
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

// `airlock run` leaves no cgroup behind: not its base ("airlock"), not a sandbox's, not
// the self-check's; after a normal run, a full self-check, a timeout, SIGINT and SIGTERM.
func TestE2ERunLeavesNoCgroup(t *testing.T) {
	bin := needSandbox(t)
	cases := []struct {
		name   string
		code   string
		args   []string
		signal syscall.Signal
	}{
		{"ok", "print(1)", nil, 0},
		{"full self-check", "print(1)", []string{"--recheck"}, 0},
		{"timeout", "while True: pass", []string{"--timeout", "1"}, 0},
		{"SIGINT", "import time; time.sleep(60)", nil, syscall.SIGINT},
		{"SIGTERM", "import time; time.sleep(60)", nil, syscall.SIGTERM},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dirs := freshCgroups(t)
			cmd := cliIn(t, bin, dirs, c.code, c.args...)
			if c.signal != 0 {
				waitRunning(t, dirs, 20*time.Second)
				if err := cmd.Process.Signal(c.signal); err != nil {
					t.Fatal(err)
				}
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatal("airlock run did not exit")
			}
			if st := cmd.ProcessState; st.ExitCode() == 99 || st.ExitCode() < 0 {
				t.Fatalf("airlock run ended %v: it did not run in the test cgroups, or died of its signal without cleaning up", st)
			}
			if left := leftovers(dirs); len(left) > 0 {
				t.Fatalf("airlock run (%s) left cgroups behind: %v", c.name, left)
			}
		})
	}
}
