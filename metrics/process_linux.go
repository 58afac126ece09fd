package metrics

import (
	"bytes"
	"os"
	"strconv"
	"strings"

	"github.com/airlock-mcp/airlock/internal/sysfile"
)

// The kernel reports times in /proc in clock ticks of USER_HZ, 100 on every Linux ABI
// (procfs assumed the same).
const userHZ = 100

// processFamilies are client_golang's process collector's families, read from /proc as
// its procfs read them (through sysfile: a read without os.File's poller round trip). A file that cannot be read leaves its families out, as the
// collector did (it reported an error beside the others).
func processFamilies() []family {
	var fs []family
	add := func(name, help, typ string, v float64) {
		fs = append(fs, family{name, help, typ, func(e *exposition) { e.sample(name, v) }})
	}
	if st, ok := readStat(); ok {
		add("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", "counter", float64(st.utime+st.stime)/userHZ)
		add("process_virtual_memory_bytes", "Virtual memory size in bytes.", "gauge", float64(st.vsize))
		add("process_resident_memory_bytes", "Resident memory size in bytes.", "gauge", float64(st.rss*int64(os.Getpagesize())))
		if boot, ok := bootTime(); ok {
			add("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", "gauge", float64(boot)+float64(st.starttime)/userHZ)
		}
	}
	if d, err := os.Open("/proc/self/fd"); err == nil {
		// The directory's own descriptor is counted, as procfs counted it.
		names, err := d.Readdirnames(-1)
		d.Close()
		if err == nil {
			add("process_open_fds", "Number of open file descriptors.", "gauge", float64(len(names)))
		}
	}
	if b, err := sysfile.Read("/proc/self/limits"); err == nil {
		if v, ok := limit(b, "Max open files"); ok {
			add("process_max_fds", "Maximum number of open file descriptors.", "gauge", v)
		}
		if v, ok := limit(b, "Max address space"); ok {
			add("process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes.", "gauge", v)
		}
	}
	// client_golang's process_network_{receive,transmit}_bytes_total are left out: they
	// sum /proc/self/net/dev, which is the network namespace's traffic, not the process's.
	// The server shares the host's namespace, so they exported every tenant's and the
	// host's traffic to whoever could scrape (a side channel on other calls' egress).
	return fs
}

type procStat struct {
	utime, stime, starttime uint64
	vsize                   uint64
	rss                     int64
}

// readStat reads /proc/self/stat. The command name (field 2) is in parentheses and may
// hold spaces or parentheses itself: the fields are counted from after its last ')'.
func readStat() (procStat, bool) {
	b, err := sysfile.Read("/proc/self/stat")
	if err != nil {
		return procStat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 22 {
		return procStat{}, false
	}
	var st procStat
	var errs [5]error
	st.utime, errs[0] = strconv.ParseUint(f[14-3], 10, 64)
	st.stime, errs[1] = strconv.ParseUint(f[15-3], 10, 64)
	st.starttime, errs[2] = strconv.ParseUint(f[22-3], 10, 64)
	st.vsize, errs[3] = strconv.ParseUint(f[23-3], 10, 64)
	st.rss, errs[4] = strconv.ParseInt(f[24-3], 10, 64)
	for _, err := range errs {
		if err != nil {
			return procStat{}, false
		}
	}
	return st, true
}

// bootTime is /proc/stat's btime, the boot's time in seconds since the epoch.
func bootTime() (uint64, bool) {
	b, err := sysfile.Read("/proc/stat")
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// limit is the soft limit of one row of /proc/self/limits ("unlimited" is the largest
// value the field holds, 2^64-1, as procfs read it).
func limit(b []byte, row string) (float64, bool) {
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, row)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, false
		}
		if f[0] == "unlimited" {
			return float64(^uint64(0)), true
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		return float64(n), err == nil
	}
	return 0, false
}
