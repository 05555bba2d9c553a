"""Status bodies exactly as the real apiserver writes them.

Key order matters to people diffing against fixtures (Go encodes struct fields
in declaration order): kind, apiVersion, metadata, status, message, reason,
details, code. Messages are built as apimachinery's errors.go builds them,
with the qualified resource "pods" (kind "Pod" only for 422 Invalid).
"""
import json

_REASONS = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
    405: "MethodNotAllowed", 406: "NotAcceptable", 409: "Conflict", 410: "Expired",
    415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests",
    500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout",
}


def status(code, reason, message, details=None, with_type=True):
    s = {}
    if with_type:
        s["kind"] = "Status"
        s["apiVersion"] = "v1"
    s["metadata"] = {}
    s["status"] = "Failure"
    s["message"] = message
    s["reason"] = reason
    if details is not None:
        s["details"] = details
    if code:
        s["code"] = code
    return s


def generic(code, message=None, retry_after=None):
    """Status for an injected fault of any code, worded like the real one."""
    reason = _REASONS.get(code, "InternalError" if code >= 500 else "BadRequest")
    details = None
    if code == 429:
        message = message or "Too many requests, please try again later."
        details = {"retryAfterSeconds": int(retry_after or 1)}
    elif code == 500:
        message = message or "Internal error occurred: fakekube injected fault"
        details = {"causes": [{"message": "fakekube injected fault"}]}
    elif code == 504:
        message = message or "Timeout: request did not complete within requested timeout - context deadline exceeded"
        details = {"retryAfterSeconds": int(retry_after or 1)}
    elif code == 503:
        message = message or "the server is currently unable to handle the request"
    elif code == 401:
        message = message or "Unauthorized"
    return status(code, reason, message or reason, details)


def unauthorized():
    return status(401, "Unauthorized", "Unauthorized")


def not_found(name, kind="pods"):
    return status(404, "NotFound", f'{kind} "{name}" not found', {"name": name, "kind": kind})


def already_exists(name):
    return status(409, "AlreadyExists", f'pods "{name}" already exists',
                  {"name": name, "kind": "pods"})


def conflict(name):
    return status(409, "Conflict",
                  f'Operation cannot be fulfilled on pods "{name}": the object has been modified; '
                  'please apply your changes to the latest version and try again',
                  {"name": name, "kind": "pods"})


def precondition_failed(ns, name, what, want, have):
    # The storage layer's wording (StorageError Code 4 = ErrCodeInvalidObj).
    return status(409, "Conflict",
                  f'Operation cannot be fulfilled on pods "{name}": StorageError: invalid object, '
                  f'Code: 4, Key: /registry/pods/{ns}/{name}, ResourceVersion: 0, '
                  f'AdditionalErrorMsg: Precondition failed: {what} in precondition: {want}, '
                  f'{what} in object meta: {have}',
                  {"name": name, "kind": "pods"})


def expired(requested, oldest):
    return status(410, "Expired", f"too old resource version: {requested} ({oldest})")


def invalid(name, causes):
    """causes: list of (reason, message, field). message: 'Pod "N" is invalid: f: m, ...'."""
    if len(causes) == 1:
        summary = f"{causes[0][2]}: {causes[0][1]}"
    else:
        summary = "[" + ", ".join(f"{f}: {m}" for _, m, f in causes) + "]"
    return status(422, "Invalid", f'Pod "{name}" is invalid: {summary}',
                  {"name": name, "kind": "Pod",
                   "causes": [{"reason": r, "message": m, "field": f} for r, m, f in causes]})


def bad_request(message):
    return status(400, "BadRequest", message)


def dumps(obj):
    # The apiserver's JSON serializer writes compact JSON plus a newline.
    return json.dumps(obj, separators=(",", ":")) + "\n"


# Exec error-channel bodies: metav1.Status without TypeMeta.
EXEC_SUCCESS = {"metadata": {}, "status": "Success"}


def exec_exit(code):
    return {"metadata": {}, "status": "Failure",
            "message": f"command terminated with non-zero exit code: command terminated with exit code {code}",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


def exec_internal(msg):
    return {"metadata": {}, "status": "Failure",
            "message": f"Internal error occurred: {msg}", "reason": "InternalError",
            "details": {"causes": [{"message": msg}]}, "code": 500}
