# airlock's session driver for python (see policy/drivers.go for the protocol).
#
# It runs in the sandbox as the program and is as untrusted as the code it runs: the
# server enforces every limit and decides every status from outside. The first process
# is the supervisor: it reads the session's key, says "ready", and forks the worker,
# again whenever the worker ends (a call's exit(), a kill after an unanswered interrupt,
# an out-of-memory kill), saying "restart" each time. The worker runs each call in one
# globals dict, with the call's stdin as its fd 0.
import os, sys

# The worker's exit status when the server has closed the session's stdin: the
# supervisor ends too.
_EOF = 199


def _airlock_session():
    import signal
    try:
        os.unlink(sys.argv[0])  # the driver is not the session's file
    except OSError:
        pass
    line = b""
    while not line.endswith(b"\n"):
        c = os.read(0, 1)
        if not c:
            os._exit(0)
        line += c
    key = line.strip().decode()
    token = ("\x1eAIRLOCK-" + key + ":").encode()

    def mark(body):
        m = token + body.encode() + b"\n"
        for fd in (1, 2):
            try:
                os.write(fd, m)
            except OSError:
                pass

    ctl = os.dup(0)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    mark("ready:%d" % os.getpid())
    while True:
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            try:
                _airlock_worker(ctl, token, mark)
            finally:
                os._exit(0)
        while True:
            try:
                _, ws = os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
        if os.WIFEXITED(ws) and os.WEXITSTATUS(ws) == _EOF:
            os._exit(0)
        if os.WIFSIGNALED(ws):
            mark("restart:signal:%d" % os.WTERMSIG(ws))
        else:
            mark("restart:exit:%d" % os.WEXITSTATUS(ws))


def _airlock_worker(ctl, token, mark):
    import builtins, io, signal, tempfile, traceback

    def read_exact(n):
        b = bytearray()
        while len(b) < n:
            c = os.read(ctl, n - len(b))
            if not c:
                os._exit(_EOF)
            b += c
        return bytes(b)

    def read_line():
        b = bytearray()
        while not b.endswith(b"\n"):
            c = os.read(ctl, 1)
            if not c:
                os._exit(_EOF)
            b += c
            if len(b) > 256:
                return b""  # not a header: resynchronise on the next line
        return bytes(b[:-1])

    ns = {"__name__": "__main__", "__builtins__": builtins}
    me = os.getpid()
    interrupted = False
    mark("up")
    out, err = sys.stdout, sys.stderr
    while True:
        # An interrupt that came too late for the last call must not hit the next one.
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
        while signal.sigtimedwait([signal.SIGINT], 0) is not None:
            pass
        h = read_line()
        if not h.startswith(token + b"call:"):
            continue
        try:
            seq, ncode, nin = (int(x) for x in h[len(token) + 5:].split(b":"))
        except ValueError:
            continue
        code, stdin = read_exact(ncode), read_exact(nin)
        if interrupted:
            # The server stopped the last call and killed what it had started: reap
            # those children, whose zombies would hold the session's pids.
            interrupted = False
            try:
                while os.waitpid(-1, os.WNOHANG)[0] > 0:
                    pass
            except ChildProcessError:
                pass
        with tempfile.TemporaryFile() as f:
            f.write(stdin)
            f.seek(0)
            os.dup2(f.fileno(), 0)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        rc = 0
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
        try:
            exec(compile(code, "<session>", "exec"), ns)
        except SystemExit as e:
            if e.code is None:
                rc = 0
            elif isinstance(e.code, int):
                rc = e.code & 0xFF
            else:
                print(e.code, file=sys.stderr)
                rc = 1
        except KeyboardInterrupt:
            traceback.print_exc()
            rc = 130
            interrupted = True
        except BaseException:
            traceback.print_exc()
            rc = 1
        if os.getpid() != me:
            # A child the call forked that ran off the end of the code: as at the end
            # of a script, it exits; it must not become a second worker.
            for s in (sys.stdout, sys.stderr):
                try:
                    s.flush()
                except Exception:
                    pass
            os._exit(rc)
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
        for s in (sys.stdout, sys.stderr, out, err):
            try:
                s.flush()
            except Exception:
                pass
        mark("end:%d:%d" % (seq, rc))


_airlock_session()
