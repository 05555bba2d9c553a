#!/usr/bin/env bash
# tests/loaded/run.sh - "passes on a loaded machine": clones this
# checkout's committed HEAD twice under /tmp and runs `make test` in both at
# the same time, each loading the machine for the other.
#
#   tests/loaded/run.sh [RUNS]     (default 1; RUNS in a row, stopping at a failure)
#
# LOADED_TARGET=GROUP runs `make GROUP` instead of `make test` (a quick check).
#
# Copies .deps/ into the clones when this checkout has one (saves the
# downloads; the clones still run scripts/deps.sh). Prints one line per run:
# `loaded run N at COMMIT: a: <make test's last line> (S s) | b: ...`.
# Exit status: 0 when every run passed in both clones. Not part of make test.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
runs=${1:-1}
target=${LOADED_TARGET:-test}
commit=$(git -C "$src" rev-parse --short HEAD)
for ((n = 1; n <= runs; n++)); do
	rcs=()
	pids=()
	work=$(mktemp -d /tmp/codepod-loaded.XXXXXX)
	start=$SECONDS
	uid=47123
	for x in a b; do
		git clone -q "$src" "$work/$x" || exit 2
		[ -d "$src/.deps" ] && cp -a "$src/.deps" "$work/$x/"
		# each suite's unprivileged codepod its own uid: a fork bomb in one
		# must not use up the other's per-user process limit
		# (and CODEPOD_TEST_HOST_SHARED: what one suite leaves on the host,
		# the other's codepods may clean up first)
		(cd "$work/$x" && CODEPOD_TEST_UID=$uid CODEPOD_TEST_HOST_SHARED=1 \
			make "$target" >"$work/$x.log" 2>&1) &
		pids+=($!)
		uid=$((uid + 100)) # (a suite's test workers add 0, 1, ...)
	done
	line="loaded run $n at $commit:"
	for i in 0 1; do
		x=$([ "$i" = 0 ] && echo a || echo b)
		wait "${pids[$i]}"
		rcs+=($?)
		line+=" $x: $(tail -1 "$work/$x.log") ($((SECONDS - start)) s)"
		[ "$i" = 0 ] && line+=" |"
	done
	echo "$line"
	if [ "${rcs[0]}" != 0 ] || [ "${rcs[1]}" != 0 ]; then
		echo "logs kept in $work"
		exit 1
	fi
	rm -rf "$work"
done
