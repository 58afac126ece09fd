#!/usr/bin/env bash
# The macOS CI job's end-to-end checks: real programs through `airlock run` under the real
# Seatbelt profile, for one python and one node. Each check must end with status ok and
# print its marker; each escape attempt prints ESCAPED only if it worked.
# Usage: scripts/mac-checks.sh AIRLOCK PYTHON NODE
set -euo pipefail
airlock=$1 python=$2 node=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

# A file next to the workspaces (they live in $TMPDIR too), also the one to hard-link
# from, and a canary in ~/.ssh, so a failed read means a denial, not a missing file.
sibling=$(mktemp -d "${TMPDIR:-/tmp}/airlock-sibling.XXXXXX")
echo sibling-secret >"$sibling/secret"
mkdir -p "$HOME/.ssh"
canary="$HOME/.ssh/airlock-canary-$$"
echo ssh-secret >"$canary"
trap 'rm -rf "$work" "$sibling" "$canary"' EXIT

config() { # config NETWORK
  cat >"$work/airlock.toml" <<EOF
network = "$1"
[languages]
enabled = ["python", "javascript"]
interpreters = { python = "$python", javascript = "$node" }
[limits.default]
wall = "60s"
EOF
}

# check NAME LANGUAGE MARKER CODE: the run must succeed and print MARKER.
check() {
  local name=$1 lang=$2 marker=$3 code=$4 out
  if out=$(printf '%s' "$code" | "$airlock" run --config "$work/airlock.toml" --language "$lang" - 2>"$work/stderr") &&
    grep -q -- "$marker" <<<"$out"; then
    echo "ok    $name"
  else
    echo "FAIL  $name"; echo "$out"; tail -5 "$work/stderr"; failed=$((failed + 1))
  fi
}

# escape NAME CODE: the python program prints ESCAPED if the attempt worked.
escape() {
  local name=$1 code=$2 out
  out=$(printf '%s' "$code" | "$airlock" run --config "$work/airlock.toml" --language python - 2>"$work/stderr" || true)
  if grep -q ESCAPED <<<"$out" || ! grep -q blocked <<<"$out"; then
    echo "FAIL  escape: $name"; echo "$out"; failed=$((failed + 1))
  else
    echo "ok    escape: $name"
  fi
}

config none
check "python print" python 'hello-42' 'print("hello-" + str(6*7))'
check "python stdlib" python 'imports-ok' 'import ssl, sqlite3, decimal, lzma, ctypes; print("imports-ok")'
check "python getcwd/realpath" python 'cwd-ok' 'import os; assert os.path.realpath(os.getcwd()) == os.path.realpath("."); print("cwd-ok")'
check "python multiprocessing" python 'mp-ok' '
import multiprocessing as mp
from multiprocessing import shared_memory
def sq(x): return x * x
if __name__ == "__main__":
    with mp.Pool(2) as p: assert p.map(sq, range(4)) == [0, 1, 4, 9]
    with mp.Manager() as m: d = m.dict(); d["a"] = 1; assert d["a"] == 1
    s = shared_memory.SharedMemory(create=True, size=64); s.buf[0] = 7; s.close(); s.unlink()
    print("mp-ok")'
check "python asyncio to_thread" python 'async-ok' 'import asyncio
async def main(): return await asyncio.to_thread(sum, [1, 2])
assert asyncio.run(main()) == 3; print("async-ok")'
check "python rlimits" python 'nproc=' 'import resource as r
for n in ("AS", "DATA", "NPROC"): print(n.lower() + "=" + str(r.getrlimit(getattr(r, "RLIMIT_" + n))))'
check "node print" javascript 'hello-42' 'console.log("hello-" + 6*7)'
check "node os.cpus" javascript 'cpus-ok' 'if (require("os").cpus().length < 1) throw new Error("no cpus"); console.log("cpus-ok")'
check "node Intl time zone" javascript 'tz-ok' 'new Intl.DateTimeFormat("en", {timeZone: "Asia/Tokyo"}).format(0); console.log("tz-ok", Intl.DateTimeFormat().resolvedOptions().timeZone)'
check "node Worker" javascript 'worker-ok' 'const {Worker} = require("worker_threads");
new Worker("require(\"worker_threads\").parentPort.postMessage(42)", {eval: true}).on("message", m => { if (m === 42) console.log("worker-ok") })'

escape "~/.ssh" "
try: open('$canary').read(); print('ESCAPED')
except OSError as e: print('blocked', e)"
escape "/opt/homebrew/var" "import os
p = '/opt/homebrew/var'
if not os.path.exists('/opt/homebrew'): print('blocked: no homebrew')
else:
    try: os.listdir(p); print('ESCAPED')
    except OSError as e: print('blocked', e)"
escape "a sibling of the workspace" "
try: open('$sibling/secret').read(); print('ESCAPED')
except OSError as e: print('blocked', e)"
escape "os.link from outside" "import os
try: os.link('$sibling/secret', 'linked'); print('ESCAPED', open('linked').read())
except OSError as e: print('blocked', e)"
escape "kern.proc.pid loop" "import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
seen = 0
for pid in range(1, 3000):
    mib = (ctypes.c_int * 4)(1, 14, 1, pid)  # CTL_KERN, KERN_PROC, KERN_PROC_PID
    size = ctypes.c_size_t(0)
    if libc.sysctl(mib, 4, None, ctypes.byref(size), None, 0) == 0 and size.value > 0 and pid != os.getpid():
        seen += 1
print('ESCAPED %d processes listed' % seen if seen else 'blocked: none listed')"
escape "exec /bin/ls" "import subprocess
try: subprocess.run(['/bin/ls']); print('ESCAPED')
except OSError as e: print('blocked', e)"

config host
check "python HTTPS" python 'https-ok' 'import urllib.request; urllib.request.urlopen("https://example.com", timeout=20).read(); print("https-ok")'
check "python getaddrinfo" python 'gai-ok' 'import socket; assert socket.getaddrinfo("example.com", 443); print("gai-ok")'
check "python 127.0.0.1 listener" python 'listen-ok' 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); print("listen-ok", s.getsockname())'
check "node fetch" javascript 'fetch-ok' 'fetch("https://example.com").then(r => { if (r.ok) console.log("fetch-ok") })'
check "node dns.resolve4" javascript 'dns-ok' 'require("dns").resolve4("example.com", (e, a) => { if (e) throw e; console.log("dns-ok", a) })'
escape "loopback with network on" "import socket
s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()
c = socket.socket(); c.settimeout(3)
try: c.connect(s.getsockname()); print('ESCAPED')
except OSError as e: print('blocked', e)"

echo "mac-checks ($python, $node): $failed failed"
[ "$failed" -eq 0 ]
