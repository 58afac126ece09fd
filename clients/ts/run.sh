#!/usr/bin/env bash
# Runs clients/ts/clients.test.mjs: the official MCP TypeScript SDK against bin/airlock
# over stdio, Streamable HTTP and SSE. Installs Node 22 and the SDK once into the npm
# cache (outside the clone), the way scripts/npm-tools.sh installs the other MCP tools.
# Usage: clients/ts/run.sh [path/to/airlock]   (default bin/airlock)
set -euo pipefail
cd "$(dirname "$0")/../.."
sdk=@modelcontextprotocol/sdk@1.32.2
cache=${AIRLOCK_NPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock-npm}
dir="$cache/mcp-sdk-1.32.2"
scripts/npm-tools.sh "$dir" "$sdk"
export AIRLOCK_BIN
AIRLOCK_BIN=$(realpath "${1:-bin/airlock}")
export AIRLOCK_TS_SDK="$dir"
# One file, its transports in sequence: the host is shared and every call is a sandbox.
PATH="$dir/node/bin:$PATH" node --test --test-concurrency=1 --test-reporter=spec clients/ts/clients.test.mjs
