# Shared prelude of every probe program. The Go side prepends it to one category file
# and runs the result as main.py with argv: <probe name> <JSON arguments>.
# A probe prints exactly one line "AIRLOCK-PROBE {json}" with "blocked" (the escape
# attempt failed), "na" (a reason the probe does not apply) and "detail".
import ctypes
import errno
import json
import os
import signal
import socket
import stat
import sys
import time

NAME = sys.argv[1]
ARGS = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}


def report(blocked, detail, **extra):
    extra.update(blocked=bool(blocked), detail=str(detail)[:400])
    sys.stdout.write("\nAIRLOCK-PROBE " + json.dumps(extra) + "\n")
    sys.stdout.flush()


def not_applicable(reason):
    report(False, reason, na=reason)


def ename(e):
    if isinstance(e, OSError) and e.errno:
        return errno.errorcode.get(e.errno, str(e.errno))
    return type(e).__name__


def attempt(fn):
    """Runs fn; None when it succeeded, else the errno name it failed with."""
    try:
        fn()
        return None
    except (OSError, ValueError) as e:
        return ename(e)


def read(path, n=256):
    """(data, None) when path could be read, (None, errno name) otherwise."""
    try:
        with open(path, "rb") as f:
            return f.read(n), None
    except OSError as e:
        return None, ename(e)


def status_fields(pid="self"):
    out = {}
    data, _ = read("/proc/%s/status" % pid, 1 << 16)
    for line in (data or b"").decode(errors="replace").splitlines():
        k, _, v = line.partition(":")
        out[k.strip()] = v.strip()
    return out


libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def syscall(nr, *args):
    """Raw syscall: (return value, errno name or None)."""
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if r == -1:
        e = ctypes.get_errno()
        return r, errno.errorcode.get(e, str(e))
    return r, None


def prctl(option, arg=0):
    """prctl with one argument: (return value, errno name or None)."""
    ctypes.set_errno(0)
    r = libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
    if r == -1:
        e = ctypes.get_errno()
        return r, errno.errorcode.get(e, str(e))
    return r, None


def have_proc():
    """A sandbox in a container that masks its /proc gets an empty one (probe: proc)."""
    return os.path.exists("/proc/self")


def set_comm(name):
    """Sets this process's name (/proc/<pid>/comm), so the host can find it."""
    libc.prctl(15, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)  # PR_SET_NAME


def main(probes):
    fn = probes.get(NAME)
    if fn is None:
        sys.stderr.write("unknown probe %s\n" % NAME)
        sys.exit(2)
    fn()
