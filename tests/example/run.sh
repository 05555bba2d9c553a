#!/usr/bin/env bash
# The invoices example of the PAI code-mode page on the local backend:
# the top three firms by paid invoice total for 2026-08.
#
#   tests/example/run.sh [CODEPOD_BIN]
#
# Prints the outcome JSON (docs/contract.md §4) on stdout; exits with codepod's status.
set -euo pipefail
bin=${1:-${CODEPOD_BIN:-build/codepod}}
case $bin in /*) ;; *) bin=$PWD/$bin ;; esac
cd "$(dirname "$0")/../.."          # run from the repo root; tool commands in tools.json are relative to its folder
echo "codepod run tests/example/invoices.js  (top three firms by paid invoices, 2026-08)" >&2
exec "$bin" run tests/example/invoices.js --tools tests/example/tools.json \
  --state-dir build/example-state
