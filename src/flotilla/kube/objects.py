"""Defensive accessors for Kubernetes objects held as plain JSON dicts.

Objects reach the controllers from watches, members and users, so a field may be missing, null or of the wrong
type. These accessors never raise: a part that is not of the expected type reads as empty. What they return is
the object's own part (not a copy) and must not be changed by a caller that does not own the object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "annotations_of", "as_int", "as_list", "as_map", "as_str", "labels_of", "meta_of", "spec_of", "status_of",
]


def as_map(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else an empty one."""
    return value if type(value) is dict or isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` when it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def as_str(value: Any) -> str:
    """``value`` when it is a string, else ``""``."""
    return value if isinstance(value, str) else ""


def as_int(value: Any) -> int | None:
    """``value`` when it is a JSON integer (``2.0`` counts as 2; a bool does not), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def meta_of(obj: Any) -> Mapping[str, Any]:
    """``metadata`` of an object (``None`` and non-objects included)."""
    return as_map(as_map(obj).get("metadata"))


def spec_of(obj: Any) -> Mapping[str, Any]:
    return as_map(as_map(obj).get("spec"))


def status_of(obj: Any) -> Mapping[str, Any]:
    return as_map(as_map(obj).get("status"))


def annotations_of(obj: Any) -> Mapping[str, Any]:
    return as_map(meta_of(obj).get("annotations"))


def labels_of(obj: Any) -> Mapping[str, Any]:
    return as_map(meta_of(obj).get("labels"))
