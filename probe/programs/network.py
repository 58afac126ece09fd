def connect(family, addr):
    s = None
    try:
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(1)
        s.connect(addr)
        return None
    except OSError as e:
        return ename(e)
    finally:
        if s:
            s.close()


def tcp():
    err = connect(socket.AF_INET, ("127.0.0.1", ARGS["port"]))
    report(err is not None, "connect 127.0.0.1:%d: %s" % (ARGS["port"], err or "connected"))


def ipv6():
    err = connect(socket.AF_INET6, ("::1", ARGS["port"]))
    report(err is not None, "connect [::1]:%d: %s" % (ARGS["port"], err or "connected"))


def udp():
    # Sending can succeed into the sandbox's own loopback; the host says whether it arrived.
    def send():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"airlock-probe", ("127.0.0.1", ARGS["port"]))
    err = attempt(send)
    report(True, "sendto 127.0.0.1:%d: %s" % (ARGS["port"], err or "sent"))


def dns():
    import struct
    query = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0) + b"\x07example\x03com\x00" + struct.pack(">HH", 1, 1)
    answered = []
    notes = []
    for server, label in zip(ARGS["servers"], ARGS["labels"]):
        fam = socket.AF_INET6 if ":" in server else socket.AF_INET
        try:
            with socket.socket(fam, socket.SOCK_DGRAM) as s:
                s.settimeout(0.3)
                s.sendto(query, (server, 53))
                data, _ = s.recvfrom(512)
                if data[:2] == b"\x42\x42":
                    answered.append(label)
        except (OSError, socket.timeout) as e:
            notes.append("%s: %s" % (label, ename(e)))
    if answered:
        report(False, "DNS servers answered: " + ", ".join(answered))
    else:
        report(True, "no DNS answer (" + "; ".join(notes) + ")")


def raw():
    opened = []
    notes = []
    for name, fam, typ, proto in (("AF_PACKET", 17, socket.SOCK_RAW, 0x0300),
                                  ("AF_INET SOCK_RAW", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)):
        try:
            socket.socket(fam, typ, proto).close()
            opened.append(name)
        except OSError as e:
            notes.append("%s: %s" % (name, ename(e)))
    report(not opened, "opened: %s; %s" % (", ".join(opened) or "none", "; ".join(notes)))


def netlink():
    err = attempt(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close())
    report(err is not None, "socket(AF_NETLINK, NETLINK_ROUTE): " + (err or "opened"))


def abstract_unix():
    def conn():
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(1)
            s.connect("\0" + ARGS["name"])
    err = attempt(conn)
    report(err is not None, "connect @%s: %s" % (ARGS["name"], err or "connected"))


def ask_proxy(request):
    """The first line of the answer on the bridge port, or the error connecting."""
    try:
        with socket.create_connection(("127.0.0.1", ARGS["bridge"]), timeout=2) as s:
            s.sendall(request)
            data = b""
            while b"\r\n" not in data and len(data) < 4096:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            return data.split(b"\r\n")[0].decode(errors="replace") or "no answer", True
    except OSError as e:
        return ename(e), False


def egress_bridge():
    # Whatever the mode, nothing but the bridge may lead out: not the host's loopback
    # listener, not a public address over IPv4 or IPv6.
    direct = [("host listener 127.0.0.1:%d" % ARGS["port"], socket.AF_INET, ("127.0.0.1", ARGS["port"])),
              ("1.1.1.1:443", socket.AF_INET, ("1.1.1.1", 443)),
              ("[2606:4700:4700::1111]:443", socket.AF_INET6, ("2606:4700:4700::1111", 443))]
    notes, escaped = [], []
    for name, fam, addr in direct:
        err = connect(fam, addr)
        notes.append("%s: %s" % (name, err or "connected"))
        if err is None:
            escaped.append(name)
    if not ARGS["allowlist"]:
        line, reached = ask_proxy(b"GET http://airlock-probe.invalid/ HTTP/1.1\r\nHost: airlock-probe.invalid\r\n\r\n")
        notes.append("bridge port %d: %s" % (ARGS["bridge"], line))
        report(not escaped and not reached, "; ".join(notes))
        return
    # Allowlist: the bridge answers as the proxy, and refuses a name not on the list and
    # the host listener by address.
    refused = True
    for what, req in (("an unlisted name", b"GET http://airlock-probe.invalid/ HTTP/1.1\r\nHost: airlock-probe.invalid\r\n\r\n"),
                      ("the host listener by address", b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % ARGS["port"])):
        line, _ = ask_proxy(req)
        notes.append("proxy asked for %s: %s" % (what, line))
        refused = refused and " 403 " in line + " "
    report(not escaped and refused, "; ".join(notes))


main({"tcp-loopback": tcp, "ipv6-loopback": ipv6, "udp-loopback": udp, "dns": dns,
      "raw-socket": raw, "netlink-socket": netlink, "abstract-unix": abstract_unix,
      "egress-bridge": egress_bridge})
