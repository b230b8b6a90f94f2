"""Read your own writes through an informer cache (pure bookkeeping, no I/O).

A controller that writes an object and looks at it again shortly after reads its informer cache, which may not
have received its own write yet. Computing the next write from that stale copy costs a 409 (the resourceVersion
precondition no longer matches), a GET and a second attempt; on a busy control plane most consecutive writes of
one controller to one object went that way (the work-status controller's ``manifestStatuses``, the binding
status controller's ``aggregatedStatus``).

:class:`WrittenObjects` remembers, per object key, the object a write returned and the resourceVersion it was
written over. :meth:`WrittenObjects.fresh` gives the cached object, unless the cache still shows exactly the
version this controller replaced, in which case the object as written is newer and is returned instead. When the
cache shows anything else (it caught up, or someone else wrote since), the cache wins and the record is dropped.
No resourceVersion is ever compared for order: only for equality, as the API allows.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

__all__ = ["WrittenObjects"]


def _rv(obj: Mapping[str, Any] | None) -> Any:
    md = obj.get("metadata") if type(obj) is dict or isinstance(obj, Mapping) else None
    return md.get("resourceVersion") if type(md) is dict or isinstance(md, Mapping) else None


class WrittenObjects:
    """The last object each key was written as, with the resourceVersion it replaced (bounded, LRU)."""

    def __init__(self, size: int = 2048) -> None:
        self.size = max(1, size)
        self._written: OrderedDict[str, tuple[Any, dict[str, Any]]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._written)

    def record(self, key: str, replaced: Mapping[str, Any] | str | None, written: Mapping[str, Any] | None) -> None:
        """``written`` (the API server's answer) replaced the version ``replaced`` (an object or its
        resourceVersion). Nothing is kept when either is unknown."""
        before = replaced if isinstance(replaced, str) else _rv(replaced)
        if not before or not isinstance(written, Mapping) or not _rv(written) or _rv(written) == before:
            self._written.pop(key, None)
            return
        self._written[key] = (before, dict(written))
        self._written.move_to_end(key)
        while len(self._written) > self.size:
            self._written.popitem(last=False)

    def fresh(self, key: str, cached: Mapping[str, Any] | None) -> Any:
        """The object to decide on: ``cached``, or what this controller wrote when the cache has not seen it."""
        entry = self._written.get(key)
        if entry is None:
            return cached
        before, written = entry
        if cached is not None and _rv(cached) == before:
            return written
        del self._written[key]  # the cache caught up (or the object changed or went since): trust it
        return cached

    def wrote(self, key: str, obj: Mapping[str, Any] | None) -> bool:
        """Whether ``obj`` is the version this controller wrote last (an informer's echo of its own write)."""
        entry = self._written.get(key)
        return entry is not None and obj is not None and bool(_rv(obj)) and _rv(entry[1]) == _rv(obj)

    def forget(self, key: str) -> None:
        self._written.pop(key, None)
