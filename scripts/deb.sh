#!/usr/bin/env bash
# deb.sh - the Debian package, BUILD/codepod_VERSION_ARCH.deb, built with
# dpkg-deb from what `make install DESTDIR=... PREFIX=/usr` puts in place.
#
#   scripts/deb.sh MAKE BUILD
#
# MAKE is the caller's $(MAKE) (its build folder and compiler come along).
# Depends: the packages of the libraries the binary links (dpkg-shlibdeps,
# as a Debian package build derives them), the libwebsockets event-loop
# plugin that it loads at run time, and what the local backend runs
# (bubblewrap; prlimit and setpriv from util-linux). Not Node.js: Debian's
# nodejs is 18 in bookworm and codepod needs 22.13, so the description says
# where Node 22 comes from (and so does codepod when it finds none).
# DEB_MAINTAINER ("Name <address>") is the Maintainer field; the tree names
# no maintainer, so the default is a placeholder to replace before the
# package is published anywhere.
set -euo pipefail

make_cmd=$1
build=$(mkdir -p "$2" && cd "$2" && pwd)
work=$build/deb
# dpkg-shlibdeps reads the binaries where a package build puts them:
# debian/PACKAGE/ beside a debian/control.
stage=$work/debian/codepod
rm -rf "$work"
mkdir -p "$stage"
$make_cmd --no-print-directory install DESTDIR="$stage" PREFIX=/usr >/dev/null
strip --strip-unneeded "$stage/usr/bin/codepod"

version=$("$stage/usr/bin/codepod" --version)
version=${version#codepod }
arch=$(dpkg --print-architecture)
mkdir -p "$stage/DEBIAN"
printf 'Source: codepod\n\nPackage: codepod\nArchitecture: any\n' > "$work/debian/control"
# (its warnings about the staging layout are its own: shown only on failure)
shlibs=$(cd "$work" && dpkg-shlibdeps -O -e debian/codepod/usr/bin/codepod 2>"$work/shlibdeps.log") ||
	{ cat "$work/shlibdeps.log" >&2; exit 1; }
shlibs=${shlibs#shlibs:Depends=}
[ -n "$shlibs" ] || { echo "deb: dpkg-shlibdeps found no libraries" >&2; exit 1; }
size=$(du -sk --apparent-size "$stage" | cut -f1)

cat > "$stage/DEBIAN/control" <<CONTROL
Package: codepod
Version: $version
Architecture: $arch
Maintainer: ${DEB_MAINTAINER:-codepod maintainers <codepod@localhost>}
Installed-Size: $size
Depends: $shlibs, libwebsockets-evlib-uv, bubblewrap, util-linux
Section: devel
Priority: optional
Description: run model-written JavaScript programs in a sandbox
 codepod runs programs that a language model wrote, each in a fresh
 Node.js process inside its conversation's sandbox (bubblewrap on this
 machine, or a pod per conversation on Kubernetes), and brokers the
 programs' tool calls back to the application over stdio, WebSocket or
 HTTP.
 .
 The local backend needs Node.js 22.13 or later, which this package cannot
 depend on: Debian's nodejs is too old (18 in bookworm). Get Node.js 22
 from https://nodejs.org/en/download or from the node_22.x packages of
 https://deb.nodesource.com, then put it on PATH or give it with --node or
 CODEPOD_NODE.
CONTROL

out=$build/codepod_${version}_${arch}.deb
rm -f "$build"/codepod_*.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$out" >/dev/null
echo "$out"
