#!/usr/bin/env python3
"""Runs bin/airlock inside real containers, configured as users run them (docs/containers.md):
podman's default security, seccomp=unconfined alone, a Docker-like seccomp profile, --privileged,
a read-only root, a non-root user, unmasked /proc, gVisor (runsc do), and the Landlock tier
(AIRLOCK_ISOLATION=landlock) under podman's default and the Docker-like profile. For each: `airlock probe
--json`, then run_code over MCP stdio (every stdout line must be JSON-RPC), checked against what
the configuration must give. Then the engine's own test binary (sandbox/linux, escape tests
included) inside a default container and one with seccomp=unconfined. Prints the table configuration → outcome → active layers.

Usage: scripts/container-tests.py [--table FILE] [--skip-engine-tests] [--airlock BINARY] [--only TEXT]
Needs: root, podman, mmdebstrap (scripts/container-image.sh), go; runsc optional (Debian's).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

IMAGE = "localhost/airlock-base:bookworm"
# The Containerfile's image, built here from IMAGE (not kube play's localhost/airlock).
RUNTIME = "localhost/airlock-container-tests:latest"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AIRLOCK = os.path.join(ROOT, "bin", "airlock")
# Quirks of the CI machine, not of airlock: crun 1.8 rejects the VM's hybrid cgroup layout,
# and its root lacks CAP_SYS_RESOURCE, so podman's default ulimits cannot be set.
QUIRKS = ["--runtime", "runc", "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"]
# Bound under /usr on purpose: a file an engine mounts under /usr is one of the cases
# (locked submounts, docs/containers.md).
MOUNT = ["-v", AIRLOCK + ":/usr/local/bin/airlock:ro"]
REQUIRED = ["user-namespace", "pid-namespace", "mount-namespace", "network-namespace", "seccomp"]
# The Landlock tier's (sandbox.isolation = "landlock"): it serves where user namespaces are
# refused, degraded, with the namespaces it lacks listed as weaker layers.
LANDLOCK = {"serves": True, "required": ["landlock-fs", "landlock-net", "landlock-scope", "seccomp",
                                         "no-new-privs", "process-tree"],
            "inactive": ["pid-namespace", "mount-namespace", "network-namespace", "ipc-namespace"],
            "verdict": "degraded", "isolation": "landlock"}
CODE = "import os\nprint(6*7, os.path.isdir('/proc/self'))\n"
# What an engine bound under /usr shows inside the sandbox: nothing (a file denied, a
# directory empty). Printed after the answer, checked where a case asks.
UNDER_USR = """
import os
try:
    open('/usr/local/bin/airlock', 'rb').read(1)
    print('usr-file: readable')
except OSError as e:
    print('usr-file:', e.strerror)
print('usr-dir:', os.listdir('/usr/local/lib/airlock-test-dir') if os.path.isdir('/usr/local/lib/airlock-test-dir') else 'absent')
"""


def docker_like_profile(path):
    """Podman's profile made to refuse what Docker's default refuses a container without
    CAP_SYS_ADMIN: unshare, mount, setns and namespace flags of clone; clone3 answers ENOSYS."""
    with open("/usr/share/containers/seccomp.json") as f:
        prof = json.load(f)
    admin = ["fsmount", "fsopen", "mount", "mount_setattr", "move_mount", "open_tree", "pivot_root",
             "setns", "umount", "umount2", "unshare"]
    for rule in prof["syscalls"]:
        if rule["action"] == "SCMP_ACT_ALLOW" and not rule.get("includes") and not rule.get("args"):
            rule["names"] = [n for n in rule["names"] if n not in admin + ["clone", "clone3"]]
    ns_flags = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET, as Docker's
    prof["syscalls"] += [
        {"names": admin + ["clone", "clone3"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}},
        {"names": ["clone"], "action": "SCMP_ACT_ALLOW", "excludes": {"caps": ["CAP_SYS_ADMIN"]},
         "args": [{"index": 0, "value": ns_flags, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]},
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38, "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
    ]
    with open(path, "w") as f:
        json.dump(prof, f)


def podman(opts):
    """The command line that runs argv in a podman container with opts."""
    return lambda argv: ["podman", "run", "--rm", "-i"] + QUIRKS + MOUNT + opts + [IMAGE] + argv


def runsc(state):
    """The command line that runs argv (airlock first) under gVisor, on the host's files."""
    return lambda argv: ["runsc", "--root", state, "--network=none", "do", AIRLOCK] + argv[1:]


def mcp_run_code(cmd, code=CODE, then=None):
    """run_code over stdio; returns (structuredContent or None, problem or None, stderr).
    stdin stays open until the answer is in: EOF ends the server and cancels the call.
    With then, a second call follows the first's answer, and its answer is returned."""
    call = lambda i, c: {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                         "params": {"name": "run_code", "arguments": {"code": c}}}
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "airlock-container-tests", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        call(2, code),
    ]
    want = 2
    errf = tempfile.TemporaryFile()
    p = subprocess.Popen(cmd(["airlock", "serve"]), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errf)
    p.stdin.write("".join(json.dumps(m) + "\n" for m in msgs).encode())
    p.stdin.flush()
    result, problem = None, None
    for raw in p.stdout:
        line = raw.decode(errors="replace").rstrip("\n")
        try:
            m = json.loads(line)
        except ValueError:
            problem = "stdout line is not JSON: %r" % line[:200]
            break
        if m.get("jsonrpc") != "2.0":
            problem = "not JSON-RPC 2.0: %r" % line[:200]
            break
        if m.get("id") == 2 and then is not None:
            p.stdin.write((json.dumps(call(3, then)) + "\n").encode())
            p.stdin.flush()
            then, want = None, 3
        elif m.get("id") == want:
            result = m.get("result")
            break
    p.stdin.close()
    try:
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    errf.seek(0)
    err = errf.read().decode(errors="replace")
    if problem:
        return None, problem, err
    if result is None:
        return None, "no answer to tools/call (exit %s)" % p.returncode, err
    return result.get("structuredContent"), None, err


# One run's memfds fill the container's memory limit: pages no process's RSS counts, so
# without a cgroup of the sandbox's own the OOM killer chose the server (docs/containers.md).
MEMFD_FILL = """
import os
fds = []
try:
    while True:
        fd = os.memfd_create("fill"); fds.append(fd)
        try:
            while True:
                os.write(fd, b"\\1" * (1 << 20))
        except OSError as e:
            if e.errno != 27:  # EFBIG: RLIMIT_FSIZE, the next memfd
                raise
except OSError as e:
    print("held", len(fds), "memfds:", e)
"""


def oom_attack(cmd):
    """Two calls on one server: MEMFD_FILL, then CODE. Returns a problem or None: the
    second must be answered by the same, living server."""
    first, problem, err = mcp_run_code(cmd, MEMFD_FILL, then=CODE)
    if problem:
        return "after the memfd fill: %s; the server's log: %s" % (problem, err[-400:])
    if first is None or not first.get("stdout", "").startswith("42 "):
        return "after the memfd fill, run_code answered %r" % first
    return None


def runtime_image(work):
    """The Containerfile's image, FROM the base image, with bin/airlock in it."""
    ctx = os.path.join(work, "ctx")
    os.makedirs(os.path.join(ctx, "bin"))
    shutil.copy(AIRLOCK, os.path.join(ctx, "bin", "airlock"))
    subprocess.run(["podman", "build", "--quiet", "-f", os.path.join(ROOT, "Containerfile"),
                    "--build-arg", "BASE=" + IMAGE, "-t", RUNTIME, ctx], check=True, stdout=subprocess.DEVNULL)


def probe(cmd):
    p = subprocess.run(cmd(["airlock", "probe", "--json"]), capture_output=True, timeout=180)
    try:
        return json.loads(p.stdout), p.stderr.decode(errors="replace")
    except ValueError:
        return None, p.stderr.decode(errors="replace") + p.stdout.decode(errors="replace")


def check_case(name, cmd, want):
    """Returns (ok, outcome, active, inactive, problems)."""
    problems = []
    rep, err = probe(cmd)
    if rep is None:
        return False, "probe printed no JSON: " + err[-300:], [], [], ["no probe report"]
    active = [l["name"] for l in rep["layers"] if l["active"]]
    inactive = [l["name"] for l in rep["layers"] if not l["active"]]
    res, problem, serve_err = mcp_run_code(cmd, CODE + UNDER_USR if want.get("stdout") else CODE)
    served = not problem and res is not None and res.get("status") == "ok"
    refusal = (rep.get("fixes") or [serve_err.strip()[-200:]])[0][:160]
    if want["serves"] and not served:
        problems.append("run_code: %s %s %s" % (problem, res and res.get("status"), serve_err[-400:]))
        return False, "refuses: " + refusal, active, inactive, problems
    if want["serves"]:
        if not res.get("stdout", "").startswith("42 "):
            problems.append("run_code printed %r" % res.get("stdout"))
        for w in want.get("stdout", []):
            if w not in res.get("stdout", ""):
                problems.append("run_code printed %r, want %r in it" % (res.get("stdout"), w))
        for l in want.get("required", REQUIRED) + want.get("active", []):
            if l not in active:
                problems.append("layer %s not active" % l)
        for l in want.get("inactive", []):
            if l not in inactive:
                problems.append("layer %s active, want it reported missing" % l)
        if rep["verdict"] == "unsafe":
            problems.append("probe verdict unsafe: %s" % rep["fixes"])
        if want.get("verdict") and rep["verdict"] != want["verdict"]:
            problems.append("probe verdict %s, want %s" % (rep["verdict"], want["verdict"]))
        if want.get("isolation"):
            if rep.get("isolation") != want["isolation"]:
                problems.append("probe states isolation %r, want %r" % (rep.get("isolation"), want["isolation"]))
            if res.get("isolation") != want["isolation"]:
                problems.append("run_code states isolation %r, want %r" % (res.get("isolation"), want["isolation"]))
            bad = [p["name"] for p in rep["probes"] if p["status"] in ("failed", "error")]
            if bad:
                problems.append("probes failed or errored: %s" % bad)
        for w in want.get("log", []):
            if w not in serve_err:
                problems.append("the server's log lacks %r" % w)
        if want.get("attack"):
            problem = want["attack"](cmd)
            if problem:
                problems.append(problem)
        first = res.get("stdout", "").split("\n")[0]
        proc = "with /proc" if first.endswith("True") else "no /proc"
        outcome = "serves (%s, %s)" % (rep["verdict"], proc)
    else:
        text = " ".join(rep.get("fixes", [])) + " " + serve_err
        if served:
            problems.append("run_code ran where it must refuse")
        for w in want["refusal"]:
            if w not in text:
                problems.append("the refusal lacks %r: %s" % (w, text[-600:]))
        outcome = "refuses: " + refusal
    return not problems, outcome, active, inactive, problems


def engine_tests(configs):
    """The sandbox/linux test binary (escape tests included) in containers of each config:
    (name, podman options, -test.run or None for all)."""
    ok = True
    with tempfile.TemporaryDirectory() as d:
        binary = os.path.join(d, "sandbox-linux.test")
        subprocess.run(["go", "test", "-c", "-o", binary, "./sandbox/linux/"], cwd=ROOT, check=True)
        for name, opts, run in configs:
            argv = ["sandbox-linux.test", "-test.count=1", "-test.timeout=10m", "-test.v"]
            if run:
                argv += ["-test.run=" + run, "-test.short"]
            p = subprocess.run(["podman", "run", "--rm"] + QUIRKS + opts + ["-e", "AIRLOCK_REQUIRE_SANDBOX=1",
                               "-v", binary + ":/usr/local/bin/sandbox-linux.test:ro", IMAGE] + argv,
                               capture_output=True, timeout=900)
            out = p.stdout.decode(errors="replace")
            if "guarantee → " in out:
                print(out[out.index("guarantee → "):].rstrip())
            skips = sorted({l.split()[2] for l in out.splitlines() if l.startswith("--- SKIP")})
            fails = [l for l in out.splitlines() if l.startswith("--- FAIL")]
            print("%s engine tests in a container, %s: exit %d, skipped %s" % (
                "PASS" if p.returncode == 0 else "FAIL", name, p.returncode, skips))
            if p.returncode != 0:
                # What each failing test said (the lines before its "--- FAIL"), then the end.
                lines = out.splitlines()
                said = [l for i, l in enumerate(lines) if "_test.go:" in l and
                        any(x.lstrip().startswith("--- FAIL") for x in lines[max(0, i - 40):i + 40])]
                print("\n".join(fails) + "\n" + "\n".join(said[-60:])[-6000:] + "\n" +
                      out[-2000:] + p.stderr.decode(errors="replace")[-2000:])
                # Timing-bound tests (fork bombs, tree kills) share two cores with the whole
                # suite here: the failed ones run once more, alone, in the same container
                # configuration. The first failure stays printed above; a test that fails
                # again fails the step.
                top = sorted({l.split()[2] for l in fails if l.startswith("--- FAIL: ")})
                if not top:
                    ok = False
                    continue
                again = [a for a in argv if not a.startswith("-test.run=")] + ["-test.run=^(%s)$" % "|".join(top)]
                r = subprocess.run(["podman", "run", "--rm"] + QUIRKS + opts + ["-e", "AIRLOCK_REQUIRE_SANDBOX=1",
                                   "-v", binary + ":/usr/local/bin/sandbox-linux.test:ro", IMAGE] + again,
                                   capture_output=True, timeout=900)
                rout = r.stdout.decode(errors="replace")
                if r.returncode == 0:
                    print("RERUN PASSED, FLAKY UNDER LOAD (failed in the full run above): %s, %s" % (name, " ".join(top)))
                else:
                    ok = False
                    print("RERUN FAILED AGAIN: %s, %s\n%s" % (name, " ".join(top), rout[-6000:]))
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--table", help="also write the table (markdown) to this file")
    ap.add_argument("--skip-engine-tests", action="store_true")
    ap.add_argument("--only", help="run only the configurations whose name holds this text")
    ap.add_argument("--airlock", help="the binary to test (default bin/airlock), e.g. an older build for a before/after")
    args = ap.parse_args()
    global AIRLOCK, MOUNT
    if args.airlock:
        AIRLOCK = os.path.abspath(args.airlock)
        MOUNT = ["-v", AIRLOCK + ":/usr/local/bin/airlock:ro"]
    if not os.access(AIRLOCK, os.X_OK):
        sys.exit("container-tests: build bin/airlock first (make build)")
    subprocess.run([os.path.join(ROOT, "scripts", "container-image.sh"), IMAGE], check=True)
    work = tempfile.mkdtemp(prefix="airlock-ct-")
    docker = os.path.join(work, "docker-like.json")
    docker_like_profile(docker)

    pod = podman
    secret_dir = os.path.join(work, "secret-dir")
    os.mkdir(secret_dir)
    with open(os.path.join(secret_dir, "secret"), "w") as f:
        f.write("airlock-test-secret\n")
    os.chmod(work, 0o755)
    cases = [
        ("podman, default security; a file and a directory bound under /usr",
         pod(["-v", secret_dir + ":/usr/local/lib/airlock-test-dir:ro"]),
         {"serves": True, "inactive": ["proc"],
          "stdout": ["usr-file: Permission denied", "usr-dir: []"]}),
        ("podman --security-opt seccomp=unconfined", pod(["--security-opt", "seccomp=unconfined"]),
         {"serves": True, "inactive": ["proc"]}),
        ("podman --security-opt unmask=ALL", pod(["--security-opt", "unmask=ALL"]),
         {"serves": True, "active": ["proc"]}),
        ("Docker-like seccomp profile (clone3 ENOSYS, namespaces need CAP_SYS_ADMIN)",
         pod(["--security-opt", "seccomp=" + docker]),
         {"serves": False, "refusal": ["user namespaces", "seccomp=unconfined", "kubernetes", "podman", 'sandbox.isolation = "landlock"']}),
        ("Docker-like seccomp profile, AIRLOCK_ISOLATION=landlock",
         pod(["--security-opt", "seccomp=" + docker, "-e", "AIRLOCK_ISOLATION=landlock"]), LANDLOCK),
        ("podman, default security, AIRLOCK_ISOLATION=landlock", pod(["-e", "AIRLOCK_ISOLATION=landlock"]), LANDLOCK),
        ("podman --privileged", pod(["--privileged"]),
         {"serves": True, "active": ["cgroups", "proc"]}),
        ("podman --read-only", pod(["--read-only"]),
         {"serves": True, "log": ["audit records go to a fallback file"]}),
        ("podman --user 65534:65534", pod(["--user", "65534:65534"]),
         {"serves": True}),
        # What a hardened Kubernetes securityContext amounts to: no capabilities,
        # allowPrivilegeEscalation: false (no_new_privs), a read-only root, non-root.
        ("podman --cap-drop ALL --security-opt no-new-privileges --read-only --user 65534:65534",
         pod(["--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--read-only", "--user", "65534:65534"]),
         {"serves": True}),
        # The Containerfile's image as the Deployment runs it: its own user (10001), no
        # capabilities, no_new_privs. Seen refusing before the image's user lost its
        # subordinate ids: newuidmap cannot map them there.
        ("runtime image (Containerfile), its user, --cap-drop ALL --security-opt no-new-privileges",
         lambda argv: ["podman", "run", "--rm", "-i"] + QUIRKS + ["--cap-drop", "ALL", "--security-opt", "no-new-privileges",
                                                                  RUNTIME] + argv[1:],
         {"serves": True, "inactive": ["host-uids", "proc", "cgroups"]}),
        # A pod's memory limit and no cgroup of the sandbox's own: one run fills it with
        # memfds, and the server must be the one that answers the next call. Seen failing
        # before sandbox processes got oom_score_adj 1000: the kernel killed the server.
        ("podman --memory 768m, a run filling it with memfds", pod(["--memory", "768m", "--memory-swap", "768m"]),
         {"serves": True, "inactive": ["cgroups"], "attack": oom_attack}),
    ]
    runtime_image(work)
    if shutil.which("runsc"):
        cases.append(("gVisor (runsc do, Debian's runsc)",
                      runsc(os.path.join(work, "runsc")),
                      {"serves": False, "refusal": ["gVisor", "clone3", "F_OFD_SETLK"]}))
    else:
        print("container-tests: runsc not installed; the gVisor case is not run")

    if args.only:
        cases = [c for c in cases if args.only in c[0]]
    rows, failed = [], []
    for name, cmd, want in cases:
        ok, outcome, active, inactive, problems = check_case(name, cmd, want)
        print("%s %s: %s" % ("PASS" if ok else "FAIL", name, outcome))
        for p in problems:
            print("    " + p)
        if not ok:
            failed.append(name)
        rows.append("| %s | %s | %s | %s |" % (name, outcome, ", ".join(active) or "none",
                                               ", ".join(inactive) or "none"))
    # The Landlock tier's run is TestLandlockTier: the escape suite in that tier, in a child.
    if not args.skip_engine_tests and not engine_tests([
            ("podman default security", [], None),
            ("seccomp=unconfined", ["--security-opt", "seccomp=unconfined"], None),
            ("the Landlock tier, podman default security", [], "^TestLandlockTier$"),
            ("the Landlock tier, Docker-like seccomp profile", ["--security-opt", "seccomp=" + docker], "^TestLandlockTier$")]):
        failed.append("engine tests in containers")
    table = "\n".join(["| configuration | outcome | active layers | missing layers |",
                       "|---|---|---|---|"] + rows)
    print("\n" + table)
    if args.table:
        with open(args.table, "w") as f:
            f.write(table + "\n")
    shutil.rmtree(work, ignore_errors=True)
    if failed:
        sys.exit("container-tests: failed: " + "; ".join(failed))
    print("container-tests: all %d configurations as expected" % len(cases))


if __name__ == "__main__":
    main()
