# shellcheck shell=bash source-path=SCRIPTDIR/../..
# `scripts/cluster.sh up`: builds what is missing, then starts the cluster
# from nothing (sourced by scripts/cluster.sh after lib.sh and down.sh; a
# cluster already up and healthy is left as it is). docs/kubernetes.md ("A
# real cluster in the tests") says why each flag.

# shellcheck source=scripts/cluster/pki.sh
. "${here:?}/scripts/cluster/pki.sh"

# The hierarchies the kubelet's cgroupfs driver needs, or a clear no.
host_check() {
	[ "$(id -u)" = 0 ] || die "up needs root (containerd, the kubelet, mounts, iptables)"
	local c missing=()
	for c in cpu cpuacct memory pids cpuset devices freezer; do
		[ -d "/sys/fs/cgroup/$c" ] || missing+=("$c")
	done
	if ((${#missing[@]})); then
		if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
			die "this host has cgroup v2 only; the cluster is set up for this project's cgroup v1 machines (docs/kubernetes.md)"
		fi
		die "this host lacks the cgroup v1 hierarchies ${missing[*]} under /sys/fs/cgroup: it cannot run the kubelet here"
	fi
	for c in containerd runc iptables ip conntrack; do
		command -v "$c" >/dev/null || die "$c is missing: scripts/deps.sh installs it"
	done
	[ -x /usr/lib/cni/bridge ] || die "the CNI plugins are missing (Debian's containernetworking-plugins)"
	[ -x "$KUBECTL" ] || die "$KUBECTL is missing: run scripts/deps.sh"
}

write_configs() {
	mkdir -p "$CLUSTER_RUN/cni" "$CLUSTER_STATE/containerd" "$CLUSTER_RUN/kubelet"
	cat >"$CLUSTER_RUN/containerd.toml" <<TOML
version = 2
root = "$CLUSTER_STATE/containerd"
state = "$CLUSTER_RUN/containerd"
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$CLUSTER_PAUSE_IMAGE"
  # Root on these machines lacks CAP_SYS_RESOURCE: without this, runc fails
  # to set a sandbox's oom_score_adj below containerd's own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$CLUSTER_RUN/cni"
TOML
	# Pods reach each other and the node on the bridge, and the Services
	# through the node; nothing else: no default route, so no packet of a
	# pod can leave the machine.
	cat >"$CLUSTER_RUN/cni/10-codepod.conflist" <<JSON
{"cniVersion": "1.0.0", "name": "codepod-cluster", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false,
   "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$CLUSTER_RUN/cni-ipam",
            "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_IP"}]],
            "routes": [{"dst": "$SERVICE_CIDR"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
JSON
	# No DNS server: pods resolve nothing (codepod's pods need no names).
	: >"$CLUSTER_RUN/resolv.conf"
	cat >"$CLUSTER_RUN/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# These machines have cgroup v1 and no systemd; from 1.35 the kubelet refuses
# cgroup v1 unless told (a config-file setting only).
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
failSwapOn: false
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
resolvConf: $CLUSTER_RUN/resolv.conf
# The imported images are the only copies (no registry): never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# Some machines here have little free disk; evict on memory, not on disk.
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
serializeImagePulls: false
maxPods: 110
YAML
}

start_containerd() {
	if ! running containerd; then
		start containerd containerd --config "$CLUSTER_RUN/containerd.toml"
		wait_for "containerd" 60 ctr --address "$CONTAINERD_SOCK" version
	fi
	# The images of this build, unless the store has them (their tags are
	# content digests: a rebuilt image is a new name).
	local have img tar
	have=$(ctr --address "$CONTAINERD_SOCK" -n k8s.io images ls -q)
	for img in "$CLUSTER_SANDBOX_IMAGE" "$CLUSTER_CONTROLLER_IMAGE" "$CLUSTER_PAUSE_IMAGE"; do
		grep -qxF "$img" <<<"$have" && continue
		for tar in $CLUSTER_IMAGE_TARS; do
			ctr --address "$CONTAINERD_SOCK" -n k8s.io images import --no-unpack "$tar" >/dev/null
		done
		break
	done
}

start_control_plane() {
	mkdir -p "$CLUSTER_RUN/etcd"
	running etcd || start etcd "$CLUSTER_BIN/etcd" --name codepod --data-dir "$CLUSTER_RUN/etcd" \
		--listen-client-urls "http://$ETCD_CLIENT" --advertise-client-urls "http://$ETCD_CLIENT" \
		--listen-peer-urls "http://$ETCD_PEER" --initial-advertise-peer-urls "http://$ETCD_PEER" \
		--initial-cluster "codepod=http://$ETCD_PEER" --listen-metrics-urls "" \
		--unsafe-no-fsync --log-level warn
	wait_for "etcd" 60 curl -fsS "http://$ETCD_CLIENT/readyz"
	running kube-apiserver || start kube-apiserver "$CLUSTER_BIN/kube-apiserver" \
		--etcd-servers "http://$ETCD_CLIENT" \
		--bind-address 0.0.0.0 --secure-port "$APISERVER_PORT" --advertise-address "$NODE_IP" \
		--tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
		--client-ca-file "$PKI/ca.crt" \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$PKI/sa.pub" \
		--service-account-signing-key-file "$PKI/sa.key" \
		--service-cluster-ip-range "$SERVICE_CIDR" \
		--authorization-mode Node,RBAC \
		--enable-admission-plugins NodeRestriction \
		--kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
		--kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
		--kubelet-preferred-address-types InternalIP \
		--allow-privileged=false --profiling=false
	wait_for "kube-apiserver" 180 curl -fsS --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" \
		--key "$PKI/admin.key" "https://127.0.0.1:$APISERVER_PORT/readyz"
	running kube-controller-manager || start kube-controller-manager \
		"$CLUSTER_BIN/kube-controller-manager" \
		--kubeconfig "$PKI/controller-manager.kubeconfig" \
		--authentication-kubeconfig "$PKI/controller-manager.kubeconfig" \
		--authorization-kubeconfig "$PKI/controller-manager.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port 10257 \
		--root-ca-file "$PKI/ca.crt" \
		--service-account-private-key-file "$PKI/sa.key" \
		--use-service-account-credentials \
		--cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
		--leader-elect=false --profiling=false
	running kube-scheduler || start kube-scheduler "$CLUSTER_BIN/kube-scheduler" \
		--kubeconfig "$PKI/scheduler.kubeconfig" \
		--authentication-kubeconfig "$PKI/scheduler.kubeconfig" \
		--authorization-kubeconfig "$PKI/scheduler.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port 10259 --leader-elect=false --profiling=false
}

start_node() {
	# The bridge exists before the kubelet, which takes its address as the
	# node's (the CNI bridge plugin then adopts it as it is).
	if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link add "$BRIDGE" type bridge
		ip addr add "$NODE_IP/${POD_CIDR#*/}" dev "$BRIDGE"
	fi
	ip link set "$BRIDGE" up
	# The host's settings the node changes, kept for `down` to put back: the
	# kubelet sets its kernel defaults (overcommit, panic), kube-proxy's rules
	# must see bridged traffic (pod to Service to pod), pods route through.
	local k
	if [ ! -f "$CLUSTER_STATE/sysctl.saved" ]; then
		for k in $CLUSTER_SYSCTLS; do
			printf '%s %s\n' "$k" "$(cat "/proc/sys/$k")"
		done >"$CLUSTER_STATE/sysctl.saved"
	fi
	echo 1 >/proc/sys/net/bridge/bridge-nf-call-iptables
	echo 1 >/proc/sys/net/ipv4/ip_forward
	running kube-proxy || start kube-proxy "$CLUSTER_BIN/kube-proxy" \
		--kubeconfig "$PKI/kube-proxy.kubeconfig" --hostname-override "$NODE_NAME" \
		--proxy-mode iptables --cluster-cidr "$POD_CIDR" \
		--conntrack-max-per-core 0 --conntrack-tcp-timeout-established 0 \
		--conntrack-tcp-timeout-close-wait 0 --iptables-localhost-nodeports=false \
		--metrics-bind-address 127.0.0.1:10249 --healthz-bind-address 127.0.0.1:10256
	running kubelet || start kubelet "$CLUSTER_BIN/kubelet" \
		--config "$CLUSTER_RUN/kubelet.yaml" --kubeconfig "$PKI/kubelet.kubeconfig" \
		--hostname-override "$NODE_NAME" --node-ip "$NODE_IP" \
		--root-dir "$CLUSTER_RUN/kubelet" --cert-dir "$CLUSTER_RUN/kubelet/pki" --v 1
	wait_for "kubelet" 180 node_ready
}

node_ready() {
	[ "$(kc get node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

cluster_up() {
	host_check
	local t0=$SECONDS
	if [ -f "$CLUSTER_RUN/checkout" ] && [ "$(cat "$CLUSTER_RUN/checkout")" != "$here" ] &&
		running kube-apiserver; then
		die "a cluster of another checkout ($(cat "$CLUSTER_RUN/checkout")) is up: stop it first"
	fi
	bash "$here/scripts/cluster/build-kube.sh"
	bash "$here/scripts/cluster/images.sh" "$CLUSTER_IMAGES" >&2
	# shellcheck source=/dev/null
	. "$CLUSTER_IMAGES/images.env"
	# etcd holds the cluster (its data goes with `down`): while it runs, a
	# component that stopped (a fault test, a crash) is started again on the
	# same state; without it, what a killed run left (processes, mounts,
	# pods, rules) goes first and the cluster starts from nothing.
	if ! running etcd; then
		cluster_down keep-state
	fi
	mkdir -p "$CLUSTER_RUN" "$CLUSTER_STATE"
	echo "$here" >"$CLUSTER_RUN/checkout"
	pki_make
	write_configs
	start_containerd
	start_control_plane
	start_node
	say "up in $((SECONDS - t0)) s: node $NODE_NAME Ready; scripts/cluster.sh env for the kubeconfig"
}
