"""The set of resource types the server serves right now: built-ins plus those CRDs define."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from flotilla.apiserver.resource_types import ResourceType

_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key: v2 < v1 < v1beta2 < v1beta1 < v1alpha1 < anything else (by name)."""
    m = _VERSION.match(version)
    if not m:
        return (3, 0, 0, version)
    major, stage, minor = int(m.group(1)), m.group(2), int(m.group(3) or 0)
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -major, -minor, version)


class TypeRegistry:
    def __init__(self, types: Iterable[ResourceType] = ()) -> None:
        self._by_resource: dict[tuple[str, str, str], ResourceType] = {}
        self._by_kind: dict[tuple[str, str, str], ResourceType] = {}
        self._group_order: list[str] = []
        self.generation = 0
        for rt in types:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        key = (rt.group, rt.version, rt.plural)
        old = self._by_resource.get(key)
        if old is not None:
            self._by_kind.pop((old.group, old.version, old.kind), None)
        self._by_resource[key] = rt
        self._by_kind[(rt.group, rt.version, rt.kind)] = rt
        if rt.group not in self._group_order:
            self._group_order.append(rt.group)
        self.generation += 1

    def remove_group_resource(self, group: str, plural: str) -> list[ResourceType]:
        gone = [rt for rt in self._by_resource.values() if rt.group == group and rt.plural == plural]
        for rt in gone:
            del self._by_resource[(rt.group, rt.version, rt.plural)]
            self._by_kind.pop((rt.group, rt.version, rt.kind), None)
        if gone:
            self.generation += 1
            if not any(rt.group == group for rt in self._by_resource.values()):
                self._group_order.remove(group)
        return gone

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_resource.get((group, version, plural))

    def by_kind(self, group: str, version: str, kind: str) -> ResourceType | None:
        return self._by_kind.get((group, version, kind))

    def all(self) -> list[ResourceType]:
        return list(self._by_resource.values())

    def groups(self) -> list[str]:
        """Group names in registration order (core group "" included if served)."""
        return list(self._group_order)

    def versions(self, group: str) -> list[str]:
        """The group's versions, preferred first (Kubernetes order: GA > beta > alpha, newer first)."""
        seen: list[str] = []
        for rt in self._by_resource.values():
            if rt.group == group and rt.version not in seen:
                seen.append(rt.version)
        return sorted(seen, key=version_priority)

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for rt in self._by_resource.values() if rt.group == group and rt.version == version]

    def namespaced_types(self) -> list[ResourceType]:
        return [rt for rt in self._by_resource.values() if rt.namespaced]

    def etag(self) -> str:
        h = hashlib.sha256()
        for (g, v, p), rt in sorted(self._by_resource.items()):
            h.update(f"{g}/{v}/{p}/{rt.kind}/{rt.namespaced}/{len(rt.schema)};".encode())
        h.update(str(self.generation).encode())
        return h.hexdigest()[:32]
