"""Writes every controller makes the same way: a merge patch guarded by the object's resourceVersion, computed
again from a fresh read after each conflict, and a status condition set with such a patch."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from enum import Enum
from typing import Any

from flotilla.client import ApiException, Resource, is_conflict, is_not_found
from flotilla.kube.conditions import set_condition
from flotilla.kube.objects import meta_of

__all__ = ["Written", "patch_condition", "patch_with_retry", "write_once"]

_PATCH_ATTEMPTS = 5


class Written(Enum):
    """What became of one write guarded by a precondition (a resourceVersion or a uid)."""

    DONE = "done"
    GONE = "gone"  # 404: the object no longer exists
    CONFLICT = "conflict"  # 409: read the object again and decide again


async def write_once(write: Awaitable[Any]) -> Written:
    """Await ``write`` (a create, update, patch or delete call) and say how it went; an error other than
    404 or 409 is raised."""
    try:
        await write
    except ApiException as e:
        if is_not_found(e):
            return Written.GONE
        if is_conflict(e):
            return Written.CONFLICT
        raise
    return Written.DONE


async def patch_with_retry(
    client: Any,
    res: Resource,
    current: Mapping[str, Any] | None,
    name: str,
    namespace: str | None,
    make_patch: Callable[[Mapping[str, Any]], dict[str, Any] | None],
    *,
    subresource: str | None = None,
) -> dict[str, Any] | None:
    """Patch an object with a resourceVersion precondition, re-reading it after each 409.

    ``make_patch(obj)`` computes the merge patch (with the precondition) from the object as known, or
    None when nothing is to be done. ``current`` is the cached object (None: read it). Returns the
    patched object, the unchanged one, or None when the object does not exist.

    After a conflict the object is read again as the API server holds it (``resourceVersion=0``: the version its
    compare-and-swap checks against, without a read from etcd), so a retry costs no round trip to the store. That
    version may be older than the store's when another API server wrote meanwhile: the next patch then conflicts
    again, and a decision that nothing is to be done is one the controller's informer corrects, as for the cached
    object of the first attempt.
    """
    obj = current
    for attempt in range(_PATCH_ATTEMPTS):
        if obj is None:
            obj = await client.get_or_none(res, name, namespace, resource_version="0" if attempt else "")
            if obj is None:
                return None
        patch = make_patch(obj)
        if patch is None:
            return dict(obj)
        try:
            return dict(await client.patch(res, name, patch, namespace=namespace, subresource=subresource))
        except ApiException as e:
            if is_not_found(e):
                return None
            if not is_conflict(e) or attempt == _PATCH_ATTEMPTS - 1:
                raise
            obj = None
    raise RuntimeError("unreachable")


async def patch_condition(client: Any, res: Resource, obj: Mapping[str, Any], condition: Mapping[str, Any],
                          now: Any) -> dict[str, Any] | None:
    """Set ``condition`` in the object's ``status.conditions`` (``meta.SetStatusCondition``, at ``now``) with a
    status-subresource patch guarded by the resourceVersion, re-read on 409; nothing is written when it is set."""
    def make(current: Mapping[str, Any]) -> dict[str, Any] | None:
        conditions = (current.get("status") or {}).get("conditions") or []
        new = set_condition(conditions, condition, now)
        if new == conditions:
            return None
        return {"metadata": {"resourceVersion": meta_of(current).get("resourceVersion")},
                "status": {"conditions": new}}

    md = meta_of(obj)
    return await patch_with_retry(client, res, obj, str(md.get("name")), md.get("namespace"), make,
                                  subresource="status")
