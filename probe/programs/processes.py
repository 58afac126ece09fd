def host_pids():
    marker = ARGS["marker"].encode()
    seen = 0
    hits = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        seen += 1
        data, _ = read("/proc/%s/cmdline" % d, 4096)
        if data and marker in data and int(d) != os.getpid():
            hits.append(int(d))
    if hits:
        report(False, "host process with the marker visible as pid %s (%d processes visible)" % (hits, seen))
    else:
        report(True, "%d processes visible, none of them the host's" % seen, visible=seen)


def fork_bomb():
    cap = ARGS["pids"] * 4 + 16
    kids = []
    err = None
    while len(kids) < cap:
        try:
            pid = os.fork()
        except OSError as e:
            err = ename(e)
            break
        if pid == 0:
            time.sleep(5)
            os._exit(0)
        kids.append(pid)
    for pid in kids:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
    if err:
        # The engine adds headroom for its own init's threads to the cgroup's pids.max.
        report(err == "EAGAIN" and len(kids) <= 2 * ARGS["pids"] + 16, "fork failed with %s after %d children (pids limit %d)" % (err, len(kids), ARGS["pids"]))
    else:
        report(False, "forked %d children, past the pids limit %d" % (len(kids), ARGS["pids"]))


def detached():
    set_comm(ARGS["marker"])
    code = ("import signal, time\n"
            "for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):\n"
            "    signal.signal(s, signal.SIG_IGN)\n"
            "time.sleep(%d)\n" % ARGS["sleep"])
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            os.close(r)
            os.write(w, b"%d" % os.getpid())
            os.execv(sys.executable, [sys.executable, "-I", "-S", "-c", code, ARGS["marker"]])
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    got = os.read(r, 32)
    # The verdict is the host's: whether a process carrying the marker outlives the run.
    report(True, "detached, SIGTERM-ignoring grandchild started (pid %s)" % got.decode(), started=bool(got))
    time.sleep(ARGS["sleep"])


def ptrace():
    libc.ptrace.restype = ctypes.c_long
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    PTRACE_ATTACH, PTRACE_DETACH, PTRACE_SEIZE = 16, 17, 0x4206

    def call(req, pid):
        ctypes.set_errno(0)
        r = libc.ptrace(req, pid, None, None)
        return None if r == 0 else errno.errorcode.get(ctypes.get_errno(), "?")

    got = []
    pid = os.fork()
    if pid == 0:
        time.sleep(5)
        os._exit(0)
    err = call(PTRACE_ATTACH, pid)
    if err is None:
        os.waitpid(pid, 0)
        call(PTRACE_DETACH, pid)
        got.append("attached to own child")
    child = "own child: " + (err or "attached")
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    # SEIZE, not ATTACH, on pid 1: it does not stop the target if it works.
    err = call(PTRACE_SEIZE, 1)
    if err is None:
        call(PTRACE_DETACH, 1)
        got.append("seized pid 1")
    report(not got, child + "; pid 1: " + (err or "seized"))


main({"host-pids": host_pids, "fork-bomb": fork_bomb, "detached-survivor": detached, "ptrace": ptrace})
