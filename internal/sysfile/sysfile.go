// Package sysfile reads the small files a process learns its host from (/proc, /sys,
// /etc: a sysctl, a uid map, mountinfo, /etc/passwd) in the system calls a read needs:
// open, read to the end, close. os.ReadFile also stats the file, and its os.File sets
// the descriptor non-blocking and offers it to the runtime's poller (which takes procfs
// files) and undoes both at close: five calls more per file. `airlock run` reads about
// twenty such files before its spawn request (the self-check's key, the host ids, the
// cgroups): ≈ 7 µs a file here (issue 24, goal 4).
package sysfile

// initial is the first read's buffer: most of these files are under a page, and a
// longer one (mountinfo) grows it.
const initial = 4096
