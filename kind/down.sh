#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Deletes the kind cluster made by kind/up.sh (and everything in it).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

need_kind
if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
	kind delete cluster --name "$CLUSTER"
	say "cluster $CLUSTER deleted"
else
	say "no cluster $CLUSTER"
fi
