# try-syscall style (bubblewrap/flatpak): each call gets a bad pointer, fd or command,
# so a call that reaches the kernel fails harmlessly with EFAULT, EBADF or EINVAL, while
# a call the seccomp filter refuses fails with EPERM or ENOSYS. x86_64 numbers only: the
# Go side marks these not_applicable on other architectures.
BAD = 1  # an unmapped user pointer
CLONE_NEWUSER, CLONE_NEWNS, SIGCHLD = 0x10000000, 0x00020000, 17

CALLS = {
    "mount-syscall": [("mount", 165, (BAD, BAD, BAD, 0, BAD))],
    "keyctl": [("keyctl", 250, (0x7fff, 0, 0, 0, 0))],
    "bpf": [("bpf", 321, (0x7fff, BAD, 8))],
    "perf-event-open": [("perf_event_open", 298, (BAD, 0, -1, -1, 0))],
    "userfaultfd": [("userfaultfd", 323, (0x1 | 0x2,))],
    "io-uring": [("io_uring_setup", 425, (1, BAD))],
    "kexec-load": [("kexec_load", 246, (0, 0x7fffffff, BAD, 0))],
    "tiocsti": [("ioctl TIOCSTI", 16, (-1, 0x5412, BAD))],
    # A watch on the host's read-only system files would see the host and other runs use them.
    "inotify": [("inotify_init1", 294, (0,)), ("inotify_add_watch", 254, (-1, BAD, 0x20))],
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
    r, err = syscall(56, CLONE_NEWUSER | CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0)
    if r == 0:
        os._exit(0)
    if r > 0:
        os.waitpid(r, 0)
    res.append(("clone(NEWUSER|NEWNS)", err or "created"))
    # unshare in a child, so a success does not change this process.
    pid = os.fork()
    if pid == 0:
        _, err = syscall(272, CLONE_NEWUSER)
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
