#!/usr/bin/env bash
# A real single-node Kubernetes for codepod's tests, built from the Go module
# proxy and run as root with no systemd: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kube-proxy, a kubelet, Debian's
# containerd + runc and CNI plugins; codepod's images assembled and imported
# (no registry). docs/kubernetes.md ("A real cluster in the tests").
#
#   scripts/cluster.sh up        build what is missing, start; idempotent
#   scripts/cluster.sh down      stop, and remove what it made on the host
#                                (--purge: the image store and certificates too)
#   scripts/cluster.sh env       export lines: KUBECONFIG (cluster-admin), PATH
#   scripts/cluster.sh status    exit 0 only while the node is Ready
#   scripts/cluster.sh leftovers what of a cluster is left on the host (none: exit 0)
set -euo pipefail
# shellcheck source=scripts/cluster/common.sh
. "$(dirname "$0")/cluster/common.sh"
# shellcheck source=scripts/cluster/tear-down.sh
. "$here/scripts/cluster/tear-down.sh"

case ${1:-} in
up)
	# shellcheck source=scripts/cluster/bring-up.sh
	. "$here/scripts/cluster/bring-up.sh"
	cluster_up
	;;
down)
	cluster_down "$([ "${2:-}" = --purge ] && echo purge)"
	;;
env)
	[ -f "$ADMIN_KUBECONFIG" ] || die "no cluster: scripts/cluster.sh up"
	printf 'export KUBECONFIG=%q\n' "$ADMIN_KUBECONFIG"
	# shellcheck disable=SC2016  # $PATH is for the shell that reads it
	printf 'export PATH=%q:"$PATH"\n' "$(dirname "$KUBECTL")"
	;;
status)
	running kube-apiserver && running kubelet || exit 1
	[ "$(kc get node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
	;;
leftovers)
	cluster_leftovers
	;;
*)
	sed -n '8,14p' "$0" >&2
	exit 2
	;;
esac
