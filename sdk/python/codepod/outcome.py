"""The outcome of one execution (docs/contract.md §4), as typed dicts.

:meth:`Codepod.run` returns the outcome as codepod sent it, a plain ``dict``;
these types say which keys it has, so a type checker can follow ``usage``
into billing code. They describe, they do not check: a key a newer codepod
adds is still in the dict. The keys are those of
``broker/schema/outcome.schema.json`` (the SDK's tests compare the two).
"""

from typing import Any, Literal, NotRequired, TypedDict

Status = Literal["succeeded", "failed", "suspended"]
ErrorCode = Literal["INVALID_REQUEST", "SOURCE_TOO_LARGE", "SANDBOX_UNAVAILABLE",
                    "STARTUP_TIMEOUT", "TIMEOUT", "SCRIPT_ERROR", "RESULT_TOO_LARGE",
                    "PROCESS_EXITED", "NEVER_SETTLES", "CANCELLED", "OUTCOME_UNKNOWN",
                    "INTERNAL", "CPU_LIMIT", "REPLAY_DIVERGED"]


class Usage(TypedDict):
    """What the execution used. Where each figure comes from on each
    backend: broker/SESSION.md and docs/contract.md §4."""
    bridgeRequests: int
    startupMs: int
    runMs: int
    sandbox: Literal["local", "kubernetes"]
    digest: str                     # SHA-256 of source, tool declarations and policy
    wallMs: int                     # startupMs + runMs
    toolCalls: int                  # calls that reached a tool
    toolInputBytes: int
    toolOutputBytes: int
    logBytes: int                   # everything printed, the log window's cut included
    resultBytes: int
    cpuMs: NotRequired[int]         # absent when the backend could not read it
    maxRssBytes: NotRequired[int]   # the largest single process's peak
    restoreMs: NotRequired[int]     # first execution after a snapshot restore
    runs: NotRequired[int]          # a resumed execution: runs its figures add up


class ProgramError(TypedDict):
    name: str
    message: str
    stack: str


class OutcomeError(TypedDict):
    code: ErrorCode
    message: str                    # written by codepod, never program text
    programError: NotRequired[ProgramError]


class CallRecord(TypedDict):
    id: str
    tool: str
    status: Literal["ok", "error", "denied", "cancelled", "pending"]
    ms: int
    broker: NotRequired[bool]       # POST /v1/executions: the webhook broker failed
    reason: NotRequired[Literal["unreachable", "timeout", "http_status", "malformed",
                                "too_large"]]


class PendingCall(TypedDict):
    call: str
    tool: str
    input: Any


class Outcome(TypedDict):
    executionId: str
    status: Status
    logs: str
    logsTruncated: bool
    calls: list[CallRecord]
    result: NotRequired[Any]
    error: NotRequired[OutcomeError]
    callsOmitted: NotRequired[dict[str, int]]
    pending: NotRequired[list[PendingCall]]
    continuation: NotRequired[str]
    usage: NotRequired[Usage]       # absent when codepod refused the execution
