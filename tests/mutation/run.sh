#!/usr/bin/env bash
# run.sh - the mutation check: does the suite catch a deliberate breakage?
#
#   tests/mutation/run.sh [-j N] [-b] [-k] [-c] [-l] [-o DIR] [-t SECONDS] [NAME...]
#
# Each mutation of tests/mutation/mutations.txt (or only those NAMEd) breaks
# the product code on purpose: a guard removed, a limit off by one, a rule
# dropped from the seccomp filter. For each one this script makes a scratch
# copy of the checkout (its tracked and untracked files as they are now,
# uncommitted changes included, with .deps/ hard-linked, so nothing is
# downloaded), applies the mutation, builds, and runs the tests the
# mutation names, each within a time bound. The mutation is
#   caught     every test it names failed (or ran past its time bound);
#   survived   a test it names passed: the behaviour it breaks is untested;
#   stale      a text to replace is not in the code exactly once (the code
#              moved on: update the mutation);
#   broken     it does not build, or a test could not run (a test file or
#              selector that names nothing).
# The table at the end has one line per mutation. Exit status: 0 when every
# mutation was caught, 1 otherwise, 2 for a usage error.
#
#   -j N        N mutations at once (default 1: the suite's own timings are
#               tight, and each mutation's tests start sandboxes)
#   -b          first run every named test on an unmutated copy (a test that
#               fails there catches nothing)
#   -k          keep each scratch copy (its path is in the log)
#   -c          only check that every mutation still applies; no build
#   -l          list the mutations and exit
#   -o DIR      logs and the table (default build/mutation in the checkout)
#   -t SECONDS  time bound of each test unless the mutation gives its own
#               (default 600)
#
# Not part of `make test`: a whole run builds and tests ~30 times.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
list=$here/mutations.txt
py=/usr/bin/python3
muts() { "$py" "$here/mutations.py" "$@"; }

jobs=1 baseline=0 keep=0 check_only=0 list_only=0 bound=600
out=$root/build/mutation
usage() { sed -n '4p' "$0" | sed 's/^# */usage: /' >&2; exit 2; }
while getopts ':j:bkclo:t:h' opt; do
	case $opt in
	j) jobs=$OPTARG ;;
	b) baseline=1 ;;
	k) keep=1 ;;
	c) check_only=1 ;;
	l) list_only=1 ;;
	o) out=$OPTARG ;;
	t) bound=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[[ $jobs =~ ^[1-9][0-9]*$ && $bound =~ ^[1-9][0-9]*$ ]] || usage

muts names "$list" >/dev/null || exit 2 # a malformed list, said
mapfile -t all < <(muts names "$list")
if (($#)); then
	for n in "$@"; do
		muts what "$list" "$n" >/dev/null || exit 2
	done
	names=("$@")
else
	names=("${all[@]}")
fi
if ((list_only)); then
	for n in "${names[@]}"; do
		printf '%-28s %s\n' "$n" "$(muts what "$list" "$n")"
	done
	exit 0
fi
if ((check_only)); then
	if muts check "$list" "$root" "${names[@]}"; then
		echo "mutation: all ${#names[@]} apply"
		exit 0
	fi
	exit 1
fi
[ -d "$root/.deps" ] || { echo "mutation: $root/.deps is missing: run scripts/deps.sh" >&2; exit 2; }
if [ "$(id -u)" != 0 ]; then
	echo "mutation: note: not root: a mutation of what only a root codepod runs (the" \
		"sandbox user, setpriv) survives here" >&2
fi

mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/codepod-mutation.XXXXXX")
# Searchable by all: the hostile suite runs codepod as another user from
# the copy, which it then skips when a folder on the way is closed.
chmod 755 "$work"
trap '((keep)) || rm -rf "$work"' EXIT

# A copy of the checkout in $1: the files git knows or would add (what is
# ignored, build/ and .deps/, stays out; outside git, as from `git
# archive`, everything but those two), then .deps/ hard-linked. A
# build/.deps-ok newer than scripts/deps.sh tells make the dependencies
# are in: the copy's build downloads nothing.
copy_tree() {
	local dest=$1
	mkdir -p "$dest"
	chmod 755 "$dest"
	if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		(cd "$root" && git ls-files -z --cached --others --exclude-standard |
			while IFS= read -r -d '' f; do
				if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi
			done | tar --null -T - -cf -) | tar -C "$dest" -xf -
	else
		tar -C "$root" --exclude=./build --exclude=./.deps -cf - . | tar -C "$dest" -xf -
	fi
	cp -al "$root/.deps" "$dest/.deps"
	mkdir -p "$dest/build"
	touch "$dest/build/.deps-ok"
}

# Runs one test line (tab-separated words) in tree $1, log $2, bound $3.
# Prints caught / timeout / passed / broken.
run_test() {
	local tree=$1 log=$2 secs=$3 words=() envs=() cmd=() rc=0
	IFS=$'\t' read -r -a words <<<"$4"
	case ${words[0]} in
	unit) cmd=("$tree/build/tests/${words[1]}") ;;
	make) cmd=(make --no-print-directory -C "$tree" "${words[@]:1}") ;;
	pytest)
		local i=1
		while ((i < ${#words[@]})) && [[ ${words[i]} =~ ^[A-Z_][A-Z0-9_]*= ]]; do
			envs+=("${words[i]}")
			i=$((i + 1))
		done
		cmd=(env "${envs[@]}" "$py" -m pytest -q -x -p no:cacheprovider "${words[@]:i}") ;;
	esac
	echo "== ${words[*]}" >"$log"
	# CODEPOD_BIN, and nothing of the caller's choice of backend, transport
	# or pool: each test line says what it needs.
	(cd "$tree" && env -u CODEPOD_BACKEND -u CODEPOD_TRANSPORT -u CODEPOD_PRESTART \
		CODEPOD_BIN="$tree/build/codepod" timeout -k 30 "$secs" "${cmd[@]}") >>"$log" 2>&1 || rc=$?
	echo "== exit status $rc" >>"$log"
	if ((rc == 0)); then
		echo passed
	elif ((rc == 124 || rc == 137)); then
		echo timeout
	elif [ "${words[0]}" = pytest ] && ((rc != 1)); then
		echo broken # 2-5: interrupted, internal or usage error, nothing collected
	else
		echo caught
	fi
}

# The result of run_one: NAME, STATUS, SECONDS, DETAIL, a tab between, in
# $out/NAME/result; the scratch copy goes unless -k.
finish() {
	printf '%s\t%s\t%s\t%s\n' "$name" "$1" "$((SECONDS - start))" "$2" >"$dir/result"
	((keep)) || rm -rf "$tree"
}

# One mutation NAME, or with NAME "baseline" and test lines after it, those
# tests on the unmutated copy. Runs in a subshell of its own (its locals
# are what finish reads).
run_one() {
	local name=$1 dir=$out/$1 tree=$work/$1 start=$SECONDS tests=() units=() secs status detail
	shift
	rm -rf "$dir"
	mkdir -p "$dir"
	if [ "$name" = baseline ]; then
		tests=("$@")
		secs=$bound
	else
		mapfile -t tests < <(muts tests "$list" "$name")
		secs=$(muts timeout "$list" "$name")
		secs=${secs:-$bound}
	fi
	copy_tree "$tree"
	((keep)) && echo "scratch copy: $tree" >"$dir/scratch"
	if [ "$name" != baseline ] && ! muts apply "$list" "$name" "$tree" 2>"$dir/apply.log"; then
		finish stale "$(tail -n 1 "$dir/apply.log")"
		return
	fi
	for t in "${tests[@]}"; do
		[[ $t == unit$'\t'* ]] && units+=("build/tests/${t#unit$'\t'}")
	done
	if ! make --no-print-directory -C "$tree" -j2 all "${units[@]}" >"$dir/build.log" 2>&1; then
		finish broken "does not build (see $dir/build.log)"
		return
	fi
	local i=0 r passed=() broken=() timeouts=0
	for t in "${tests[@]}"; do
		i=$((i + 1))
		r=$(run_test "$tree" "$dir/test-$i.log" "$secs" "$t")
		case $r in
		passed) passed+=("${t//$'\t'/ }") ;;
		broken) broken+=("${t//$'\t'/ }") ;;
		timeout) timeouts=$((timeouts + 1)) ;;
		esac
	done
	if ((${#broken[@]})); then
		status=broken detail="could not run: ${broken[*]} (see $dir/test-*.log)"
	elif [ "$name" = baseline ]; then
		if ((${#passed[@]} == ${#tests[@]})); then
			status=passed detail="every named test passes unmutated"
		else
			status=failed detail="tests that fail unmutated: see $dir/test-*.log"
		fi
	elif ((${#passed[@]})); then
		status=survived detail="passed: ${passed[*]}"
	else
		status=caught detail="${#tests[@]}/${#tests[@]} tests failed"
		((timeouts)) && detail+=" ($timeouts by their time bound)"
	fi
	finish "$status" "$detail"
}

total_start=$SECONDS
if ((baseline)); then
	mapfile -t union < <(for n in "${names[@]}"; do muts tests "$list" "$n"; done | awk '!seen[$0]++')
	echo "mutation: baseline: ${#union[@]} tests on the unmutated copy"
	(run_one baseline "${union[@]}")
	cut -f2,4 "$out/baseline/result" | sed 's/^/mutation: baseline: /;s/\t/: /'
fi
running=0
for n in "${names[@]}"; do
	if ((running >= jobs)); then
		wait -n || true
		running=$((running - 1))
	fi
	echo "mutation: $n: $(muts what "$list" "$n")"
	run_one "$n" &
	running=$((running + 1))
done
wait

table=$out/table.txt
{
	printf '%-28s %-9s %6s  %s\n' MUTATION STATUS SECONDS DETAIL
	for n in "${names[@]}"; do
		if [ -f "$out/$n/result" ]; then
			IFS=$'\t' read -r rn st sec det <"$out/$n/result"
			printf '%-28s %-9s %6s  %s\n' "$rn" "$st" "$sec" "$det"
		else
			printf '%-28s %-9s %6s  %s\n' "$n" broken - "no result (see $out/$n)"
		fi
	done
} >"$table"
caught=$(awk 'NR > 1 && $2 == "caught"' "$table" | wc -l)
echo
cat "$table"
echo
echo "mutation: $caught of ${#names[@]} caught in $((SECONDS - total_start)) s (logs: $out)"
rc=0
((caught == ${#names[@]})) || rc=1
if ((baseline)) && [ "$(cut -f2 "$out/baseline/result")" != passed ]; then
	echo "mutation: the baseline failed: a test that fails unmutated proves nothing"
	rc=1
fi
exit "$rc"
