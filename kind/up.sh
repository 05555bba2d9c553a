#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Brings codepod up on a local kind cluster: creates the cluster (unless it
# exists), builds the controller and sandbox images, loads them into the
# cluster, installs charts/codepod with charts/codepod/examples/kind.yaml and
# waits until the controller is ready and a warm sandbox pod is running.
#
#   kind/up.sh            env: CLUSTER (codepod), RELEASE, NAMESPACE, SANDBOX_NAMESPACE
#   kind/smoke.sh         an execution with a tool call through the API
#   kind/down.sh          deletes the cluster
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

need_docker
need_kind
need_kubectl
need_helm

if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
	say "cluster $CLUSTER exists"
else
	say "creating cluster $CLUSTER"
	kind create cluster --name "$CLUSTER" --config "$KIND_DIR/cluster.yaml" --wait 180s
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

say "building localhost/codepod:dev (images/controller.Dockerfile)"
mkdir -p "$work/controller"
cp -r "$REPO/Makefile" "$REPO/runner" "$REPO/k8s" "$REPO/broker" "$work/controller/"
docker build -f "$REPO/images/controller.Dockerfile" --target runtime -t localhost/codepod:dev "$work/controller"

say "building localhost/codepod-sandbox:dev (images/sandbox.Dockerfile, Node 22 from the public node image)"
docker build -f "$REPO/images/sandbox.Dockerfile" --target sandbox -t localhost/codepod-sandbox:dev \
	"$REPO/images/sandbox-context"

say "loading the images into the cluster"
kind load docker-image --name "$CLUSTER" localhost/codepod:dev localhost/codepod-sandbox:dev

say "installing the chart (release $RELEASE in $NAMESPACE, sandboxes in $SANDBOX_NAMESPACE)"
helm upgrade --install "$RELEASE" "$CHART" --kube-context "$CONTEXT" \
	--namespace "$NAMESPACE" --create-namespace \
	-f "$CHART/examples/kind.yaml" --set sandbox.namespace="$SANDBOX_NAMESPACE" \
	--wait --timeout 5m

say "waiting for the controller"
kc -n "$NAMESPACE" rollout status "deployment/$RELEASE" --timeout=180s

say "waiting for a warm sandbox pod"
deadline=$((SECONDS + 180))
until kc -n "$SANDBOX_NAMESPACE" get pods -l app.kubernetes.io/managed-by=codepod,codepod.dev/warm=true \
	-o jsonpath='{.items[*].status.phase}' 2>/dev/null | grep -q Running; do
	if ((SECONDS > deadline)); then
		kc -n "$SANDBOX_NAMESPACE" get pods -o wide || true
		kc -n "$NAMESPACE" logs "deployment/$RELEASE" --tail=50 || true
		die "no warm sandbox pod is Running after 180 s"
	fi
	sleep 2
done
kc -n "$SANDBOX_NAMESPACE" get pods
say "ready. Next: kind/smoke.sh"
