#!/usr/bin/env bash
# gen-man.sh - codepod's man page, codepod.1, from what the built program
# prints: `codepod --help` (the option tables of cli/, so the page lists
# exactly what is parsed) and `codepod --version`.
#
#   scripts/gen-man.sh build/codepod DOCDIR > codepod.1
#
# DOCDIR: where `make install` puts the protocol's documents (SEE ALSO).
#
# The help text's shape is cli/options.c's: the usage lines, then one
# "TITLE:" heading per group of options, each option at column 3 with its
# help from column 31 (on the next line when the option is long).
set -euo pipefail

bin=$1
docdir=$2
version=$("$bin" --version)
version=${version#codepod }
"$bin" --help | awk -v version="$version" -v docdir="$docdir" '
function esc(s) {
	gsub(/\\/, "\\e", s)
	gsub(/-/, "\\-", s)
	# a line of roff must not start with a control character
	if (s ~ /^[.\047]/) s = "\\&" s
	return s
}
BEGIN {
	print ".TH CODEPOD 1 \"\" \"codepod " version "\" \"User Commands\""
	print ".SH NAME"
	print "codepod \\- run model\\-written JavaScript programs in a sandbox, their tool calls brokered back to the caller"
	section = ""
}
/^usage:$/ { print ".SH SYNOPSIS"; section = "usage"; next }
section == "usage" && /^  / {
	line = $0; sub(/^  /, "", line)
	print ".nf"; print esc(line); print ".fi"; next
}
/^options, under the commands that take them:$/ {
	print ".SH OPTIONS"
	print "Options are listed under the commands that take them."
	section = "options"; next
}
section == "options" && /^$/ { next }
section == "options" && /^[^ ].*:$/ {
	title = $0; sub(/:$/, "", title)
	print ".SS " esc(title); next
}
# an option: its name (and argument), then its help from column 31 or on
# the next line
section == "options" && /^  -/ {
	head = substr($0, 3, 28); rest = substr($0, 31)
	if (length($0) > 30 && substr($0, 29, 2) != "  ") { head = substr($0, 3); rest = "" }
	sub(/ +$/, "", head)
	print ".TP"
	print "\\fB" esc(head) "\\fR"
	if (rest != "") print esc(rest)
	next
}
section == "options" && length($0) > 30 && substr($0, 1, 30) ~ /^ *$/ {
	line = $0; sub(/^ +/, "", line); print esc(line); next
}
{ print esc($0) }
END {
	print ".SH ENVIRONMENT"
	print ".TP"
	print "\\fBCODEPOD_NODE\\fR"
	print "the Node.js 22 binary of the local backend, when \\fB\\-\\-node\\fR is not given"
	print ".TP"
	print "\\fBCODEPOD_STATE_DIR\\fR"
	print "the conversations\\(aq workspaces, when \\fB\\-\\-state\\-dir\\fR is not given"
	print ".SH NODE.JS"
	print "The local backend runs every program with Node.js 22.13 or later, found with"
	print "\\fB\\-\\-node\\fR, then \\fBCODEPOD_NODE\\fR, then \\fBPATH\\fR."
	print "Debian\\(aqs own nodejs is too old; Node.js 22 comes from https://nodejs.org/en/download"
	print "or from the node_22.x packages of https://deb.nodesource.com."
	print ".SH SEE ALSO"
	print "The session protocol and the contract: " esc(docdir) " (SESSION.md, contract.md)."
}
'
