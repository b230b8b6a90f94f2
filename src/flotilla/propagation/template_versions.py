"""Which template version a binding's ``spec.resource.resourceVersion`` should name.

Karmada's detector ignores a template update that leaves its specification as it was (only ``status``,
``managedFields`` or ``resourceVersion`` changed), so in the usual course a status write on the template does
not touch the binding. But a reconcile already queued for a real change (the detector's own claim, a user's
edit) reads the template as it is when it runs: when a status write came in between, writing that newer
resourceVersion bumps the binding's generation for nothing, and the scheduler then confirms the new
generation with one more status write.

:class:`SpecificationVersions` follows a template informer's events and remembers, per template, the
resourceVersion of its newest version whose specification differs from the version before. For a template
the informer has seen as it is, the binding names that version; for one it has not seen yet (a write the
informer has not delivered), the template's own resourceVersion, as before.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, NamedTuple

__all__ = ["SpecificationVersions"]


class _Seen(NamedTuple):
    uid: str
    spec_version: str  # the resourceVersion of the newest specification change
    latest: str  # the newest resourceVersion the informer delivered


def _identity(obj: Mapping[str, Any]) -> tuple[str, str]:
    md = obj.get("metadata") or {}
    return str(md.get("uid") or ""), str(md.get("resourceVersion") or "")


class SpecificationVersions:
    """Per template key: the resourceVersion of its newest specification change, as an informer saw it."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[Hashable, _Seen] = {}

    def __len__(self) -> int:
        return len(self._seen)

    def added(self, key: Hashable, obj: Mapping[str, Any]) -> None:
        uid, rv = _identity(obj)
        self._seen[key] = _Seen(uid, rv, rv)

    def updated(self, key: Hashable, new: Mapping[str, Any], specification_changed: bool) -> None:
        """``new`` replaced the version before it; ``specification_changed`` as the detector's event filter
        decided it (:func:`flotilla.policy.claims.specification_changed`)."""
        uid, rv = _identity(new)
        seen = self._seen.get(key)
        if specification_changed or seen is None or seen.uid != uid:
            self._seen[key] = _Seen(uid, rv, rv)
        else:
            self._seen[key] = _Seen(uid, seen.spec_version, rv)

    def deleted(self, key: Hashable) -> None:
        self._seen.pop(key, None)

    def version_for(self, key: Hashable, template: Mapping[str, Any]) -> str:
        """The resourceVersion a binding of ``template`` names: its newest specification change when the
        informer delivered exactly this version of it, else its own."""
        uid, rv = _identity(template)
        seen = self._seen.get(key)
        if seen is None or seen.uid != uid or seen.latest != rv:
            return rv
        return seen.spec_version
