"""Kubernetes ``Status`` errors: one exception type that knows its HTTP code, reason and causes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flotilla.apiserver.resource_types import ResourceType
from flotilla.kube.validation import Cause


@dataclass
class ApiError(Exception):
    code: int
    reason: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def _details(rt: ResourceType | None, name: Any, kind: str | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {}
    if name:
        d["name"] = name if isinstance(name, str) else str(name)
    if rt is not None:
        d["group"] = rt.group
        d["kind"] = kind or rt.plural
    return d


def not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{rt.qualified_resource} "{name}" not found', _details(rt, name))


def namespace_not_found(ns: str) -> ApiError:
    return ApiError(404, "NotFound", f'namespaces "{ns}" not found', {"name": ns, "kind": "namespaces"})


def path_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(rt: ResourceType, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{rt.qualified_resource} "{name}" already exists', _details(rt, name))


def conflict(rt: ResourceType, name: str, why: str | None = None) -> ApiError:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(
        409, "Conflict", f'Operation cannot be fulfilled on {rt.qualified_resource} "{name}": {why}', _details(rt, name)
    )


def invalid(rt: ResourceType, name: Any, causes: list[Cause]) -> ApiError:
    name = name if isinstance(name, str) else str(name)
    kind_group = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
    summary = ", ".join(f"{c.field}: {c.message}" if c.field else c.message for c in causes)
    if len(causes) > 1:
        summary = "[" + summary + "]"
    details = _details(rt, name, kind=rt.kind)
    details["causes"] = [c.as_dict() for c in causes]
    return ApiError(422, "Invalid", f'{kind_group} "{name}" is invalid: {summary}', details)


def patch_failed(rt: ResourceType, name: str, why: str) -> ApiError:
    kind_group = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
    return ApiError(422, "Invalid", f'{kind_group} "{name}" is invalid: {why}', _details(rt, name, kind=rt.kind))


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(message: str, rt: ResourceType | None = None, name: str | None = None) -> ApiError:
    return ApiError(403, "Forbidden", message, _details(rt, name))


def method_not_allowed(message: str = "the server does not allow this method on the requested resource") -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    hint = ""
    if "protobuf" in content_type:
        hint = (
            "; this server speaks JSON only: use 'kubectl apply -f FILE', or for generator commands "
            "'kubectl create ... --dry-run=client -o yaml | kubectl apply -f -'"
        )
    return ApiError(
        415,
        "UnsupportedMediaType",
        f'the body of the request was in an unknown format - accepted media types include: {", ".join(accepted)}'
        + (f" (got {content_type!r}){hint}" if content_type else ""),
    )


def too_large(limit: int) -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {limit}")


def timeout(message: str, cause_reason: str = "") -> ApiError:
    details: dict[str, Any] = {}
    if cause_reason:
        details["causes"] = [{"reason": cause_reason, "message": message}]
    return ApiError(504, "Timeout", message, details)


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}")
