#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Smoke test of the codepod on kind (after kind/up.sh): through the API (a
# kubectl port-forward to the Service, the bearer token from the chart's
# Secret), one execution that calls a tool; checks the result, then that the
# conversation's pod exists in the sandbox namespace.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

need_kubectl
need python3 "Install Python 3 (the smoke client is kind/smoke_client.py, stdlib only)."
PORT=${PORT:-18080}

token=$(kc -n "$NAMESPACE" get secret "$RELEASE-token" -o jsonpath='{.data.token}' | base64 -d)
[ -n "$token" ] || die "no token in secret $RELEASE-token"

log=$(mktemp)
kc -n "$NAMESPACE" port-forward "svc/$RELEASE" "$PORT:8080" >"$log" 2>&1 &
pf=$!
trap 'kill "$pf" 2>/dev/null || true; rm -f "$log"' EXIT

deadline=$((SECONDS + 30))
until python3 "$KIND_DIR/smoke_client.py" --port "$PORT" --ready 2>/dev/null; do
	if ((SECONDS > deadline)); then
		cat "$log" >&2
		die "the API did not answer /readyz through the port-forward"
	fi
	sleep 1
done

conversation="smoke-$(date +%s)-$$"
say "running an execution with a tool call (conversation $conversation)"
label=$(python3 "$KIND_DIR/smoke_client.py" --port "$PORT" --token "$token" \
	--conversation "$conversation" --namespace "$SANDBOX_NAMESPACE")

pods=$(kc -n "$SANDBOX_NAMESPACE" get pods -l "codepod.dev/conversation=$label" \
	-o jsonpath='{range .items[*]}{.metadata.name} {.status.phase}{"\n"}{end}')
[ -n "$pods" ] || die "no pod labelled codepod.dev/conversation=$label in $SANDBOX_NAMESPACE"
say "conversation pod: $pods"
say "smoke test passed"
