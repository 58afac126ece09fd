MIB = 1 << 20


def memory_bomb():
    limit = ARGS["memory"]
    cap = limit * 4 + 64 * MIB
    hold = []
    got = 0
    try:
        while got < cap:
            # bytes * n writes every page, unlike a zeroed bytearray the kernel maps lazily.
            hold.append(b"x" * (8 * MIB))
            got += 8 * MIB
    except MemoryError:
        hold.clear()
        report(got <= limit + 64 * MIB, "MemoryError after %d MiB (limit %d MiB)" % (got // MIB, limit // MIB))
        return
    report(False, "allocated %d MiB past the %d MiB limit" % (got // MIB, limit // MIB))


def cpu_spin():
    end = time.monotonic() + ARGS["spin"]
    while time.monotonic() < end:
        pass
    report(False, "spun %.1f s without being stopped" % ARGS["spin"])


def disk_fill():
    limit = ARGS["workspace"]
    cap = limit * 4 + 16 * MIB
    chunk = b"\0" * MIB
    done = 0
    try:
        with open("fill.bin", "wb", buffering=0) as f:
            while done < cap:
                done += f.write(chunk)
    except OSError as e:
        report(done <= limit + MIB and e.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT),
               "write failed with %s after %d MiB (workspace %d MiB)" % (ename(e), done // MIB, limit // MIB))
        return
    report(False, "wrote %d MiB, past the %d MiB workspace" % (done // MIB, limit // MIB))


def open_files():
    limit = ARGS["open_files"]
    cap = limit * 4 + 64
    fds = []
    err = None
    while len(fds) < cap:
        try:
            fds.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as e:
            err = ename(e)
            break
    n = len(fds)
    for fd in fds:
        os.close(fd)
    if err:
        report(err == "EMFILE" and n <= limit, "open failed with %s after %d files (limit %d)" % (err, n, limit))
    else:
        report(False, "opened %d files, past the limit %d" % (n, limit))


def output_flood():
    chunk = b"A" * 65536
    left = ARGS["bytes"]
    out = sys.stdout.buffer
    while left > 0:
        left -= out.write(chunk[:left])
    out.flush()
    # The host judges by what the sandbox kept and counted.
    report(True, "wrote %d bytes" % ARGS["bytes"])


main({"memory-bomb": memory_bomb, "cpu-timeout": cpu_spin, "disk-fill": disk_fill,
      "open-files": open_files, "output-flood": output_flood})
