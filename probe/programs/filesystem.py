def read_shadow():
    data, err = read("/etc/shadow")
    if data is None:
        report(True, "open /etc/shadow: " + err)
    else:
        report(False, "read %d bytes of /etc/shadow" % len(data))


def read_host_secret():
    # The host judges by the secret's content, which this program is never told.
    found = []
    tried = 0
    for p in ARGS["paths"]:
        rel = p.lstrip("/")
        for cand in (p, "/proc/1/root/" + rel, "../" * 16 + rel, "/proc/self/cwd/" + "../" * 16 + rel):
            tried += 1
            data, _ = read(cand)
            if data is not None:
                found.append({"path": cand, "data": data.decode(errors="replace")})
    report(not found, "%d paths tried, %d readable" % (tried, len(found)), found=found)


def write_outside():
    wrote = []
    for p in ARGS["create"]:
        if attempt(lambda: open(p, "x").write("airlock probe")) is None:
            wrote.append(p)
    if attempt(lambda: open(ARGS["existing"], "w").write("overwritten")) is None:
        wrote.append(ARGS["existing"])
    # Writes that land in the sandbox's own /tmp are harmless: the host checks its files.
    report(not wrote, "writes that succeeded inside: %s" % (", ".join(wrote) or "none"), wrote=wrote)


def mknod():
    made = []
    for p in ("probe-null", "/tmp/probe-null"):
        err = attempt(lambda: os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(1, 3)))
        if err is None:
            made.append(p)
        last = err
    if made:
        report(False, "created character device 1:3 at " + ", ".join(made))
    else:
        report(True, "mknod c 1 3: " + last)


def link_escape():
    opened = []
    notes = []
    err = attempt(lambda: os.symlink("/etc/shadow", "ln-shadow"))
    if err is None:
        data, rerr = read("ln-shadow")
        if data is not None:
            opened.append("symlink to /etc/shadow read %d bytes" % len(data))
        else:
            notes.append("symlink to /etc/shadow: " + rerr)
    else:
        notes.append("symlink: " + err)
    err = attempt(lambda: os.link("/etc/passwd", "hl-passwd"))
    if err is None:
        opened.append("hard link to /etc/passwd created")
    else:
        notes.append("link /etc/passwd: " + err)
    report(not opened, "; ".join(opened + notes))


def setuid():
    import subprocess
    for p in ("/usr/bin/passwd", "/usr/bin/su", "/bin/su", "/usr/bin/newgrp", "/usr/bin/chsh"):
        try:
            st = os.stat(p)
        except OSError:
            continue
        if st.st_mode & stat.S_ISUID and st.st_uid != os.geteuid():
            owner = st.st_uid
            break
    else:
        not_applicable("no setuid binary owned by another user is visible")
        return
    if not have_proc():
        not_applicable("no /proc in this sandbox to read a child's credentials; no-new-privs checks what makes setuid inert")
        return
    me = os.geteuid()
    child = subprocess.Popen([p], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Popen can return before the kernel commits the new credentials; they are final once
    # the binary runs far enough to sleep on its stdin or exit (a zombie keeps them).
    end = time.monotonic() + 1
    while True:
        st = status_fields(child.pid)
        uids = st.get("Uid", "").split()
        if st.get("State", "R")[:1] in "SZ" or time.monotonic() > end:
            break
        time.sleep(0.005)
    child.kill()
    child.wait()
    if len(uids) < 2:
        report(False, "could not read the credentials of %s" % p, error=True)
        return
    euid = int(uids[1])
    report(euid == me, "%s (setuid uid %d) ran with euid %d; caller euid %d" % (p, owner, euid, me))


main({"read-shadow": read_shadow, "read-host-secret": read_host_secret,
      "write-outside-workspace": write_outside, "mknod": mknod,
      "link-escape": link_escape, "setuid": setuid})
