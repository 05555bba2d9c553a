#!/usr/bin/env bash
# tests/fresh-machine/run.sh - the README's two commands on a fresh Debian.
#
#   sudo tests/fresh-machine/run.sh [WORK_DIR]
#
# Builds a clean Debian bookworm tree (debootstrap --variant=minbase, plus
# make, git and ca-certificates, nothing else) from the mirror this
# machine's apt uses, clones this checkout into it twice (its committed
# HEAD: no build/, no .deps/), and runs, as a new user would, `make run`
# then `make test` in /home/dev/codepod (world-readable), then
# `scripts/deps.sh` and `make test` in /root/p (/root is mode 0700, so the
# fake cluster's non-root pods cannot search it) with no network but
# loopback: the suite must pass offline once deps.sh has run. After `make
# run`, the Debian package (`make deb`) is installed with apt and a backend
# project outside the checkout installs the SDK packages (`make sdk`) and
# runs the README's example on both transports (tests/fresh-machine/backend.sh).
# The tree is entered as a mount namespace whose root IS the tree
# (pivot_root, not a chroot: a chrooted process may not create the user
# namespaces that the sandbox and the fake API server's pods need),
# with the host's /dev and /sys, its own /proc and PID namespace, and the
# host's network (apt and npm must be reachable).
#
# Prints each step's and each test group's result, and as its last line
# `fresh machine: make run OK|FAILED, the .deb and the SDK packages OK|FAILED,
# make test OK|FAILED (N passed, M failed), ...`.
# Exit status: 0 when every step passed. Needs root and about 60-90
# minutes (more on a loaded machine); not part of `make test`.
# FRESH_STEPS=root runs only the /root/p part (deps.sh, then make test
# offline), FRESH_STEPS=home all but it; default both. The two may run at
# once (two WORK_DIRs) when each is given its own CODEPOD_TEST_UID (the
# unprivileged tests' user, passed into the tree; see tests/loaded/run.sh). WORK_DIR
# (default: a new folder under /var/tmp) is removed at the end unless
# KEEP=1. Logs: WORK_DIR/run.log, WORK_DIR/test.log (kept with KEEP=1).
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
	echo "fresh-machine: needs root (debootstrap, namespaces)" >&2
	exit 2
fi
for tool in debootstrap unshare git; do
	if ! command -v "$tool" >/dev/null; then
		echo "fresh-machine: $tool is missing (apt-get install debootstrap util-linux git)" >&2
		exit 2
	fi
done

here=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-$(mktemp -d /var/tmp/codepod-fresh.XXXXXX)}
mkdir -p "$work"
root="$work/root"
if [ "${KEEP:-0}" != 1 ]; then
	trap 'rm -rf --one-file-system "$work"' EXIT
fi

# The mirror this machine's apt uses (deb822 or one-line format).
mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null |
	grep -v security | head -n 1 || true)
if [ -z "$mirror" ]; then
	mirror=$(awk '$1 == "deb" && $0 !~ /security/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
fi
mirror=${mirror:-http://deb.debian.org/debian}
security=${mirror%/debian}/debian-security

step() { echo "fresh-machine: $*"; }
start=$SECONDS

step "debootstrap bookworm (minbase + make git ca-certificates) from $mirror into $root"
debootstrap --variant=minbase --include=make,git,ca-certificates bookworm "$root" "$mirror" \
	>"$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log"; exit 1; }
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb $security bookworm-security main
EOF
cp /etc/resolv.conf "$root/etc/resolv.conf"
# debootstrap writes no /etc/hosts; an installed Debian (the installer, a
# cloud image) has one naming localhost, which programs resolve.
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
# A network that intercepts TLS needs its CA on every machine in it: the
# certificates this machine added locally go into the new one's store too.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
	step "trusting this machine's local CA certificates: $(cd /usr/local/share/ca-certificates && echo ./*.crt)"
	cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
	chroot "$root" update-ca-certificates >/dev/null
fi
# Such a machine also tells the official Node builds (which carry their own
# CA list, unlike Debian's nodejs) to trust the system's: so does the tree.
extra_ca=
if [ -n "${NODE_EXTRA_CA_CERTS:-}" ]; then
	extra_ca=/etc/ssl/certs/ca-certificates.crt
fi

for dir in /home/dev/codepod /root/p; do
	step "cloning $(git -C "$here" rev-parse --short HEAD) of $here into $dir"
	mkdir -p "$root$(dirname "$dir")"
	git clone --quiet --no-local --branch "$(git -C "$here" rev-parse --abbrev-ref HEAD)" \
		"$here" "$root$dir"
done
chmod 0700 "$root/root"

# Runs a command in the tree's checkout DIR, as root in its own mount and
# PID namespaces: the tree becomes the namespace's root (pivot_root) with a
# fresh /proc nothing is mounted over (bubblewrap's own --proc covers parts
# of it, and then the sandboxes inside could not mount theirs), the host's
# /dev and /sys, and a clean environment. OFFLINE=1: in a network namespace
# of its own with only loopback.
in_tree() {
	local dir=$1 net=()
	shift
	[ "${OFFLINE:-0}" = 1 ] && net=(--net)
	# shellcheck disable=SC2016 # expanded by the inner shell
	unshare --mount --pid --fork --kill-child "${net[@]}" -- /bin/bash -c '
		set -e
		root=$1
		extra_ca=$2
		dir=$3
		test_uid=$4
		shift 4
		ip link set lo up 2>/dev/null || true
		mount --make-rprivate /
		mount --bind "$root" "$root"
		mount --rbind /dev "$root/dev"
		mount --rbind /sys "$root/sys"
		mount -t proc proc "$root/proc"
		cd "$root"
		mkdir -p .host
		pivot_root . .host
		umount -l /.host
		rmdir /.host
		cd "$dir"
		exec env -i HOME=/root LANG=C.UTF-8 ${extra_ca:+NODE_EXTRA_CA_CERTS=$extra_ca} \
			${test_uid:+CODEPOD_TEST_UID=$test_uid} \
			PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
	' in-tree "$root" "$extra_ca" "$dir" "${CODEPOD_TEST_UID:-}" "$@"
}

steps=${FRESH_STEPS:-home,root}
wants() { case ",$steps," in *",$1,"*) return 0 ;; esac; return 1; }

# Prints a test log's group results and each failed group's last lines.
report() {
	echo "fresh-machine: test groups:"
	sed -n '/^==== test groups$/,$p' "$1" | sed -n 's/^  /  /p'
	sed -n 's/^  \([a-z0-9-]*\): FAILED.*/\1/p' "$1" | while read -r g; do
		echo "---- $g (tail)"
		sed -n "/^==== test group $g\$/,/^==== test group $g: /p" "$1" | tail -n 25
	done
}

run_rc=0 backend_rc=0 test_rc=0 root_rc=0
: >"$work/test.log"
: >"$work/test-root.log"

if wants home; then
	step "make run (log: $work/run.log)"
	in_tree /home/dev/codepod make run >"$work/run.log" 2>&1 || run_rc=$?
	tail -n 15 "$work/run.log"
	step "make run: $([ "$run_rc" = 0 ] && echo OK || echo "FAILED (exit $run_rc)") after $((SECONDS - start)) s"

	# As a new user installs it: the .deb built by make deb in the
	# checkout, then a backend project of its own (/home/dev/backend) with
	# the SDK packages of make sdk, running the README's example on both
	# transports (tests/fresh-machine/backend.sh; it removes the package
	# again, so make test below sees the checkout's codepod only).
	t0=$SECONDS
	if [ "$run_rc" = 0 ]; then
		step "the .deb, and a backend project with the SDK packages (log: $work/backend.log)"
		in_tree /home/dev/codepod bash tests/fresh-machine/backend.sh /home/dev/codepod /home/dev/backend \
			>"$work/backend.log" 2>&1 || backend_rc=$?
		grep '^backend: ' "$work/backend.log" || true
		[ "$backend_rc" = 0 ] || tail -n 25 "$work/backend.log"
	else
		backend_rc=1
		step "the .deb and the SDK packages: skipped (make run failed)"
	fi
	step "the .deb and the SDK packages: $([ "$backend_rc" = 0 ] && echo OK || echo "FAILED (exit $backend_rc)") after $((SECONDS - t0)) s"

	t0=$SECONDS
	step "make test in /home/dev/codepod (log: $work/test.log)"
	in_tree /home/dev/codepod make test >"$work/test.log" 2>&1 || test_rc=$?
	step "make test: $([ "$test_rc" = 0 ] && echo OK || echo "FAILED (exit $test_rc)") after $((SECONDS - t0)) s"
	report "$work/test.log"
else
	step "make run, the .deb and make test in /home/dev/codepod: skipped (FRESH_STEPS=$steps)"
fi

if wants root; then
	t0=$SECONDS
	step "scripts/deps.sh, then make test offline, in /root/p (log: $work/test-root.log)"
	{ in_tree /root/p bash scripts/deps.sh && OFFLINE=1 in_tree /root/p make test; } \
		>"$work/test-root.log" 2>&1 || root_rc=$?
	step "make test in /root/p, offline: $([ "$root_rc" = 0 ] && echo OK || echo "FAILED (exit $root_rc)") after $((SECONDS - t0)) s"
	report "$work/test-root.log"
else
	step "make test in /root/p: skipped (FRESH_STEPS=$steps)"
fi

summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$work/test.log" | tail -n 1 || true)
summary_root=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$work/test-root.log" | tail -n 1 || true)
echo "fresh machine: make run $([ "$run_rc" = 0 ] && echo OK || echo FAILED)," \
	"the .deb and the SDK packages $([ "$backend_rc" = 0 ] && echo OK || echo FAILED)," \
	"make test $([ "$test_rc" = 0 ] && echo OK || echo FAILED) (${summary:-no summary})," \
	"/root/p offline $([ "$root_rc" = 0 ] && echo OK || echo FAILED) (${summary_root:-no summary})" \
	"in $((SECONDS - start)) s"
[ "$run_rc" = 0 ] && [ "$backend_rc" = 0 ] && [ "$test_rc" = 0 ] && [ "$root_rc" = 0 ]
