# try-syscall style (bubblewrap/flatpak): each call gets a bad pointer, fd or command,
# so a call that reaches the kernel fails harmlessly with EFAULT, EBADF or EINVAL, while
# a call the seccomp filter refuses fails with EPERM or ENOSYS. Syscall numbers differ by
# architecture: NR has x86_64's and aarch64's (the generic table); the Go side marks these
# probes not_applicable on any other.
BAD = 1  # an unmapped user pointer
CLONE_NEWUSER, CLONE_NEWNS, SIGCHLD = 0x10000000, 0x00020000, 17

NR = {
    "x86_64": {"mount": 165, "keyctl": 250, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
               "io_uring_setup": 425, "kexec_load": 246, "ioctl": 16, "inotify_init1": 294,
               "inotify_add_watch": 254, "clone": 56, "unshare": 272, "fcntl": 72},
    "aarch64": {"mount": 40, "keyctl": 219, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282,
                "io_uring_setup": 425, "kexec_load": 104, "ioctl": 29, "inotify_init1": 26,
                "inotify_add_watch": 27, "clone": 220, "unshare": 97, "fcntl": 25},
}[os.uname().machine]

CALLS = {
    "mount-syscall": [("mount", NR["mount"], (BAD, BAD, BAD, 0, BAD))],
    "keyctl": [("keyctl", NR["keyctl"], (0x7fff, 0, 0, 0, 0))],
    "bpf": [("bpf", NR["bpf"], (0x7fff, BAD, 8))],
    "perf-event-open": [("perf_event_open", NR["perf_event_open"], (BAD, 0, -1, -1, 0))],
    "userfaultfd": [("userfaultfd", NR["userfaultfd"], (0x1 | 0x2,))],
    "io-uring": [("io_uring_setup", NR["io_uring_setup"], (1, BAD))],
    "kexec-load": [("kexec_load", NR["kexec_load"], (0, 0x7fffffff, BAD, 0))],
    "tiocsti": [("ioctl TIOCSTI", NR["ioctl"], (-1, 0x5412, BAD))],
    # A watch on the host's read-only system files (inotify, or dnotify: fcntl F_NOTIFY)
    # would see the host and other runs use them; a lease on one the run's uid owns would
    # hold its next writer.
    "inotify": [("inotify_init1", NR["inotify_init1"], (0,)), ("inotify_add_watch", NR["inotify_add_watch"], (-1, BAD, 0x20)),
                ("fcntl F_NOTIFY", NR["fcntl"], (-1, 0x402, 0x1)), ("fcntl F_SETLEASE", NR["fcntl"], (-1, 0x400, 0))],
}


def blocked(err):
    return err in ("EPERM", "ENOSYS")


def calls():
    res = []
    for label, nr, args in CALLS[NAME]:
        r, err = syscall(nr, *args)
        res.append((label, err or "returned %d" % r))
    report(all(blocked(e) for _, e in res), "; ".join("%s: %s" % x for x in res))


def namespaces():
    res = []
    # clone with namespace flags, fork-like (no new stack): a child that gets through exits at once.
    # The flags come first on every architecture; the rest are zero (x86_64 and aarch64
    # order the pointer arguments differently).
    r, err = syscall(NR["clone"], CLONE_NEWUSER | CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0)
    if r == 0:
        os._exit(0)
    if r > 0:
        os.waitpid(r, 0)
    res.append(("clone(NEWUSER|NEWNS)", err or "created"))
    # unshare in a child, so a success does not change this process.
    pid = os.fork()
    if pid == 0:
        _, err = syscall(NR["unshare"], CLONE_NEWUSER)
        os._exit(0 if err is None else 1)
    _, st = os.waitpid(pid, 0)
    res.append(("unshare(NEWUSER)", "created" if os.waitstatus_to_exitcode(st) == 0 else "refused"))
    report(all(e != "created" for _, e in res), "; ".join("%s: %s" % x for x in res))


def seccomp_mode():
    if have_proc():
        mode = status_fields().get("Seccomp", "?")
    else:
        r, err = prctl(21)  # PR_GET_SECCOMP: 2 in filter mode
        mode = "?" if err else str(r)
    report(mode == "2", "Seccomp: %s (2 = filter)" % mode)


probes = {name: calls for name in CALLS}
probes.update({"namespaces": namespaces, "seccomp-mode": seccomp_mode})
main(probes)
