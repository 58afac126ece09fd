def uid():
    # The host finds this process by its marker (in its name: a warm interpreter's command
    # line is not the program's), reads its host-side credentials once SIGUSR1 is caught
    # (SigCgt), then sends SIGUSR1 to end the wait.
    class Released(Exception):
        pass

    def release(*_):
        raise Released()

    got = None
    if ARGS.get("wait"):
        set_comm(ARGS["marker"])
        signal.signal(signal.SIGUSR1, release)
        try:
            time.sleep(3)
        except Released:
            got = True
    ids = (os.getuid(), os.geteuid(), os.getgid(), os.getegid())
    report(os.geteuid() != 0 and os.getuid() != 0, "inside uid/euid/gid/egid %d/%d/%d/%d" % ids,
           signalled=got is not None)


def capabilities():
    st = status_fields() if have_proc() else kernel_caps()
    sets = {k: st.get(k, "?") for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}
    ok = all(v != "?" and int(v, 16) == 0 for v in sets.values())
    report(ok, " ".join("%s=%s" % kv for kv in sets.items()))


def kernel_caps():
    """The capability sets as /proc/self/status shows them, asked of the kernel itself:
    capget for the effective, permitted and inheritable sets, prctl for the bounding and
    ambient ones."""
    hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (ctypes.c_uint32 * 6)()
    out = {}
    if libc.capget(ctypes.byref(hdr), ctypes.byref(data)) == 0:
        for i, k in enumerate(("CapEff", "CapPrm", "CapInh")):
            out[k] = "%016x" % (data[i] | data[i + 3] << 32)
    bnd = amb = 0
    for c in range(64):
        r, err = prctl(23, c)  # PR_CAPBSET_READ
        if err is None and r == 1:
            bnd |= 1 << c
        if libc.prctl(47, 1, c, 0, 0) == 1:  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET
            amb |= 1 << c
    out["CapBnd"], out["CapAmb"] = "%016x" % bnd, "%016x" % amb
    return out


def no_new_privs():
    if have_proc():
        v = status_fields().get("NoNewPrivs", "?")
    else:
        r, err = prctl(39)  # PR_GET_NO_NEW_PRIVS
        v = "?" if err else str(r)
    report(v == "1", "NoNewPrivs: " + v)


def env_secret():
    prefix = "AIRLOCK_PROBE_SECRET"
    keys = [k for k in os.environ if k.startswith(prefix)]
    data, _ = read("/proc/self/environ", 1 << 20)
    raw_hit = data is not None and prefix.encode() in data
    # The host compares the whole environment with the server's own: a leak through a
    # process started with the server (the zygote) holds what the server held then, not
    # the secret planted for this run.
    found = [{"path": k, "data": v[:4096]} for k, v in sorted(os.environ.items())]
    if keys or raw_hit:
        report(False, "server secret visible in the environment: %s" % (keys or "/proc/self/environ"), found=found)
    else:
        report(True, "%d variables, none from the server" % len(os.environ), found=found)


def fd_leak():
    if not have_proc():
        # No /proc/self/fd to list: every descriptor number up to the limit, asked.
        extra = []
        for fd in range(3, os.sysconf("SC_OPEN_MAX")):
            try:
                os.fstat(fd)
            except OSError:
                continue
            extra.append(str(fd))
        report(not extra, "open beyond 0,1,2 (no /proc: fstat of each number): " + (", ".join(extra) or "none"))
        return
    where = "/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"
    names = os.listdir(where)
    extra = []
    for n in names:
        fd = int(n)
        if fd <= 2:
            continue
        try:
            os.fstat(fd)  # the listing's own descriptor is closed by now
        except OSError:
            continue
        try:
            extra.append("%d→%s" % (fd, os.readlink("%s/%d" % (where, fd))))
        except OSError:
            extra.append(str(fd))
    report(not extra, "open beyond 0,1,2: " + (", ".join(extra) or "none"))


main({"uid": uid, "capabilities": capabilities, "no-new-privs": no_new_privs,
      "env-secret": env_secret, "fd-leak": fd_leak})
