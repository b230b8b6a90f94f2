"""JSON merge patches (RFC 7386) computed from two versions of an object.

Controllers here never PUT whole objects that other controllers also write: they compute the
change to the fields they own and send it as a merge patch, with ``metadata.resourceVersion`` as an
optimistic lock (the API server answers 409 when the object moved on meanwhile).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["merge_patch_diff", "with_precondition"]


def merge_patch_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch that turns ``old`` into ``new`` (``{}`` when they are equal).

    Keys missing from ``new`` become ``None`` (deleted); nested objects are diffed recursively;
    lists and scalars are replaced whole. ``new`` must not hold ``None`` values (a merge patch
    cannot store a JSON null).
    """
    patch: dict[str, Any] = {}
    for key in old:
        if key not in new:
            patch[key] = None
    for key, value in new.items():
        if key not in old:
            patch[key] = copy.deepcopy(value)
            continue
        before = old[key]
        if ((type(before) is dict or isinstance(before, Mapping))
                and (type(value) is dict or isinstance(value, Mapping))):
            sub = merge_patch_diff(before, value)
            if sub:
                patch[key] = sub
        elif before != value or type(before) is not type(value):
            patch[key] = copy.deepcopy(value)
    return patch


def with_precondition(patch: dict[str, Any], obj: Mapping[str, Any]) -> dict[str, Any]:
    """``patch`` plus ``metadata.resourceVersion`` of ``obj`` (the optimistic lock), when it has one."""
    meta = obj.get("metadata")
    rv = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    if not rv:
        return patch
    out = dict(patch)
    md = dict(out.get("metadata") or {})
    md["resourceVersion"] = str(rv)
    out["metadata"] = md
    return out
