# Shared by up.sh, smoke.sh and down.sh (sourced, not run).
# shellcheck shell=bash disable=SC2034  # the variables are for the scripts that source this
CLUSTER=${CLUSTER:-codepod}
RELEASE=${RELEASE:-codepod}
NAMESPACE=${NAMESPACE:-codepod}
SANDBOX_NAMESPACE=${SANDBOX_NAMESPACE:-codepod-sandbox}
CONTEXT="kind-$CLUSTER"
KIND_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$KIND_DIR/.." && pwd)
CHART="$REPO/charts/codepod"

say() { echo "kind: $*"; }
die() { echo "kind: $*" >&2; exit 1; }

# need TOOL HOW-TO-GET-IT
need() {
	command -v "$1" >/dev/null 2>&1 || die "$1 is missing. $2"
}

need_docker() {
	need docker "Install Docker Engine: https://docs.docker.com/engine/install/"
	docker info >/dev/null 2>&1 ||
		die "docker is installed but its engine does not answer (is dockerd running, may this user use it?)"
}
need_kind() { need kind "Install kind: https://kind.sigs.k8s.io/docs/user/quick-start/#installation"; }
need_kubectl() { need kubectl "Install kubectl: https://kubernetes.io/docs/tasks/tools/"; }
need_helm() { need helm "Install helm 3: https://helm.sh/docs/intro/install/"; }

kc() { kubectl --context "$CONTEXT" "$@"; }
