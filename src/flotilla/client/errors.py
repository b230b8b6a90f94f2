"""Errors of the Kubernetes API as seen by a client: one exception carrying the server's ``Status``."""

from __future__ import annotations

from typing import Any

__all__ = [
    "ApiException",
    "ConnectionFailed",
    "from_status",
    "is_already_exists",
    "is_conflict",
    "is_gone",
    "is_invalid",
    "is_not_found",
    "retry_reason",
]

# What client-go says when a non-2xx response carries no Status body.
_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
_MESSAGES = {
    401: "Unauthorized",
    403: "forbidden",
    404: "the server could not find the requested resource",
    405: "the server does not allow this method on the requested resource",
    409: "the server reported a conflict",
    410: "the server responded with 410 Gone",
    429: "the server has received too many requests and has asked us to try again later",
    500: "an error on the server has prevented the request from succeeding",
    503: "the server is currently unable to handle the request",
    504: "the server was unable to return a response in the time allotted",
}


class ApiException(Exception):
    """A request failed. ``status`` is the HTTP code (0: no response), ``body`` the ``Status`` object if any."""

    def __init__(self, status: int, reason: str = "", message: str = "", body: dict[str, Any] | None = None) -> None:
        self.status = status
        self.reason = reason or _REASONS.get(status, "Unknown")
        self.message = message or _MESSAGES.get(status, f"the server responded with status {status}")
        self.body = body
        super().__init__(f"({self.status}) {self.reason}: {self.message}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.status, self.reason, self.message, self.body))


class ConnectionFailed(ApiException):
    """No usable response: the connection was refused, reset, timed out, or TLS failed. ``status`` is 0."""

    def __init__(self, message: str, reason: str = "ConnectionFailed") -> None:
        super().__init__(0, reason, message, None)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.reason))


def from_status(status: Any, http_status: int = 0) -> ApiException:
    """The exception for a ``Status`` body (or anything else a failed response carried)."""
    if isinstance(status, dict) and status.get("kind") == "Status":
        code = status.get("code")
        if not isinstance(code, int) or isinstance(code, bool) or code <= 0:
            code = http_status or 500
        return ApiException(code, str(status.get("reason") or ""), str(status.get("message") or ""), status)
    return ApiException(http_status or 500, body=status if isinstance(status, dict) else None)


def _code(e: BaseException) -> int:
    return e.status if isinstance(e, ApiException) else -1


def is_not_found(e: BaseException) -> bool:
    return _code(e) == 404


def is_already_exists(e: BaseException) -> bool:
    return _code(e) == 409 and isinstance(e, ApiException) and e.reason == "AlreadyExists"


def is_conflict(e: BaseException) -> bool:
    """409 Conflict (stale resourceVersion, failed precondition); not AlreadyExists."""
    return _code(e) == 409 and isinstance(e, ApiException) and e.reason != "AlreadyExists"


def is_gone(e: BaseException) -> bool:
    """410: the resourceVersion (or continue token) is older than the server's history. Re-list."""
    return _code(e) == 410


def is_invalid(e: BaseException) -> bool:
    return _code(e) == 422


#: HTTP codes a retry is the answer to: a stale resourceVersion or a name taken (409), an object gone meanwhile
#: (404), a watch's history compacted (410), throttling (429), a server busy or starting (503, 504)
_RETRIED_CODES = frozenset({404, 409, 410, 429, 503, 504})


def retry_reason(e: BaseException) -> str | None:
    """The reason of an expected, transient failure that a retry is the answer to (``Conflict``, ``NotFound``,
    ``ConnectionFailed``, ``Timeout``...), or ``None`` for anything else (a bug, a bad object: worth a traceback).

    The exception's explicit causes (``raise ... from e``) count: a controller's error wrapping a refused
    connection to a member that is down is such a failure too."""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ApiException):
            if cur.status == 0 or cur.status in _RETRIED_CODES:
                return cur.reason
            return None
        if isinstance(cur, TimeoutError):
            return "Timeout"
        if isinstance(cur, ConnectionError):
            return type(cur).__name__
        cur = cur.__cause__
    return None
