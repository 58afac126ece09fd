# airlock's python bootstrap, run as `python3 <flags> -c <settings + this>`. The settings
# line in front (policy.pythonBoot) sets _airlock_pooled, _airlock_preload and
# _airlock_figures.
#
# Pooled (a warm pool): it loads the interpreter and imports _airlock_preload before the
# call exists, says so on fd 4, then waits on fd 3 for the program's argv (main.py and its
# args, each NUL-terminated). Not pooled (an environment's cold run): the argv follows
# -c on the command line. Either way it runs main.py as __main__ the way
# `python3 <flags> main.py args...` would: same sys.argv, a fresh __main__ module,
# tracebacks that start in main.py, SystemExit codes. It ends by raising SystemExit, so the
# interpreter's own shutdown runs as after main.py: threads joined, atexit handlers, and the
# module teardown that flushes files the program left open and calls __del__ (skipping it
# lost buffered writes to out/). A pooled sandbox with a preload list ends through
# _airlock_quick_exit instead, which does those steps for the program's own objects only.
#
# With _airlock_figures set (a workspace-relative directory), matplotlib's backend is
# Agg with a show() that saves every open figure there as PNG, and the figures still open
# when main.py ends are saved too: they come back like any file in out/.
import os, sys


def _airlock_argv():
    if not _airlock_pooled:
        return sys.argv[1:]
    for name in _airlock_preload:
        __import__(name)
    # The first compile() in an interpreter costs ~0.6 ms more than the ones after it
    # (pooled print(1): 2.5 → 2.1 ms from the handover to the exit): paid here, before
    # the call, instead of by the program's.
    compile("pass", "<airlock>", "exec")
    # What is loaded now is the interpreter's own: kept out of every collection, so the
    # shutdown's full collection walks only the program's objects (pooled print(1): 9.3 → 7.3 ms).
    loaded = "gc" in sys.modules
    import gc
    gc.freeze()
    if not loaded:
        del sys.modules["gc"]  # as a script would find sys.modules
    os.write(4, b"\n")  # loaded: the pool may hand this sandbox a call
    os.close(4)
    buf = bytearray()
    while True:
        chunk = os.read(3, 1 << 16)
        if not chunk:
            break
        buf += chunk
    os.close(3)
    return [a.decode("utf-8", "surrogateescape") for a in bytes(buf).split(b"\0")[:-1]]


def _airlock_exit_code(code):
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(str(code) + "\n")
    except Exception:
        pass
    return 1


def _airlock_save_figures():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    out = _airlock_figures_dir
    for num in plt.get_fignums():
        try:
            os.makedirs(out, exist_ok=True)
            n = 1
            while os.path.exists(os.path.join(out, "figure-%d.png" % n)):
                n += 1
            plt.figure(num).savefig(os.path.join(out, "figure-%d.png" % n), format="png")
        except Exception as e:
            sys.stderr.write("airlock: figure %s not saved: %s\n" % (num, e))
    plt.close("all")


class _AirlockFigures:
    # The backend MPLBACKEND names, found only when matplotlib asks for it, so a run
    # that never plots never imports matplotlib.
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "_airlock_figures":
            return None
        return sys.modules["_frozen_importlib"].ModuleSpec(name, _AirlockFigures)

    @staticmethod
    def create_module(spec):
        return None

    @staticmethod
    def exec_module(module):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.backend_bases import FigureManagerBase

        module.FigureCanvas = FigureCanvasAgg
        module.FigureManager = FigureManagerBase
        module.show = lambda *args, **kwargs: _airlock_save_figures()


def _airlock_quick_exit(status, workspace):
    # What a preloaded environment imported before the call (pandas and matplotlib.pyplot:
    # ~25 ms of CPU to tear down here, most of a pooled call) would be torn down only to
    # be thrown away with the sandbox. What the program needs at exit is done as the
    # interpreter's own shutdown does it, in its order: non-daemon threads joined, atexit
    # handlers run, then the program's own modules cleared and its objects collected, so
    # files it left open are flushed and closed and __del__ methods run; then the streams.
    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()
    import atexit, gc

    atexit._run_exitfuncs()
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None) or ""
        if name == "__main__" or (isinstance(where, str) and where.startswith(workspace)):
            # As the interpreter clears a module: __builtins__ stays, for __del__ methods.
            for key in [k for k in module.__dict__ if k != "__builtins__"]:
                del module.__dict__[key]
    gc.collect()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(status)


def _airlock_main():
    if _airlock_figures:
        sys.meta_path.insert(0, _AirlockFigures)  # before the preload imports matplotlib
    sys.argv = _airlock_argv()
    # python3 main.py names the script by its absolute path in __file__ and tracebacks.
    path = os.path.abspath(sys.argv[0])
    # `python3 main.py` puts the script's directory first on sys.path; `-c` put "".
    sys.path[0] = os.path.dirname(path)
    # Fixed now: the program may change sys.argv or its working directory.
    global _airlock_figures_dir
    _airlock_figures_dir = os.path.join(os.path.dirname(path), _airlock_figures)
    # The rest of what python gives a script's __main__, down to sys.orig_argv (3.10+).
    if hasattr(sys, "orig_argv") and "-c" in sys.orig_argv:
        sys.orig_argv[sys.orig_argv.index("-c"):] = sys.argv
    main = type(sys)("__main__")
    main.__file__ = path
    main.__cached__ = None
    main.__annotations__ = {}
    main.__loader__ = sys.modules["_frozen_importlib_external"].SourceFileLoader("__main__", path)
    main.__builtins__ = __builtins__
    sys.modules["__main__"] = main
    try:
        with open(path, "rb") as f:
            source = f.read()
        exec(compile(source, path, "exec"), main.__dict__)
        status = 0
    except SystemExit as e:
        status = _airlock_exit_code(e.code)
    except BaseException as e:
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != path:
            tb = tb.tb_next
        # The default hook prints e.__traceback__, not its argument.
        e.__traceback__ = tb
        sys.excepthook(type(e), e, tb)
        status = 1
    if _airlock_figures:
        _airlock_save_figures()
    if _airlock_pooled and _airlock_preload:
        _airlock_quick_exit(status, os.path.dirname(path) + "/")
    raise SystemExit(status)


_airlock_main()
