package linux

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// crossRunHolder creates, under the key or name argv[1] gives, every kind of IPC
// object a program can name: a SysV shared memory segment, semaphore set and message
// queue, a POSIX shared memory file and an abstract unix socket listener. It prints
// "holding mq=" with what creating a POSIX message queue gave, and waits to be
// cancelled.
const crossRunHolder = `
import ctypes, errno, os, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
key = int(sys.argv[1][-8:], 16)
ok = [libc.shmget(key, 4096, 0o1666) >= 0, libc.semget(key, 1, 0o1666) >= 0, libc.msgget(key, 0o1666) >= 0]
mq = "ok"
if libc.mq_open(("/" + sys.argv[1]).encode(), os.O_CREAT | os.O_RDWR, 0o666, None) < 0:
    mq = errno.errorcode.get(ctypes.get_errno(), "?")
open("/dev/shm/" + sys.argv[1], "w").write("secret")
s = socket.socket(socket.AF_UNIX)
s.bind("\0" + sys.argv[1])
s.listen(1)
if not all(ok):
    print("holder could not create its SysV objects", ok, flush=True)
    sys.exit(3)
print("holding mq=" + mq, flush=True)
time.sleep(60)
`

// crossRunSeeker looks for the holder's objects by the same key and name, and prints
// what each attempt returned: ENOENT (or ECONNREFUSED) when they are out of its reach.
const crossRunSeeker = pyAttempt + `
import ctypes, socket
libc = ctypes.CDLL(None, use_errno=True)
key = int(sys.argv[1][-8:], 16)
def sysv(fn, *args):
    def call():
        if fn(key, *args) < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    return call
attempt("shmget", sysv(libc.shmget, 0, 0o666))
attempt("semget", sysv(libc.semget, 0, 0o666))
attempt("msgget", sysv(libc.msgget, 0o666))
def mq():
    if libc.mq_open(("/" + sys.argv[1]).encode(), os.O_RDONLY) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
attempt("mq_open", mq)
attempt("posix-shm", lambda: open("/dev/shm/" + sys.argv[1]).read())
def connect():
    c = socket.socket(socket.AF_UNIX)
    c.connect("\0" + sys.argv[1])
attempt("abstract-connect", connect)
print(json.dumps(out))
`

// TestInFlightRunsShareNoIPC: two runs in flight at once, the second seeking by key and
// name the IPC objects the first holds (SysV shared memory, semaphores, message queues,
// a POSIX message queue (mq_open needs no /dev/mqueue; creating one is refused anyway,
// RLIMIT_MSGQUEUE 0), POSIX shared memory, an abstract unix socket) finds none of them, nor does the host.
// Each run has its own IPC and network namespace and its own /dev/shm; a run without
// them could read another's shared memory or talk to its listener. (leak_linux_test's
// TestStateDoesNotBleed checks the SysV segment after the first run has ended; this is
// the attack while it is alive.)
func TestInFlightRunsShareNoIPC(t *testing.T) {
	recordTier(t)
	notInTier(t, "the Landlock tier shares the host's IPC namespace")
	s := testSandbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	holdCtx, stopHolder := context.WithCancel(ctx)
	defer stopHolder()

	// The last 8 hex digits of the marker are the SysV key; the whole marker names the
	// POSIX shm file and the abstract socket.
	marker := newMarker()
	hSpec := pySpec(crossRunHolder, marker)
	hSpec.Limits.Wall = 50 * time.Second
	held := runPrinting(t, holdCtx, s, hSpec, "the holder")

	sSpec := pySpec(crossRunSeeker, marker)
	var got map[string]string
	runJSON(t, sSpec, &got)
	stopHolder()
	res := <-held
	if !strings.HasPrefix(string(res.Stdout.Bytes()), "holding") {
		t.Fatalf("the holder did not hold its objects: %s", brief(res))
	}
	// RLIMIT_MSGQUEUE is 0: a run cannot create a POSIX message queue at all.
	if !strings.HasPrefix(string(res.Stdout.Bytes()), "holding mq=EMFILE") {
		t.Errorf("the holder's mq_open(O_CREAT) was not refused with EMFILE (RLIMIT_MSGQUEUE 0): %s", brief(res))
	}

	want := map[string]string{
		"shmget": "ENOENT", "semget": "ENOENT", "msgget": "ENOENT",
		"mq_open": "ENOENT", "posix-shm": "ENOENT", "abstract-connect": "ECONNREFUSED",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("a concurrent run reaching the holder's %s: got %q, want %s", k, got[k], w)
		}
	}

	// The host's own IPC and network namespaces hold none of them either.
	key, err := strconv.ParseInt(marker[len(marker)-8:], 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := unix.SysvShmGet(int(key), 0, 0); !errors.Is(err, unix.ENOENT) {
		t.Errorf("the host sees the run's SysV segment: id %d, %v", id, err)
	}
	if c, err := net.Dial("unix", "@"+marker); err == nil {
		_ = c.Close()
		t.Error("the host reached the run's abstract socket")
	}
}

// TestLesserSyscallsDenied calls for real the syscalls TestSyscallsDenied's table leaves
// out: newer mount and memory-policy calls, old ones no program needs, and unshare of the
// flags that make no namespace. Each is looked up by name (a syscall this architecture
// or libseccomp lacks is left out, and said so). Arguments are bad addresses or
// descriptors: a call the filter let through would fail with EFAULT or EBADF instead.
func TestLesserSyscallsDenied(t *testing.T) {
	recordTier(t)
	notInTier(t, "the Landlock tier's filter is its own (TestLandlockTier runs TestSyscallsDenied)")
	const bad = 0x10
	calls := map[string]struct {
		args []int64
		want string
	}{
		"modify_ldt":              {[]int64{0, bad, 16}, "ENOSYS"},
		"cachestat":               {[]int64{-1, bad, bad, 0}, "ENOSYS"},
		"set_mempolicy_home_node": {[]int64{bad, 4096, 0, 0}, "ENOSYS"},
		"ioprio_set":              {[]int64{3, 0, 0x6007}, "ENOSYS"}, // IOPRIO_WHO_USER, idle class
		"fsconfig":                {[]int64{-1, 0, 0, 0, 0}, "EPERM"},
		"fsmount":                 {[]int64{-1, 0, 0}, "EPERM"},
		"fspick":                  {[]int64{-1, bad, 0}, "EPERM"},
		"uselib":                  {[]int64{bad}, "EPERM"},
		"ustat":                   {[]int64{0, bad}, "EPERM"},
		"vhangup":                 {nil, "EPERM"},
		"mbind":                   {[]int64{bad, 4096, 0, 0, 0, 0}, "EPERM"},
		"migrate_pages":           {[]int64{1, 64, bad, bad}, "EPERM"},
		"move_pages":              {[]int64{1, 1, bad, 0, bad, 0}, "EPERM"},
		"process_madvise":         {[]int64{-1, bad, 1, 0, 0}, "EPERM"},
		"fanotify_mark":           {[]int64{-1, 1, 0, -100, bad}, "EPERM"},
		"unshare-files":           {[]int64{0x400}, "EPERM"},   // CLONE_FILES
		"unshare-fs":              {[]int64{0x200}, "EPERM"},   // CLONE_FS
		"unshare-sysvsem":         {[]int64{0x40000}, "EPERM"}, // CLONE_SYSVSEM
	}
	stdin := map[string][]int64{}
	for key, c := range calls {
		name, _, _ := strings.Cut(key, "-")
		nr, ok := syscallNumber(name)
		if !ok {
			t.Logf("NOT CHECKED: no %s syscall on %s (or in this libseccomp)", name, runtime.GOARCH)
			continue
		}
		stdin[key] = append([]int64{int64(nr)}, c.args...)
	}
	b, _ := json.Marshal(stdin)
	spec := pySpec(syscallProbe, newMarker())
	spec.Stdin = b
	var got map[string]string
	runJSON(t, spec, &got)
	for key := range stdin {
		if got[key] != calls[key].want {
			t.Errorf("%s: got %s, want %s", key, got[key], calls[key].want)
		}
	}
}
