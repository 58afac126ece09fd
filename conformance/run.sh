#!/usr/bin/env bash
# Runs the official MCP conformance suite (server mode, Streamable HTTP) against airlock and
# checks the result against the baseline of scenarios that do not apply to a tools-only
# server. Exits non-zero on any unexpected failure or stale baseline entry.
# Usage: conformance/run.sh [path/to/airlock]   (default bin/airlock)
# Env:   AIRLOCK_NPM_CACHE  where Node 22 and the suite are installed (outside the repo)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-bin/airlock}")
cache=${AIRLOCK_NPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock-npm}
out=$(mktemp -d)
server_pid=

cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$out"
}
trap cleanup EXIT

# start_server: `serve --http 127.0.0.1:0` picks a free port and logs its endpoint.
start_server() {
  "$bin" serve --http 127.0.0.1:0 2>"$out/server.log" &
  server_pid=$!
  for _ in $(seq 1 300); do
    url=$(grep -o 'endpoint=http://[^ ]*' "$out/server.log" | head -n1 | cut -d= -f2 || true)
    if [ -n "$url" ]; then return 0; fi
    if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "conformance: airlock did not start serving HTTP:" >&2
  cat "$out/server.log" >&2
  return 1
}

stop_server() {
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}

# suite NAME VERSION BASELINE [ARGS...]
suite() {
  local name=$1 version=$2 baseline=$3
  shift 3
  local dir="$cache/conformance-$version"
  scripts/npm-tools.sh "$dir" "@modelcontextprotocol/conformance@$version"
  start_server
  echo "== conformance $version $* against $url (baseline $baseline)"
  local rc=0
  PATH="$dir/node/bin:$dir/node_modules/.bin:$PATH" \
    conformance server --url "$url" --expected-failures "$baseline" -o "$out/$name" "$@" || rc=$?
  stop_server
  if [ "$rc" -ne 0 ]; then
    echo "conformance $version: FAILED (exit $rc); server log:" >&2
    tail -n 20 "$out/server.log" >&2
    return "$rc"
  fi
  echo "conformance $version: passed (every failure is in $baseline)"
}

# retry NAME ...: a second run only after a failure, said loudly. mcp-go v1.2.1 sends the
# subscriptions/listen acknowledgement on its asynchronous notification path, so with
# nothing to subscribe to, the stream sometimes closes before the ack is written
# (server-stateless:sep-2575-server-sends-subscription-ack, about 1 run in 5 here).
retry() {
  if suite "$@"; then return 0; fi
  echo "conformance: FLAKY: $1 failed once; running it again" >&2
  suite "$@"
}

failed=0
suite legacy 0.1.16 conformance/baseline.yml || failed=1
retry modern 0.2.0-alpha.12 conformance/baseline-2026-07-28.yml --requirements 2026-07-28 || failed=1
# Stateful sessions (the default): issued at initialize, 404 once terminated.
suite sessions 0.2.0-alpha.12 conformance/baseline-sessions.yml --scenario server-session-lifecycle || failed=1
exit "$failed"
