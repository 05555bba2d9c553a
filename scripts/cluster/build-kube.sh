#!/usr/bin/env bash
# Builds the test cluster's Kubernetes components, etcd and crictl from the Go
# module proxy into .deps/kube/v$KUBE_VERSION/bin, once: a second run with the
# binaries present does nothing. Each is built in a throw-away module of its
# own (under .deps/kube/v$KUBE_VERSION/mod-*) so that the dependency graphs of
# Kubernetes, etcd and cri-tools do not meet. The Go caches are the machine's
# (go env GOCACHE, GOMODCACHE): a fresh checkout on a machine that built them
# once only links.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/cluster/versions.sh
. "$here/scripts/cluster/versions.sh"
export PATH="/usr/local/go/bin:$PATH" GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local
out="$here/.deps/kube/v$KUBE_VERSION"
bin="$out/bin"
cmds=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet)

# built STAMP PROGRAM...: each PROGRAM is there, from the build STAMP names.
built() {
	local stamp=$1 c
	shift
	[ -f "$bin/.$stamp" ] || return 1
	for c in "$@"; do
		[ -x "$bin/$c" ] || return 1
	done
}
kube_built() { built "kube-v$KUBE_VERSION" "${cmds[@]}"; }
etcd_built() { built "etcd-v$ETCD_VERSION" etcd; }
crictl_built() { built "crictl-v$CRICTL_VERSION" crictl; }
if kube_built && etcd_built && crictl_built; then
	exit 0
fi
command -v go >/dev/null || { echo "cluster build: no Go (expected at /usr/local/go)" >&2; exit 1; }
mkdir -p "$bin"
start=$SECONDS

# Kubernetes: its go.mod requires each staging module at v0.0.0 (a version the
# proxy does not have) and replaces it with ./staging/...; replace lines of a
# dependency are ignored, so this module replaces each with its release tag.
if ! kube_built; then
	minor=${KUBE_VERSION#*.}
	minor=${minor%%.*}
	kmod="$out/mod-kubernetes"
	mkdir -p "$kmod"
	cd "$kmod"
	printf 'module codepod.test/kubebuild\n\ngo 1.25\n' >go.mod
	kgomod=$(go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION" |
		sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
	[ -f "$kgomod" ] || { echo "cluster build: no go.mod for k8s.io/kubernetes@v$KUBE_VERSION" >&2; exit 1; }
	{
		printf 'module codepod.test/kubebuild\n\n'
		sed -n 's/^go \(.*\)$/go \1/p' "$kgomod" | head -1
		# Kubernetes' godebug settings apply only to a main module: keep them.
		sed -n '/^godebug/,/^)/p' "$kgomod"
		printf '\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "$KUBE_VERSION"
		awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" { print $1 }' "$kgomod" | sort -u |
			while read -r m; do printf '\t%s => %s v0.%s\n' "$m" "$m" "${KUBE_VERSION#*.}"; done
		printf ')\n'
	} >go.mod
	tools=() pkgs=()
	for c in "${cmds[@]}"; do
		tools+=("k8s.io/kubernetes/cmd/$c@v$KUBE_VERSION")
		pkgs+=("k8s.io/kubernetes/cmd/$c")
	done
	go get -tool "${tools[@]}"
	go build -trimpath -o "$bin/" -ldflags "-s -w \
		-X k8s.io/component-base/version.gitVersion=v$KUBE_VERSION \
		-X k8s.io/component-base/version.gitMajor=1 \
		-X k8s.io/component-base/version.gitMinor=$minor \
		-X k8s.io/component-base/version.gitTreeState=clean" "${pkgs[@]}"
	touch "$bin/.kube-v$KUBE_VERSION"
fi

# build_tool DIR PACKAGE@VERSION OUTPUT [LDFLAGS]: one program in a module of its own.
build_tool() {
	local dir=$1 pkg=$2 output=$3 ldflags=${4:-}
	mkdir -p "$dir"
	(
		cd "$dir"
		printf 'module codepod.test/%s\n\ngo 1.25\n' "$(basename "$dir")" >go.mod
		go get -tool "$pkg"
		go build -trimpath -o "$bin/$output" -ldflags "-s -w $ldflags" "${pkg%@*}"
	)
}
if ! etcd_built; then
	build_tool "$out/mod-etcd" "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" etcd
	touch "$bin/.etcd-v$ETCD_VERSION"
fi
# crictl: `down` removes pods through the CRI (their shims outlive containerd).
if ! crictl_built; then
	build_tool "$out/mod-crictl" "sigs.k8s.io/cri-tools/cmd/crictl@v$CRICTL_VERSION" crictl \
		"-X sigs.k8s.io/cri-tools/pkg/version.Version=v$CRICTL_VERSION"
	touch "$bin/.crictl-v$CRICTL_VERSION"
fi
echo "cluster build: Kubernetes v$KUBE_VERSION, etcd v$ETCD_VERSION, crictl v$CRICTL_VERSION in $((SECONDS - start)) s"
