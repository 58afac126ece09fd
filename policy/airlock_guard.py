"""airlock import guard: ADVISORY defence in depth, NOT a security boundary.

Run as: python3 -I ... .airlock_guard.py DENY_IMPORT DENY_FROM main.py [args...]
DENY_IMPORT and DENY_FROM are comma-separated dotted module names (validated by the
server). The sandbox, not this file, is what contains hostile code; this guard only turns
the most common forbidden imports into a clear "policy_denied" answer.

1. Static: the AST of main.py is checked before any of it runs. `import X`, `import X.Y`,
   `from X import Y`, `from X.Y import Z` and literal `__import__("X")` /
   `import_module("X")` calls are checked; the lowest offending line is reported.
2. Runtime: wrappers around builtins.__import__ and importlib's _gcd_import, and an
   audit hook on the "import" event (which also sees a saved original __import__, but
   only for modules not loaded yet: os is loaded at start-up), deny a denied module when
   the importing frame is the program's own code (main.py, files next to it, exec'd
   strings). Libraries may import what they need: pathlib, tempfile and asyncio keep
   working under a policy that denies nt, shutil or socket to the program.
3. main.py then runs as __main__ with sys.argv = [main.py, *args].

On a violation one line `airlock-policy-denied {"module":..,"line":..,"how":..}` goes to
fd 2 and the process ends with os._exit(86) before the module is imported, so the program
cannot catch the failure.

Known gaps (advisory): sys.modules["os"], attributes of loaded modules (random._os),
the original __import__ reachable through the wrapper's __closure__ (for loaded modules),
libraries that expose a denied module (asyncio.create_subprocess_exec), code compiled
with a file name that looks like a library path, native extensions, and new interpreters
the program starts.
"""

import sys

DENIED_EXIT = 86
MARKER = b"airlock-policy-denied "


def _main():
    import _ast
    import builtins
    import posix
    import _frozen_importlib as bootstrap

    deny_import = tuple(n for n in sys.argv[1].split(",") if n)
    deny_from = tuple(n for n in sys.argv[2].split(",") if n)
    script = sys.argv[3]
    args = sys.argv[4:]
    cwd = posix.getcwd()
    filename = script if script.startswith("/") else cwd + "/" + script
    workspace = filename.rpartition("/")[0] + "/"
    write, exit_now, getframe = posix.write, posix._exit, sys._getframe

    def matches(name, denied):
        for d in denied:
            if name == d or name.startswith(d + "."):
                return True
        return False

    def clean(name):
        # The module name may come from the program (__import__("os.\x1b...")): keep the
        # report line plain JSON without needing the json module.
        return "".join(c if c.isalnum() or c in "._" else "?" for c in name[:200])

    def deny(name, line, how):
        report = '{"module":"%s","line":%d,"how":"%s"}' % (clean(name), line, how)
        write(2, b"\n" + MARKER + report.encode() + b"\n")
        exit_now(DENIED_EXIT)

    def user_line():
        f = getframe(1)
        while f is not None:
            if f.f_code.co_filename == filename:
                return f.f_lineno
            f = f.f_back
        return 0

    def from_denied(module, fromlist):
        if matches(module, deny_import) or matches(module, deny_from):
            return module
        for item in fromlist or ():
            if isinstance(item, str) and item != "*":
                full = module + "." + item
                if matches(full, deny_import) or matches(full, deny_from):
                    return full
        return None

    # 1. Static check: nothing of main.py has run yet.
    with open(filename, "rb") as f:
        source = f.read()
    try:
        tree = compile(source, filename, "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError):
        tree = None  # compiling below raises the same error with the usual traceback
    found = []
    stack = [tree] if tree is not None else []
    while stack:
        node = stack.pop()
        bad = None
        if isinstance(node, _ast.Import):
            for alias in node.names:
                if matches(alias.name, deny_import):
                    bad = alias.name
                    break
        elif isinstance(node, _ast.ImportFrom):
            # Relative imports cannot name a top-level module from a package-less
            # __main__; the runtime wrapper resolves the ones that set __package__.
            if node.level == 0 and node.module:
                bad = from_denied(node.module, [a.name for a in node.names])
        elif isinstance(node, _ast.Call) and node.args:
            fn, arg = node.func, node.args[0]
            callee = fn.id if isinstance(fn, _ast.Name) else (fn.attr if isinstance(fn, _ast.Attribute) else "")
            if callee in ("__import__", "import_module") and isinstance(arg, _ast.Constant) \
                    and isinstance(arg.value, str) and matches(arg.value, deny_import):
                bad = arg.value
        if bad is not None:
            found.append((node.lineno, bad))
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                stack.extend(v for v in value if isinstance(v, _ast.AST))
            elif isinstance(value, _ast.AST):
                stack.append(value)
    if found:
        line, name = min(found)
        deny(name, line, "static")

    # 2. Runtime hooks. Everything the guard needs is imported above this point.
    # Library code lives under the interpreter's prefixes; the program's own files live
    # next to main.py (unless the workspace is "/", where only main.py itself counts).
    lib_roots = tuple(p.rstrip("/") + "/" for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})

    def is_user(code_file):
        if code_file == filename:
            return True
        if code_file.startswith("<"):
            return not code_file.startswith("<frozen ")
        return workspace != "/" and code_file.startswith(workspace) and not code_file.startswith(lib_roots)

    guard_file = getframe(0).f_code.co_filename

    def caller_is_user(depth):
        # The nearest frame that is neither import machinery nor this guard (whose
        # wrappers sit between a library's import statement and the audit hook) decides.
        f = getframe(depth)
        while f is not None:
            name = f.f_code.co_filename
            if name != guard_file and not (name.startswith("<frozen importlib") or "/importlib/" in name):
                return is_user(name)
            f = f.f_back
        return False

    def resolve(name, globals_, level):
        if level <= 0:
            return name
        try:
            package = globals_.get("__package__")
            if package is None:
                spec = globals_.get("__spec__")
                package = spec.parent if spec is not None else globals_["__name__"]
            return bootstrap._resolve_name(name, package, level)
        except Exception:
            return name  # the real import fails the same way

    real_import = builtins.__import__

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        if caller_is_user(2) and isinstance(name, str):
            full = resolve(name, globals or {}, level)
            if fromlist:
                bad = from_denied(full, fromlist)
            else:
                bad = full if matches(full, deny_import) else None
            if bad is not None:
                deny(bad, user_line(), "runtime")
        return real_import(name, globals, locals, fromlist, level)

    real_gcd = bootstrap._gcd_import

    def guarded_gcd(name, package=None, level=0):
        if caller_is_user(2) and isinstance(name, str):
            full = resolve(name, {"__package__": package}, level)
            if matches(full, deny_import):
                deny(full, user_line(), "runtime")
        return real_gcd(name, package, level)

    def audit(event, hook_args):
        if event == "import" and hook_args and isinstance(hook_args[0], str) \
                and matches(hook_args[0], deny_import) and caller_is_user(2):
            deny(hook_args[0], user_line(), "runtime")

    if deny_import or deny_from:
        builtins.__import__ = guarded_import
        bootstrap._gcd_import = guarded_gcd
        sys.addaudithook(audit)

    # 3. Run main.py as __main__, with its own file name in tracebacks.
    main = type(sys)("__main__")
    main.__file__ = filename
    main.__builtins__ = builtins
    main.__spec__ = None
    main.__package__ = None
    main.__loader__ = None
    sys.modules["__main__"] = main
    sys.argv = [script] + args
    # As `python3 main.py` does: the program's own directory first on sys.path, so its
    # helper modules import (the guard itself ran isolated, with -I).
    sys.path.insert(0, filename.rsplit("/", 1)[0] or "/")
    try:
        exec(compile(source, filename, "exec", dont_inherit=True), main.__dict__)
    except SystemExit:
        raise
    except BaseException as e:
        # Skip the guard's own frame so the traceback starts in main.py.
        # The default hook prints e.__traceback__, not its argument, so trim it in place.
        if e.__traceback__ is not None:
            e.__traceback__ = e.__traceback__.tb_next
        sys.excepthook(type(e), e, e.__traceback__)
        sys.exit(1)


_main()
