# The one pin of the test cluster (scripts/cluster.sh). Every k8s.io/*
# module is taken at the release of KUBE_VERSION (staging modules are
# tagged v0.MINOR.PATCH for v1.MINOR.PATCH); etcd is built from its own
# server module; the runtime (containerd, runc, CNI plugins) is Debian's.
# docs/kubernetes.md ("A real cluster in the tests") says why these.
# shellcheck shell=bash
# shellcheck disable=SC2034  # read by the files that source it
# CODEPOD_KUBE_VERSION tries another release (1.35 to 1.37 run on these
# machines: docs/kubernetes.md §10.1) without changing the pin.
KUBE_VERSION=${CODEPOD_KUBE_VERSION:-1.35.4}
ETCD_VERSION=3.6.16
# Debian's packages the cluster runs on (bookworm: containerd 1.6.20,
# runc 1.1.5, CNI plugins 1.1.1).
CLUSTER_DEB_PKGS=(containerd runc containernetworking-plugins iptables iproute2 conntrack)
# cri-tools' crictl, for `down` (the release nearest KUBE_VERSION that the
# module proxy serves; any CRI v1 client will do).
CRICTL_VERSION=1.34.0
