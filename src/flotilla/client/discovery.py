"""A REST mapper: (apiVersion, kind) or (group, version, plural) to a Resource, from legacy discovery.

Group-versions are fetched lazily (``/api/v1``, ``/apis/<g>/<v>``), cached, and fetched again when a lookup
misses: a CRD's kinds appear as soon as the server lists them. ``/api`` and ``/apis`` are only read for the
preferred version of a group.
"""

from __future__ import annotations

import asyncio
from typing import Any

from flotilla.client.errors import ApiException, is_not_found
from flotilla.client.transport import Transport
from flotilla.kube.resources import Resource, api_path, group_version

__all__ = ["RESTMapper"]


def _split(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


class RESTMapper:
    def __init__(self, transport: Transport) -> None:
        self._t = transport
        # group-version -> {"kinds": {kind: Resource}, "plurals": {plural: Resource}}
        self._gv: dict[str, tuple[dict[str, Resource], dict[str, Resource]]] = {}
        self._inflight: dict[str, asyncio.Future[None]] = {}
        self._groups: dict[str, list[str]] | None = None

    def invalidate(self) -> None:
        self._gv.clear()
        self._groups = None

    async def _fetch(self, group: str, version: str) -> None:
        gv = group_version(group, version)
        pending = self._inflight.get(gv)
        if pending is not None:  # one request for concurrent misses
            await asyncio.wait((pending,))
            if pending.cancelled():  # the task that was fetching went away: fetch ourselves
                return await self._fetch(group, version)
            err = pending.exception()
            if err is not None:
                raise err
            return None
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._inflight[gv] = fut
        try:
            try:
                doc = await self._t.discovery(api_path(group, version))
            except ApiException as e:
                if not is_not_found(e):
                    raise
                self._gv.pop(gv, None)
            else:
                self._gv[gv] = _parse(group, version, doc)
            fut.set_result(None)
        except asyncio.CancelledError:
            fut.cancel()
            raise
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # consumed here; waiters re-raise it
            raise
        finally:
            del self._inflight[gv]

    async def _lookup(self, group: str, version: str, name: str, *, plural: bool) -> Resource | None:
        """The group version's resource of kind (or, with ``plural``, of plural) ``name``; the group version is
        fetched again once when it does not know the name (yet)."""
        gv = group_version(group, version)
        for attempt in range(2):
            entry = self._gv.get(gv)
            by_name = entry[1 if plural else 0] if entry is not None else {}
            if name in by_name:
                return by_name[name]
            if attempt == 0:
                await self._fetch(group, version)
        return None

    async def resource_for(self, api_version: str, kind: str) -> Resource:
        """The collection serving ``kind`` in ``api_version`` (e.g. ``apps/v1``, ``Deployment``)."""
        group, version = _split(api_version)
        found = await self._lookup(group, version, kind, plural=False)
        if found is None:
            raise ApiException(404, "NotFound", f'no matches for kind "{kind}" in version "{api_version}"')
        return found

    async def resource(self, group: str, version: str, plural: str) -> Resource:
        found = await self._lookup(group, version, plural, plural=True)
        if found is None:
            gv = group_version(group, version)
            raise ApiException(404, "NotFound", f'the server does not serve resource "{plural}" in "{gv}"')
        return found

    async def preferred_version(self, group: str) -> str:
        """The server's preferred version of ``group`` ("" is the core group)."""
        for attempt in range(2):
            if self._groups is not None and group in self._groups:
                return self._groups[group][0]
            if attempt == 0:
                await self._fetch_groups()
        raise ApiException(404, "NotFound", f'the server does not serve the API group "{group}"')

    async def _fetch_groups(self) -> None:
        groups: dict[str, list[str]] = {}
        try:
            core = await self._t.discovery("/api")
            groups[""] = list(core.get("versions") or [])
        except ApiException as e:
            if not is_not_found(e):
                raise
        doc = await self._t.discovery("/apis")
        for g in doc.get("groups") or []:
            versions = [v.get("version") for v in g.get("versions") or [] if v.get("version")]
            preferred = (g.get("preferredVersion") or {}).get("version")
            if preferred in versions:
                versions.remove(preferred)
                versions.insert(0, preferred)
            if versions:
                groups[g.get("name", "")] = versions
        self._groups = {g: v for g, v in groups.items() if v}


def _parse(group: str, version: str, doc: dict[str, Any]) -> tuple[dict[str, Resource], dict[str, Resource]]:
    kinds: dict[str, Resource] = {}
    plurals: dict[str, Resource] = {}
    for r in doc.get("resources") or []:
        name = r.get("name") or ""
        if not name or "/" in name:  # subresources are reached through their parent
            continue
        res = Resource(group, version, name, r.get("kind") or "", bool(r.get("namespaced")))
        plurals[name] = res
        kinds.setdefault(res.kind, res)
    return kinds, plurals
