#!/usr/bin/env bash
# test-groups.sh - `make test`: runs every test group (a Makefile target) in
# turn, each in its own `make GROUP`, and goes on after a failure so that one
# breakage cannot hide the rest. Prints one line per group as it ends, and as
# its last line the summary `N passed, M failed (test groups...)`.
#
#   scripts/test-groups.sh MAKE GROUP...
#
# MAKE is the make to run (the caller's $(MAKE): the build folder, compiler
# and sanitizer flags of the caller come along in MAKEFLAGS).
# Exit status: 0 when every group passed, 1 otherwise.
set -uo pipefail

make_cmd=$1
shift
passed=0
failed=()
results=()
for g in "$@"; do
	echo "==== test group $g"
	start=$SECONDS
	if $make_cmd --no-print-directory "$g"; then
		passed=$((passed + 1))
		results+=("  $g: passed ($((SECONDS - start)) s)")
	else
		failed+=("$g")
		results+=("  $g: FAILED ($((SECONDS - start)) s)")
	fi
	echo "==== test group $g: ${results[-1]##*: }"
done
echo "==== test groups"
printf '%s\n' "${results[@]}"
if ((${#failed[@]})); then
	echo "${passed} passed, ${#failed[@]} failed (test groups; failed: ${failed[*]})"
	exit 1
fi
echo "${passed} passed, 0 failed (test groups)"
