# shellcheck shell=bash
# shellcheck disable=SC2034  # the names are used by the files that source it
# What every part of scripts/cluster.sh shares: where the cluster lives, its
# names and addresses, and small helpers. Sourced, never run.
#
# One cluster per machine: its state is machine-wide (the kubelet's cgroups,
# the bridge, the iptables chains of kube-proxy are too), so the folders are
# fixed ones outside the checkout; the binaries and images it runs come from
# the checkout that started it (recorded in $CLUSTER_RUN/checkout).

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=scripts/cluster/versions.sh
. "$here/scripts/cluster/versions.sh"

# Kept across `down` (a cache): containerd's content store with the imported
# images, the certificates. Everything else lives under CLUSTER_RUN and goes
# with `down`.
CLUSTER_STATE=${CODEPOD_CLUSTER_STATE:-/var/lib/codepod-cluster}
CLUSTER_RUN=${CODEPOD_CLUSTER_RUN:-/run/codepod-cluster}
CLUSTER_BIN="$here/.deps/kube/v$KUBE_VERSION/bin"
CLUSTER_IMAGES="$here/.deps/cluster-images"
PKI="$CLUSTER_STATE/pki"
LOGS="$CLUSTER_RUN/log"

NODE_NAME=codepod-node
# The pods' bridge and the node's address on it. The kubelet refuses a
# loopback node IP, so the node is the bridge's gateway; the API server is
# reached there by pods (through the `kubernetes` Service) and on 127.0.0.1
# by everything on the host. Ranges chosen away from the usual defaults
# (podman's 10.88/16, kind's 10.244/16 and 10.96/12).
BRIDGE=cpk0
POD_CIDR=10.87.0.0/16
NODE_IP=10.87.0.1
SERVICE_CIDR=10.86.0.0/24
SERVICE_IP=10.86.0.1
APISERVER_PORT=6443
ETCD_CLIENT=127.0.0.1:23790
ETCD_PEER=127.0.0.1:23800
KUBELET_PORT=10250
CONTAINERD_SOCK="$CLUSTER_RUN/containerd.sock"
ADMIN_KUBECONFIG="$CLUSTER_STATE/admin.kubeconfig"
KUBECTL="$here/.deps/kubectl/v1.35/kubectl"
# The host's kernel settings the node changes (`down` puts them back).
CLUSTER_SYSCTLS="vm/overcommit_memory kernel/panic kernel/panic_on_oops net/bridge/bridge-nf-call-iptables net/ipv4/ip_forward"
# The processes, in the order `up` starts them (`down` stops them in reverse).
DAEMONS=(containerd etcd kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet)

say() { echo "cluster: $*" >&2; }
die() { echo "cluster: $*" >&2; exit 1; }

pid_of() { cat "$CLUSTER_RUN/$1.pid" 2>/dev/null || true; }
running() {
	local pid
	pid=$(pid_of "$1")
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# start NAME ARGS...: runs ARGS in a session of its own, output to the log.
start() {
	local name=$1
	shift
	mkdir -p "$LOGS"
	setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
	echo $! >"$CLUSTER_RUN/$name.pid"
}

# wait_for WHAT SECONDS COMMAND...: until COMMAND succeeds; the deadline is
# generous, since two CPUs start the API server slowly.
wait_for() {
	local what=$1 secs=$2 deadline
	shift 2
	deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS > deadline)); then
			say "$what not ready after $secs s; the last lines of its log:"
			tail -n 30 "$LOGS/${what%% *}.log" >&2 2>/dev/null || true
			return 1
		fi
		sleep 0.5
	done
}

kc() { "$KUBECTL" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }
crictl() { "$CLUSTER_BIN/crictl" --runtime-endpoint "unix://$CONTAINERD_SOCK" --timeout 20s "$@"; }
