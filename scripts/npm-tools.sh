#!/usr/bin/env bash
# Installs Node 22 (from the npm registry package node-linux-<arch>) and the given npm
# packages into DIR, once: a second call with the same package list does nothing.
# The official MCP tools need Node >= 22; a distribution's node is often 20.
# Usage: scripts/npm-tools.sh DIR PKG@VERSION...
# Then:  PATH=DIR/node/bin:DIR/node_modules/.bin:$PATH
set -euo pipefail
dir=$1
shift
case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "npm-tools: no Node package for $(uname -m)" >&2; exit 1 ;;
esac
node_pkg="node-linux-$arch@22.23.5"
want="$node_pkg $*"
if [ -f "$dir/.installed" ] && [ "$(cat "$dir/.installed")" = "$want" ]; then
  exit 0
fi
command -v npm >/dev/null || { echo "npm-tools: npm is needed (apt-get install -y npm)" >&2; exit 1; }
mkdir -p "$dir"
cd "$dir"
[ -f package.json ] || echo '{"name":"airlock-npm-tools","private":true}' > package.json
echo "npm-tools: installing $want into $dir" >&2
npm install --no-audit --no-fund --loglevel=error "$node_pkg" "$@" >&2
ln -sfn "node_modules/node-linux-$arch" node
echo "$want" > .installed
