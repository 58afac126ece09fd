package linux

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/internal/sandboxtest"
	"github.com/airlock-mcp/airlock/sandbox"
)

// A cgroup handed to a call is one nothing has run in, and is never handed out again:
// a cgroup given to a call that leaves a live process and a memory charge in it is not
// among the next calls' cgroups, made while it is still in use, one after another and
// several at a time; each of those is empty, charged nothing, has no pids.events hit
// and the limits asked for. Spares removed from outside are passed over; Close removes
// the spares.
func TestSparesAreFreshAndGoWithClose(t *testing.T) {
	s, err := New(sandbox.Options{Isolation: testTier()})
	sandboxtest.Require(t, err)
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	if s.cg.version == 0 {
		t.Skipf("SKIPPING: no cgroups here (%s)", s.cg.reason)
	}
	cg := s.cg
	lim := withDefaults(sandbox.Spec{}).Limits
	lim.Memory = 64 << 20
	lim.Pids = 9

	used, err := cg.create("used-"+randHex(4), lim)
	if err != nil {
		t.Fatal(err)
	}
	// A process of "a run" left in it, and memory charged to it.
	hog := exec.Command("/bin/sh", "-c", "read x; exec sleep 30")
	stdin, err := hog.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := hog.Start(); err != nil {
		t.Fatal(err)
	}
	defer hog.Process.Kill()
	for _, f := range cgFiles(used, "tasks") {
		if err := os.WriteFile(f, []byte(strconv.Itoa(hog.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	usedDirs := cgDirs(used)
	for deadline := time.Now().Add(5 * time.Second); readInt(cgFile(used, "memory", "usage")) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the used cgroup is charged nothing; the test could not tell a reused one")
		}
	}

	var mu sync.Mutex
	seen := map[string]bool{}
	for _, d := range usedDirs {
		seen[d] = true
	}
	check := func(c *cgroup) {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range cgDirs(c) {
			if seen[d] {
				t.Errorf("cgroup %s handed out twice", d)
			}
			seen[d] = true
			if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err != nil || len(strings.TrimSpace(string(b))) != 0 {
				t.Errorf("%s has processes %q (%v)", d, b, err)
			}
		}
		if n := readInt(cgFile(c, "memory", "usage")); n != 0 {
			t.Errorf("a fresh cgroup is charged %d bytes", n)
		}
		if n := readInt(cgFile(c, "memory", "peak")); n != 0 {
			t.Errorf("a fresh cgroup's peak memory is %d", n)
		}
		if n := readKey(cgFile(c, "pids", "pids.events"), "max"); n != 0 {
			t.Errorf("a fresh cgroup counts %d pids.max hits", n)
		}
		mem, pids := limitValues(lim)
		if got := strings.TrimSpace(readFile(t, cgFile(c, "memory", "limit"))); got != mem {
			t.Errorf("memory limit %s, want %s", got, mem)
		}
		if got := strings.TrimSpace(readFile(t, cgFile(c, "pids", "pids.max"))); got != pids {
			t.Errorf("pids.max %s, want %s", got, pids)
		}
	}
	// As a call takes its cgroup, and asks for the refill (a call does once its sandbox
	// is released).
	take := func(name string) (*cgroup, error) {
		c, err := cg.create(name, lim)
		cg.refill()
		return c, err
	}
	var made []*cgroup
	for i := 0; i < 2*spareTarget; i++ {
		c, err := take("next-" + randHex(4))
		if err != nil {
			t.Fatal(err)
		}
		check(c)
		made = append(made, c)
	}
	var wg sync.WaitGroup
	for i := 0; i < 3*spareTarget; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := take("par-" + randHex(4))
			if err != nil {
				t.Error(err)
				return
			}
			check(c)
			mu.Lock()
			made = append(made, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, c := range made {
		if err := c.destroy(); err != nil {
			t.Error(err)
		}
	}
	hog.Process.Kill()
	_ = hog.Wait()
	if err := used.destroy(); err != nil {
		t.Error(err)
	}

	// Once the last refill is done, at least spareLow are ready, and no more than
	// spareTarget.
	var spares []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		cg.spares.mu.Lock()
		filling := cg.spares.filling
		cg.spares.mu.Unlock()
		if spares = cg.spareDirs(); !filling {
			break
		}
	}
	ctrls := len(cgDirs(made[0]))
	if n := len(spares) / ctrls; n < spareLow || n > spareTarget {
		t.Errorf("%d spares ready, want %d to %d", n, spareLow, spareTarget)
	}
	// Spares removed from outside (a host's cleanup of empty cgroups): the next call
	// drops them and makes its own.
	for _, d := range spares {
		if err := os.Remove(d); err != nil {
			t.Fatal(err)
		}
	}
	c, err := cg.create("after-cleanup-"+randHex(4), lim)
	if err != nil {
		t.Fatalf("after the spares were removed from outside: %v", err)
	}
	check(c)
	if err := c.destroy(); err != nil {
		t.Error(err)
	}
	spares = cg.spareDirs()
	closed = true
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if left := cg.spareDirs(); len(left) != 0 {
		t.Errorf("spares listed after Close: %v", left)
	}
	for _, d := range spares {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("spare %s still there after Close (%v)", d, err)
		}
	}
}

// cgDirs are a cgroup's directories, one per v1 controller or its v2 one.
func cgDirs(c *cgroup) []string {
	if c.version == 2 {
		return []string{c.dir}
	}
	var dirs []string
	for _, d := range c.dirs {
		dirs = append(dirs, d)
	}
	return dirs
}

// cgFiles is name in each of a cgroup's directories (v1: tasks in every controller).
func cgFiles(c *cgroup, name string) []string {
	var files []string
	for _, d := range cgDirs(c) {
		if c.version == 2 && name == "tasks" {
			name = "cgroup.procs"
		}
		files = append(files, filepath.Join(d, name))
	}
	return files
}

// cgFile names one counter or limit of a cgroup in either version: "usage", "peak" and
// "limit" of memory, or a file of that name.
func cgFile(c *cgroup, ctrl, what string) string {
	v1 := map[string]string{"usage": "memory.usage_in_bytes", "peak": "memory.max_usage_in_bytes", "limit": "memory.limit_in_bytes"}
	v2 := map[string]string{"usage": "memory.current", "peak": "memory.peak", "limit": "memory.max"}
	if c.version == 2 {
		if f, ok := v2[what]; ok {
			what = f
		}
		return filepath.Join(c.dir, what)
	}
	if f, ok := v1[what]; ok {
		what = f
	}
	return filepath.Join(c.dirs[ctrl], what)
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
