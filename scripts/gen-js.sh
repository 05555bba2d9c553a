#!/usr/bin/env bash
# gen-js.sh - the build's steps from the JS sources to build/gen (Makefile):
# a grammar or a program part kept in one file reaches every program that
# needs it here, so nobody edits two copies.
#
#   gen-js.sh kinds DEF              the frame kinds table (runner/frame_kinds.def)
#                                    as JS constants, on stdout
#   gen-js.sh sframe-kinds DEF       the supervisor stream's table
#                                    (k8s/backend/super_frame_kinds.def) as JS
#                                    constants, on stdout
#   gen-js.sh expand SRC NAME=FILE.. SRC with each line `// @insert NAME`
#                                    replaced by FILE, indented as that line;
#                                    a placeholder without a FILE, or a FILE
#                                    without its placeholder, fails
#   gen-js.sh c NAME FILE [--len]    FILE as a NUL-terminated C array NAME and
#                                    NAME_len (its length without the NUL);
#                                    --len puts FILE's length and a newline
#                                    first: what runner/boot.js reads
#
# Exit status: 0, or 1 with the reason on stderr.
set -euo pipefail

die() {
	echo "gen-js.sh: $*" >&2
	exit 1
}

kinds() {
	awk -v def="$1" '
		/^CODEPOD_FRAME_KIND/ {
			if ($0 !~ /^CODEPOD_FRAME_KIND\(\x27[A-Z]\x27, [A-Z_]+, [01]\)$/) {
				printf "%s:%d: not CODEPOD_FRAME_KIND(\x27L\x27, NAME, FINAL): %s\n", def, NR, $0 > "/dev/stderr"
				bad = 1; exit 1
			}
			line = $0
			gsub(/^CODEPOD_FRAME_KIND\(\x27|\x27|\)$/, "", line)
			split(line, f, ", ")
			if ((f[1] in letters) || (f[2] in names)) {
				printf "%s:%d: kind %s or name %s given twice\n", def, NR, f[1], f[2] > "/dev/stderr"
				bad = 1; exit 1
			}
			letters[f[1]] = 1; names[f[2]] = 1
			out = out sprintf("const FRAME_%s = \x27%s\x27;\n", f[2], f[1])
			all = all f[1]
			if (f[3] == 1) final = final f[1]
		}
		END {
			if (bad) exit 1
			if (all == "") { printf "%s: no CODEPOD_FRAME_KIND line\n", def > "/dev/stderr"; exit 1 }
			printf "// The runner'\''s frame kinds, generated from runner/frame_kinds.def.\n%s", out
			printf "const FRAME_KINDS = \x27%s\x27;\nconst FINAL_KINDS = \x27%s\x27;\n", all, final
		}' "$1"
}

sframe_kinds() {
	awk -v def="$1" '
		/^KUBE_SFRAME_(CONST|KIND)/ {
			line = $0
			if (line ~ /^KUBE_SFRAME_CONST\([A-Z_]+, (0x[0-9A-Fa-f]+|[0-9]+)\)$/) {
				gsub(/^KUBE_SFRAME_CONST\(|\)$/, "", line)
				split(line, f, ", ")
				name = f[1]; value = f[2]
			} else if (line ~ /^KUBE_SFRAME_KIND\(\x27[A-Z]\x27, [A-Z_]+, (TO_POD|FROM_POD), (DATA|CTL)\)$/) {
				gsub(/^KUBE_SFRAME_KIND\(\x27|\x27|\)$/, "", line)
				split(line, f, ", ")
				if (f[1] in letters) {
					printf "%s:%d: kind %s given twice\n", def, NR, f[1] > "/dev/stderr"
					bad = 1; exit 1
				}
				letters[f[1]] = 1
				name = f[2]; value = sprintf("0x%02x", index("ABCDEFGHIJKLMNOPQRSTUVWXYZ", f[1]) + 64)
			} else {
				printf "%s:%d: not KUBE_SFRAME_CONST(NAME, VALUE) or KUBE_SFRAME_KIND(\x27L\x27, NAME, WAY, CLASS): %s\n", def, NR, $0 > "/dev/stderr"
				bad = 1; exit 1
			}
			if (name in names) {
				printf "%s:%d: name %s given twice\n", def, NR, name > "/dev/stderr"
				bad = 1; exit 1
			}
			names[name] = 1
			out = out sprintf("const SFRAME_%s = %s;\n", name, tolower(value))
		}
		END {
			if (bad) exit 1
			if (out == "") { printf "%s: no KUBE_SFRAME_ line\n", def > "/dev/stderr"; exit 1 }
			printf "// The supervisor stream'\''s framing, generated from k8s/backend/super_frame_kinds.def.\n%s", out
		}' "$1"
}

expand() {
	local src=$1 arg
	shift
	local names=() files=()
	for arg in "$@"; do
		[[ $arg == *=* ]] || die "expand: $arg is not NAME=FILE"
		[ -f "${arg#*=}" ] || die "expand: ${arg#*=}: no such file"
		names+=("${arg%%=*}")
		files+=("${arg#*=}")
	done
	awk -v src="$src" -v names="${names[*]}" -v files="${files[*]}" '
		BEGIN {
			n = split(names, nm, " "); split(files, fl, " ")
			for (i = 1; i <= n; i++) file[nm[i]] = fl[i]
		}
		/^[ \t]*\/\/ @insert [a-z0-9-]+[ \t]*$/ {
			indent = $0; sub(/\/\/.*/, "", indent)
			name = $0; sub(/^[ \t]*\/\/ @insert /, "", name); sub(/[ \t]*$/, "", name)
			if (!(name in file)) {
				printf "%s:%d: nothing given for @insert %s\n", src, NR, name > "/dev/stderr"
				bad = 1; exit 1
			}
			used[name] = 1
			while ((getline l < file[name]) > 0) print (l == "" ? "" : indent l)
			close(file[name])
			next
		}
		{ print }
		END {
			if (bad) exit 1
			for (k in file) if (!(k in used)) {
				printf "%s: no line // @insert %s\n", src, k > "/dev/stderr"
				exit 1
			}
		}' "$src"
}

carray() {
	local name=$1 file=$2 len=${3:-}
	[ -f "$file" ] || die "c: $file: no such file"
	echo "const unsigned char ${name}[] = {"
	{
		if [ "$len" = --len ]; then
			wc -c <"$file" | tr -d ' '
		fi
		cat "$file"
	} | od -An -v -tx1 | sed 's/ \([0-9a-f][0-9a-f]\)/0x\1,/g'
	echo "0};"
	echo "const unsigned long ${name}_len = sizeof $name - 1;"
}

[ $# -ge 2 ] || die "usage: gen-js.sh kinds DEF | sframe-kinds DEF | expand SRC NAME=FILE... | c NAME FILE [--len]"
cmd=$1
shift
case $cmd in
kinds) kinds "$1" ;;
sframe-kinds) sframe_kinds "$1" ;;
expand) expand "$@" ;;
c) carray "$@" ;;
*) die "unknown step $cmd" ;;
esac
