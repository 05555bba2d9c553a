"""The policy's keys and values checked where the application passes them
(code_tool(), run()), so that a typo throws in the application's code instead
of failing every program with an INVALID_REQUEST the model is shown and cannot
fix. The server checks the same rules (runner/policy.c) and its ceilings,
which only it knows."""

from __future__ import annotations

from typing import Any

# Every key the server takes, in its order (docs/contract.md §3).
POLICY_KEYS = ("timeoutMs", "startupTimeoutMs", "maxSourceBytes", "maxResultBytes", "maxBridgeRequests",
               "maxInFlightBridgeRequests", "maxToolInputBytes", "maxToolOutputBytes", "maxMemoryMb", "maxCpuMs",
               "maxWorkspaceBytes", "maxWorkspaceFiles")


def check_policy(policy: Any, where: str) -> None:
    """Raises ValueError naming the first key or value codepod would refuse."""
    if policy is None:
        return
    if not hasattr(policy, "items"):
        raise ValueError(f"{where}: policy must be a mapping")
    for key, value in policy.items():
        if key not in POLICY_KEYS:
            near = next((k for k in POLICY_KEYS if k.lower() == str(key).lower()), None)
            hint = f" (did you mean {near}?)" if near else f" (known: {', '.join(POLICY_KEYS)})"
            raise ValueError(f"{where}: policy.{key} is not a policy field{hint}")
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{where}: policy.{key} must be a positive integer")
