#!/usr/bin/env bash
# lint.sh - the mechanical style gate (`make lint`).
#
# 1. Banned calls in the product's folders (*.c, *.h): sprintf, vsprintf,
#    strcpy, strcat, strtok (strtok_r is fine), atoi, atol, gets, system, and
#    exit( anywhere but cli/main.c. Comments and string/character literals
#    are blanked first, so text that merely mentions a call does not count.
#    realloc and reallocarray too: a growing buffer is a struct cp_buf and a
#    growing array goes through cp_array_grow (base/buf.h), so limits are
#    checked in one place; base/.lint-allow lets base/buf.c, their home.
#    Calls that block or add a thread, which the one libuv loop must never
#    make (docs/contract.md §8): curl_easy_perform (libcurl's multi-socket API is
#    the way), blocking socket calls (connect, accept, recv*, send*, select,
#    poll, getaddrinfo, gethostbyname), sleeps, and threads (pthread_create,
#    uv_thread_create, uv_queue_work). Code that runs before the loop starts
#    is allowed by name in .lint-allow, with the reason beside it.
# 3. Runs shellcheck over scripts/*.sh, the tests' shell scripts and .ci/run when
#    it is installed (scripts/deps.sh installs it); otherwise prints a note.
#
# Exceptions go in a `.lint-allow` file in the source's own directory, one per
# line, `#` starts a comment:
#     FILE CALL      e.g. `local.c exit`  (FILE is relative to that directory)
#     * CALL         the call is allowed in every file of the directory
# An entry that matches nothing is reported as stale (a warning only).
#
# Exit status: 0 clean, 1 findings, 2 usage or environment error.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

dirs=(base store runner runner/local k8s/api k8s/backend broker cli)
unsafe='sprintf|vsprintf|strcpy|strcat|strtok|atoi|atol|gets|system|exit|realloc|reallocarray'
blocking='curl_easy_perform|connect|accept|accept4|recv|recvfrom|recvmsg|send|sendto|sendmsg|select|poll|ppoll|getaddrinfo|gethostbyname|sleep|usleep|nanosleep|pthread_create|uv_thread_create|uv_queue_work'
banned="$unsafe|$blocking"
findings=0

# Prints FILE:LINE:CALL:TEXT for every banned call in FILE, with comments and
# literals blanked (line numbers are kept).
scan() {
	perl -e '
		use strict; use warnings;
		my ($file, $re) = @ARGV;
		open(my $fh, "<", $file) or die "lint: $file: $!\n";
		local $/; my $src = <$fh>; close $fh;
		my @orig = split /\n/, $src, -1;
		my $blank = sub { my $s = shift; $s =~ s/[^\n]/ /g; $s };
		$src =~ s{(/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\x27(?:\\.|[^\x27\\\n])*\x27)}
		         {my $m = $1; substr($m, 0, 1) eq "/" ? $blank->($m)
		                   : substr($m, 0, 1) . $blank->(substr($m, 1, -1)) . substr($m, -1)}gse;
		my $n = 0;
		for my $line (split /\n/, $src, -1) {
			$n++;
			while ($line =~ /(?<![\w.>])($re)\s*\(/g) {
				my $call = $1;
				my $text = $orig[$n - 1]; $text =~ s/^\s+//;
				print "$file:$n:$call:$text\n";
			}
		}
	' "$1" "$banned"
}

# Is CALL in FILE allowed by FILE's directory .lint-allow? Records the use.
declare -A used=()
allowed() {
	local file=$1 call=$2 dir base allow f c
	dir=$(dirname "$file")
	base=$(basename "$file")
	allow="$dir/.lint-allow"
	[ -f "$allow" ] || return 1
	while read -r f c _; do
		[ -z "${f:-}" ] && continue
		[[ $f == \#* ]] && continue
		if [ "$c" = "$call" ] && { [ "$f" = "$base" ] || [ "$f" = "*" ]; }; then
			used["$allow:$f:$c"]=1
			return 0
		fi
	done <"$allow"
	return 1
}

echo "lint: banned and loop-blocking calls in ${dirs[*]}"
for d in "${dirs[@]}"; do
	[ -d "$d" ] || continue
	while IFS= read -r -d '' file; do
		while IFS=: read -r f line call text; do
			if [ "$call" = exit ] && [ "$f" = cli/main.c ]; then
				continue
			fi
			if allowed "$f" "$call"; then
				continue
			fi
			if [[ $call =~ ^($blocking)$ ]]; then
				echo "$f:$line: $call() blocks the event loop or adds a thread: $text"
			else
				echo "$f:$line: banned call $call(): $text"
			fi
			findings=$((findings + 1))
		done < <(scan "$file")
	done < <(find "$d" -maxdepth 1 -type f \( -name '*.c' -o -name '*.h' \) -print0 | sort -z)
done

# Stale allowlist entries.
for d in "${dirs[@]}"; do
	allow="$d/.lint-allow"
	[ -f "$allow" ] || continue
	while read -r f c _; do
		[ -z "${f:-}" ] && continue
		[[ $f == \#* ]] && continue
		if [ -z "${used["$allow:$f:$c"]+x}" ]; then
			echo "lint: warning: $allow: '$f $c' matches nothing (stale entry)"
		fi
	done <"$allow"
done

# 2. The layers (docs/architecture.md): a file may include only headers of
#    its own folder and of the folders listed for it, each by its path from
#    the top (`#include "base/err.h"`); no two files of the product's folders
#    share a basename, so a name alone says which file is meant.
declare -A may_include=(
	[base]="base"
	[store]="base store"
	[runner]="base runner"
	[runner/local]="base store runner runner/local"
	[k8s/api]="base k8s/api"
	[k8s/backend]="base store runner runner/local k8s/api k8s/backend"
	[broker]="base runner broker"
	[cli]="base store runner runner/local k8s/api k8s/backend broker cli"
)
echo "lint: includes follow the layers; no duplicate basenames"
for d in "${dirs[@]}"; do
	while IFS= read -r -d '' file; do
		while IFS=: read -r line inc; do
			if [[ $inc != */* ]]; then
				echo "$file:$line: include \"$inc\" without its folder"
				findings=$((findings + 1))
				continue
			fi
			if [ ! -f "$inc" ]; then
				echo "$file:$line: include \"$inc\" names no file of the tree"
				findings=$((findings + 1))
				continue
			fi
			ok=0
			for allowed_dir in ${may_include[$d]}; do
				[ "$(dirname "$inc")" = "$allowed_dir" ] && ok=1
			done
			if ((!ok)); then
				echo "$file:$line: $d/ may not include $inc (a higher or sibling layer)"
				findings=$((findings + 1))
			fi
		done < <(grep -no '^#include "[^"]*"' "$file" | sed 's/#include "\(.*\)"/\1/')
	done < <(find "$d" -maxdepth 1 -type f \( -name '*.c' -o -name '*.h' \) -print0 | sort -z)
done
product_files() { find "${dirs[@]}" -maxdepth 1 -type f ! -name .lint-allow | sort; }
dups=$(product_files | xargs -n1 basename | sort | uniq -d)
for b in $dups; do
	echo "lint: basename $b is used by more than one file: $(product_files | grep "/$b\$" | tr '\n' ' ')"
	findings=$((findings + 1))
done

shell_files=()
for f in scripts/*.sh tests/example/*.sh tests/fresh-machine/*.sh tests/loaded/*.sh \
	tests/mutation/*.sh scripts/cluster/*.sh tests/cluster/*.sh .ci/run; do
	[ -f "$f" ] && shell_files+=("$f")
done
if command -v shellcheck >/dev/null; then
	echo "lint: shellcheck ${shell_files[*]}"
	if ! shellcheck -x "${shell_files[@]}"; then
		findings=$((findings + 1))
	fi
else
	echo "lint: note: shellcheck is not installed, shell scripts not checked" \
		"(bash scripts/deps.sh installs it)"
fi

if ((findings)); then
	echo "lint: FAILED ($findings finding(s) or failing check(s))"
	exit 1
fi
echo "lint: ok"
