#!/usr/bin/env bash
# make cluster: starts the real single-node cluster (scripts/cluster.sh up:
# builds Kubernetes once into .deps/kube, assembles and imports the images),
# runs tests/cluster against it, stops it and checks that nothing of it is
# left on the host (processes, mounts, interfaces, iptables rules, cgroups).
# CODEPOD_CLUSTER_KEEP=1 leaves it up afterwards (to look at it: README).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
rc=0
start=$SECONDS
if ! bash scripts/cluster.sh up; then
	echo "cluster tests: the cluster did not come up" >&2
	bash scripts/cluster.sh down
	exit 1
fi
echo "cluster tests: cluster up after $((SECONDS - start)) s"
PYTHON=${PYTHON:-/usr/bin/python3}
"$PYTHON" -m pytest -q -p no:cacheprovider tests/cluster "$@" || rc=1
# The end-to-end scenarios of files in and out, commands beside a program
# and approvals, on real pods (the e2e harness pointed at the cluster).
if [ $# = 0 ]; then
	PYTHONPATH=tests/cluster "$PYTHON" -m pytest -q -p no:cacheprovider -p realkube \
		tests/e2e/test_files.py tests/e2e/test_commands.py tests/e2e/test_approvals.py || rc=1
fi
if [ -n "${CODEPOD_CLUSTER_KEEP:-}" ]; then
	exit "$rc"
fi
bash scripts/cluster.sh down || rc=1
if ! left=$(bash scripts/cluster.sh leftovers); then
	echo "cluster tests: FAILED: down left behind:" >&2
	echo "$left" >&2
	rc=1
fi
exit "$rc"
