"""CHANGELOG.md names what a user acts on: the options, codes and policy
keys it names are the ones this build has, so that a rename cannot leave
the changelog pointing at a name nothing takes."""

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("CODEPOD_BUILD", REPO / "build"))
CHANGELOG = (REPO / "CHANGELOG.md").read_text()
CONTRACT = (REPO / "docs" / "contract.md").read_text()


def test_sections_newest_first_unreleased_on_top():
    heads = re.findall(r"^## (.+)$", CHANGELOG, re.M)
    assert heads[0] == "Unreleased", heads
    days = heads[1:]
    assert days and all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", d) for d in days), days
    assert days == sorted(days, reverse=True), days


def test_every_option_it_names_is_one_codepod_takes():
    helptext = subprocess.run([str(BUILD / "codepod"), "--help"], capture_output=True,
                              text=True).stdout
    taken = set(re.findall(r"--[a-z][a-z-]*", helptext))
    named = set(re.findall(r"`[^`]*?(--[a-z][a-z-]*)", CHANGELOG))
    named -= {"--version"}  # a command of its own, listed in the usage lines
    assert named, "the changelog names options"
    unknown = sorted(named - taken)
    assert not unknown, f"CHANGELOG.md names options codepod --help does not list: {unknown}"


def test_every_code_and_policy_key_it_names_is_in_the_contract():
    # codes have an underscore (errno names and make variables have none);
    # CODEPOD_*, OTEL_*, AWS_* and GCE_* are environment variables
    codes = {c for c in re.findall(r"`([A-Z]+_[A-Z_]+)`", CHANGELOG)
             if not c.startswith(("CODEPOD_", "OTEL_", "AWS_", "GCE_"))}
    assert {"INVALID_REQUEST", "CPU_LIMIT", "SANDBOX_UNAVAILABLE"} <= codes
    missing = sorted(c for c in codes if f"`{c}`" not in CONTRACT)
    assert not missing, f"codes not in docs/contract.md: {missing}"
    keys = set(re.findall(r"`(max[A-Z][A-Za-z]+|timeoutMs|startupTimeoutMs)`", CHANGELOG))
    assert keys
    missing = sorted(k for k in keys if f"`{k}`" not in CONTRACT)
    assert not missing, f"policy keys not in docs/contract.md: {missing}"
