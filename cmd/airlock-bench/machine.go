package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The per-process columns miss what no process of the bench's own tree is charged for:
// the kernel threads' deferred work a call causes (a network namespace's cleanup_net,
// memcg offlining, delayed mntput run in kworkers), interrupts, and bwrap's program,
// which its pid 1 never reaps into anyone's rusage. The whole machine's busy time over a
// window shows all of it, bwrap's included, next to airlock's; it also shows whatever
// else the host runs, so an idle window in every round measures that rate and each
// window's figure is also given with it taken out.

// tick is USER_HZ, which is 100 on Linux: /proc's CPU times count in 10 ms.
const tick = 10 * time.Millisecond

// statLine is what the bench reads of /proc/PID/stat.
type statLine struct {
	ppid int
	cpu  procCPU
}

// parseStat parses /proc/PID/stat. The command name, in parentheses, may itself hold
// spaces and parentheses, so the fields are counted after the last ')'.
func parseStat(b []byte) (statLine, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return statLine{}, fmt.Errorf("no command name in %q", b)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return statLine{}, fmt.Errorf("short stat line: %d fields", len(f))
	}
	n := make([]int64, 5)
	for j, k := range []int{1, 11, 12, 13, 14} { // ppid, utime, stime, cutime, cstime
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return statLine{}, fmt.Errorf("stat field %d: %w", k+3, err)
		}
		n[j] = v
	}
	return statLine{ppid: int(n[0]), cpu: procCPU{
		self:     time.Duration(n[1]+n[2]) * tick,
		children: time.Duration(n[3]+n[4]) * tick,
	}}, nil
}

// eachProc calls fn for every process under procDir (/proc) whose stat it can read.
func eachProc(procDir string, fn func(pid int, s statLine)) {
	entries, _ := os.ReadDir(procDir)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(procDir, e.Name(), "stat"))
		if err != nil {
			continue // gone since the listing
		}
		if s, err := parseStat(b); err == nil {
			fn(pid, s)
		}
	}
}

// kthreadd is the kernel threads' parent: every kernel thread is it or its child.
const kthreadd = 2

// kthreadsCPU is each kernel thread's own CPU time by pid.
func kthreadsCPU(procDir string) map[int]time.Duration {
	m := map[int]time.Duration{}
	eachProc(procDir, func(pid int, s statLine) {
		if pid == kthreadd || s.ppid == kthreadd {
			m[pid] = s.cpu.self
		}
	})
	return m
}

// kthreadsDelta is the kernel threads' CPU between two readings. A thread that is new
// counts from zero; one that exited in between is lost (kworkers are long-lived: an idle
// one is reaped after five minutes), and a pid reused by a new thread, read lower than
// before, counts as new.
func kthreadsDelta(before, after map[int]time.Duration) time.Duration {
	var d time.Duration
	for pid, a := range after {
		if b, ok := before[pid]; ok && a >= b {
			d += a - b
		} else {
			d += a
		}
	}
	return d
}

// parseMachineBusy is the busy time of all CPUs from /proc/stat's "cpu" line: user,
// nice, system, irq and softirq (guest time is already in user). Idle, iowait and steal
// (the hypervisor running someone else) are not this machine's work.
func parseMachineBusy(b []byte) (time.Duration, error) {
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		if len(f) < 8 {
			return 0, fmt.Errorf("short cpu line in /proc/stat: %q", line)
		}
		var busy int64
		for _, k := range []int{1, 2, 3, 6, 7} { // user nice system [idle iowait] irq softirq
			v, err := strconv.ParseInt(f[k], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/stat cpu field %d: %w", k, err)
			}
			busy += v
		}
		return time.Duration(busy) * tick, nil
	}
	return 0, fmt.Errorf("no cpu line in /proc/stat")
}

// machine is one reading of the whole machine's counters.
type machine struct {
	at       time.Time
	busy     time.Duration
	kthreads map[int]time.Duration
}

// readMachine reads the machine's counters. first orders the two reads so that walking
// /proc for the kernel threads (a few ms of the bench's own CPU) falls outside the span
// between a window's two /proc/stat readings: kernel threads first at a window's start,
// last at its end.
func readMachine(start bool) machine {
	var m machine
	readStat := func() {
		b, err := os.ReadFile("/proc/stat")
		if err == nil {
			m.busy, err = parseMachineBusy(b)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "airlock-bench: /proc/stat:", err)
		}
		m.at = time.Now()
	}
	if start {
		m.kthreads = kthreadsCPU("/proc")
		readStat()
	} else {
		readStat()
		m.kthreads = kthreadsCPU("/proc")
	}
	return m
}

// machineSplit is a window's whole-machine figures, summed over its rounds.
type machineSplit struct {
	busy, kthreads time.Duration
	wall           time.Duration // between the /proc/stat readings
}

func (s *machineSplit) add(before, after machine) {
	s.busy += after.busy - before.busy
	s.kthreads += kthreadsDelta(before.kthreads, after.kthreads)
	s.wall += after.at.Sub(before.at)
}

// lessIdle is s with the idle window's rate of busy time and kernel-thread time taken
// out over s's own wall time. On a busy host the other load gets less CPU while a window
// fills both CPUs than while the idle window leaves them free, so this takes out too
// much there: it is meaningful on a quiet host.
func (s machineSplit) lessIdle(idle machineSplit) (busy, kthreads time.Duration) {
	if idle.wall <= 0 {
		return s.busy, s.kthreads
	}
	f := float64(s.wall) / float64(idle.wall)
	return s.busy - time.Duration(f*float64(idle.busy)), s.kthreads - time.Duration(f*float64(idle.kthreads))
}
