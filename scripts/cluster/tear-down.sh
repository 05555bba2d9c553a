# shellcheck shell=bash
# `scripts/cluster.sh down`: stops the cluster and removes what it made on the
# host (sourced by scripts/cluster.sh after lib.sh). Works from any state: a
# cluster up, half up, or killed with its processes gone and its mounts,
# pods, rules and cgroups left (up runs it first). Pods go through the CRI
# before containerd stops: their shims outlive containerd, and only the CRI
# tears down their network namespaces.

stop_daemon() {
	local name=$1 pid i
	pid=$(pid_of "$name")
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.2
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$CLUSTER_RUN/$name.pid"
}

# Every process whose command line names this cluster's folders (a daemon
# whose pid file is gone, containerd's shims).
stray_pids() {
	local p
	for p in /proc/[0-9]*; do
		[ "${p#/proc/}" = "$$" ] && continue
		if { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF -e "$CLUSTER_RUN/" -e "$CLUSTER_BIN/"; then
			echo "${p#/proc/}"
		fi
	done
}

# The kubelet's pod cgroups (cgroupfs driver: /kubepods in each hierarchy).
pod_cgroups() {
	find /sys/fs/cgroup/*/kubepods -depth -type d 2>/dev/null || true
}

remove_pods() {
	[ -x "$CLUSTER_BIN/crictl" ] && [ -f "$CLUSTER_RUN/containerd.toml" ] || return 0
	# A containerd that is gone is started again on the same state, only to
	# let the CRI remove the pods it knows.
	if ! running containerd && [ -d "$CLUSTER_STATE/containerd" ]; then
		start containerd containerd --config "$CLUSTER_RUN/containerd.toml"
		wait_for "containerd" 30 ctr --address "$CONTAINERD_SOCK" version || return 0
	fi
	local ids
	ids=$(crictl pods -q 2>/dev/null || true)
	if [ -n "$ids" ]; then
		# shellcheck disable=SC2086
		crictl stopp $ids >/dev/null 2>&1 || true
		# shellcheck disable=SC2086
		crictl rmp -f $ids >/dev/null 2>&1 || true
	fi
}

kill_cgroup_procs() {
	local d p
	for d in $(pod_cgroups); do
		while read -r p; do
			[ -n "$p" ] && kill -KILL "$p" 2>/dev/null
		done <"$d/cgroup.procs" 2>/dev/null || true
	done
}

unmount_under() {
	local m
	# Deepest first.
	{ findmnt -rn -o TARGET 2>/dev/null | grep -E "^($CLUSTER_RUN|$CLUSTER_STATE)(/|$)" || true; } | sort -r |
		while read -r m; do
			umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
		done
}

# The chains of the kubelet and kube-proxy (KUBE-*) and of the CNI plugins
# (CNI-*), and every rule that jumps to one, in each table of iptables and
# ip6tables: the tables are written back whole without them, the rest as it
# was. (kube-proxy --cleanup removes its own only, not the kubelet's.)
remove_rules() {
	local v
	for v in iptables ip6tables; do
		command -v "$v-save" >/dev/null || continue
		if "$v-save" 2>/dev/null | grep -qE '(KUBE|CNI)-'; then
			"$v-save" | grep -vE '(KUBE|CNI)-' | "$v-restore" 2>/dev/null || true
		fi
	done
}

# The pods' network namespaces that survived their sandboxes (a killed run):
# those with an address in this cluster's pod range.
remove_netns() {
	local ns prefix=${POD_CIDR%.*.*}.
	for ns in $(ip netns list 2>/dev/null | awk '/^cni-/ {print $1}'); do
		if ip -n "$ns" -4 -o addr show 2>/dev/null | grep -qF " inet $prefix"; then
			ip netns delete "$ns" 2>/dev/null || true
		fi
	done
}

cluster_down() {
	local keep=${1:-}
	[ "$(id -u)" = 0 ] || die "down needs root"
	stop_daemon kubelet
	remove_pods
	stop_daemon kube-proxy
	if [ -x "$CLUSTER_BIN/kube-proxy" ]; then
		"$CLUSTER_BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
	fi
	local d
	for d in kube-scheduler kube-controller-manager kube-apiserver etcd containerd; do
		stop_daemon "$d"
	done
	kill_cgroup_procs
	local p
	for p in $(stray_pids); do
		kill -KILL "$p" 2>/dev/null || true
	done
	sleep 0.2
	unmount_under
	remove_rules
	remove_netns
	ip link del "$BRIDGE" 2>/dev/null || true
	if [ -f "$CLUSTER_STATE/sysctl.saved" ]; then
		local k v
		while read -r k v; do
			echo "$v" >"/proc/sys/$k" 2>/dev/null || true
		done <"$CLUSTER_STATE/sysctl.saved"
		rm -f "$CLUSTER_STATE/sysctl.saved"
	fi
	for d in $(pod_cgroups); do
		rmdir "$d" 2>/dev/null || true
	done
	rm -rf "$CLUSTER_RUN"
	if [ "$keep" = purge ]; then
		rm -rf "$CLUSTER_STATE"
	fi
}

# What a cluster left on the host, a line each; exit 1 when anything is.
cluster_leftovers() {
	local found=0 line
	while read -r line; do
		[ -n "$line" ] && { echo "process: $line"; found=1; }
	done < <(for p in $(stray_pids); do { tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null | cut -c1-120; done)
	while read -r line; do
		[ -n "$line" ] && { echo "mount: $line"; found=1; }
	done < <(findmnt -rn -o TARGET | grep -E "^($CLUSTER_RUN|$CLUSTER_STATE)(/|$)" || true)
	if ip link show "$BRIDGE" >/dev/null 2>&1; then
		echo "interface: $BRIDGE"
		found=1
	fi
	while read -r line; do
		[ -n "$line" ] && { echo "interface: $line"; found=1; }
	done < <(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}')
	while read -r line; do
		[ -n "$line" ] && { echo "iptables: $line"; found=1; }
	done < <({ iptables-save; ip6tables-save; } 2>/dev/null | grep -E '(KUBE|CNI)-' || true)
	while read -r line; do
		[ -n "$line" ] && { echo "cgroup: $line"; found=1; }
	done < <(pod_cgroups)
	if [ -f "$CLUSTER_STATE/sysctl.saved" ]; then
		echo "sysctl: not put back: $(tr '\n' ' ' <"$CLUSTER_STATE/sysctl.saved")"
		found=1
	fi
	if [ -d "$CLUSTER_RUN" ]; then
		echo "folder: $CLUSTER_RUN"
		found=1
	fi
	return $((found))
}
