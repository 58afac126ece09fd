package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// A stat line as the kernel writes it: pid (comm) state ppid … utime stime cutime cstime …
func statText(comm string, ppid, ut, st, cut, cst int) string {
	return "42 (" + comm + ") S " + itoa(ppid) + " 1 1 0 -1 4194560 100 0 0 0 " +
		itoa(ut) + " " + itoa(st) + " " + itoa(cut) + " " + itoa(cst) + " 20 0 1 0 5 0 0\n"
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name, comm string
	}{
		{"plain", "kworker/0:1"},
		{"spaces", "a b c"},
		{"parentheses", "x) S 99 (y"}, // a name may mimic the fields after it
		{"empty", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseStat([]byte(statText(tc.comm, 2, 7, 3, 11, 5)))
			if err != nil {
				t.Fatal(err)
			}
			if s.ppid != 2 || s.cpu.self != 100*time.Millisecond || s.cpu.children != 160*time.Millisecond {
				t.Fatalf("got ppid %d, self %v, children %v; want 2, 100ms, 160ms", s.ppid, s.cpu.self, s.cpu.children)
			}
		})
	}
	for _, bad := range []string{"", "42 (x) S 2 1", "42 x S 2 1 1 0 -1 0 0 0 0 0 1 1 1 1 20", "42 (x) S two 1 1 0 -1 0 0 0 0 0 1 1 1 1 20"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q): no error", bad)
		}
	}
}

func TestParseMachineBusy(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	const stat = "cpu  100 20 300 9999 50 4 6 77 30 0\ncpu0 50 10 150 5000 25 2 3 40 15 0\nintr 1 2 3\n"
	busy, err := parseMachineBusy([]byte(stat))
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Duration(100+20+300+4+6) * tick; busy != want {
		t.Fatalf("busy %v, want %v (idle, iowait, steal and guest, already in user, left out)", busy, want)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7\n", "cpu 1 2 3\n", "cpu 1 x 3 4 5 6 7\n"} {
		if _, err := parseMachineBusy([]byte(bad)); err == nil {
			t.Errorf("parseMachineBusy(%q): no error", bad)
		}
	}
}

func TestKthreadsCPU(t *testing.T) {
	dir := t.TempDir()
	for pid, line := range map[string]string{
		"2":    statText("kthreadd", 0, 1, 1, 0, 0),
		"17":   statText("kworker/u4:2-events_unbound", 2, 30, 20, 0, 0),
		"18":   statText("ksoftirqd/1", 2, 0, 9, 0, 0),
		"1":    statText("init", 0, 500, 500, 900, 900),
		"300":  statText("python3", 1, 400, 100, 0, 0),
		"301":  statText("child of 300", 300, 4, 4, 0, 0),
		"self": statText("not a pid", 2, 1000, 1000, 0, 0),
	} {
		if err := os.MkdirAll(filepath.Join(dir, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, pid, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "400"), 0o755); err != nil { // exited: no stat
		t.Fatal(err)
	}
	got := kthreadsCPU(dir)
	want := map[int]time.Duration{2: 20 * time.Millisecond, 17: 500 * time.Millisecond, 18: 90 * time.Millisecond}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for pid, d := range want {
		if got[pid] != d {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestKthreadsDelta(t *testing.T) {
	ms := time.Millisecond
	before := map[int]time.Duration{2: 10 * ms, 17: 100 * ms, 18: 50 * ms, 19: 70 * ms}
	after := map[int]time.Duration{2: 10 * ms, 17: 130 * ms, 18: 20 * ms, 20: 40 * ms}
	// 17 ran 30 ms; 18 is a new thread with a reused pid (20 ms); 20 is new (40 ms);
	// 19 exited, its time in the window lost but its past not subtracted.
	if d := kthreadsDelta(before, after); d != 90*ms {
		t.Fatalf("delta %v, want 90ms", d)
	}
}

func TestLessIdle(t *testing.T) {
	idle := machineSplit{busy: 400 * time.Millisecond, kthreads: 20 * time.Millisecond, wall: 2 * time.Second}
	w := machineSplit{busy: 3000 * time.Millisecond, kthreads: 200 * time.Millisecond, wall: 4 * time.Second}
	busy, kt := w.lessIdle(idle)
	if busy != 2200*time.Millisecond || kt != 160*time.Millisecond {
		t.Fatalf("less idle: busy %v, kthreads %v; want 2.2s, 160ms", busy, kt)
	}
	if busy, kt := w.lessIdle(machineSplit{}); busy != w.busy || kt != w.kthreads {
		t.Fatalf("without an idle window: %v, %v; want the raw figures", busy, kt)
	}
}
