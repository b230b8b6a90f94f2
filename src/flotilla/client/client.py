"""The async Kubernetes client: CRUD, patch, watch and discovery over HTTP or in-process.

Objects are plain dicts (unknown fields round-trip). Errors are ApiException (see ``flotilla.client.errors``).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from flotilla.client.discovery import RESTMapper
from flotilla.client.errors import ApiException, is_not_found
from flotilla.client.http import HttpTransport
from flotilla.client.kubeconfig import ClusterCredentials, load_kubeconfig
from flotilla.client.transport import PATCH_CONTENT_TYPES, Transport, WatchStream
from flotilla.kube.resources import Resource

__all__ = ["Client"]


def _query(params: dict[str, str]) -> dict[str, str]:
    """The query parameters that are set (an empty value is left out)."""
    return {key: value for key, value in params.items() if value}


def _name_of(obj: dict[str, Any]) -> tuple[str | None, str]:
    md = obj.get("metadata") or {}
    name = md.get("name")
    if not name:
        raise ValueError("the object has no metadata.name")
    return md.get("namespace") or None, str(name)


class Client:
    """One connection (pool) to one API server. Use ``async with`` or call ``close()``."""

    def __init__(self, transport: Transport, *, namespace: str = "default") -> None:
        self.transport = transport
        self.mapper = RESTMapper(transport)
        #: the kubeconfig context's namespace; never applied implicitly, for callers that want a default
        self.namespace = namespace

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_kubeconfig(
        cls,
        path_or_dict: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        context: str | None = None,
        *,
        request_timeout: float = 30.0,
        connection_limit: int = 256,
        read_retries: int = 3,
    ) -> Client:
        """A client for a kubeconfig file (None: ``$KUBECONFIG`` or ``~/.kube/config``) or an already parsed one."""
        if isinstance(path_or_dict, Mapping):
            with tempfile.TemporaryDirectory(prefix="flotilla-kubeconfig-") as d:
                p = Path(d) / "config"
                fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    yaml.safe_dump(dict(path_or_dict), f)
                creds = load_kubeconfig(p, context)
        else:
            creds = load_kubeconfig(path_or_dict, context)
        return cls.from_credentials(creds, request_timeout=request_timeout, connection_limit=connection_limit,
                                    read_retries=read_retries)

    @classmethod
    def from_credentials(cls, creds: ClusterCredentials, *, request_timeout: float = 30.0,
                         connection_limit: int = 256, read_retries: int = 3) -> Client:
        def http(server: str) -> HttpTransport:
            return HttpTransport(dataclasses.replace(creds, server=server, fallback_servers=()),
                                 request_timeout=request_timeout, connection_limit=connection_limit,
                                 read_retries=read_retries)

        if creds.fallback_servers:  # HA: several API server replicas
            from flotilla.client.multiserver import MultiServerTransport

            return cls(MultiServerTransport([http(s) for s in (creds.server, *creds.fallback_servers)]),
                       namespace=creds.namespace)
        return cls(http(creds.server), namespace=creds.namespace)

    @property
    def server(self) -> str:
        return self.transport.server

    async def close(self) -> None:
        await self.transport.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ discovery
    async def resource_for(self, api_version: str, kind: str) -> Resource:
        return await self.mapper.resource_for(api_version, kind)

    async def resource(self, group: str, version: str, plural: str) -> Resource:
        return await self.mapper.resource(group, version, plural)

    async def resource_for_object(self, obj: dict[str, Any]) -> Resource:
        return await self.mapper.resource_for(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))

    # ------------------------------------------------------------------ verbs
    @staticmethod
    def _ns(res: Resource, namespace: str | None, *, required: bool) -> str | None:
        if not res.namespaced:
            return None
        if required and not namespace:
            raise ValueError(f"a namespace is required for the namespaced resource {res.plural}")
        return namespace or None

    @staticmethod
    def _write_query(field_manager: str, dry_run: bool, force: bool = False) -> dict[str, str]:
        return _query(
            {"fieldManager": field_manager, "dryRun": "All" if dry_run else "", "force": "true" if force else ""}
        )

    async def get(self, res: Resource, name: str, namespace: str | None = None, *,
                  subresource: str | None = None, resource_version: str = "") -> dict[str, Any]:
        """The object. ``resource_version="0"``: any version the server holds (possibly stale), without a read
        from its storage; what a write guarded by the resourceVersion may start from."""
        return await self.transport.get(res, self._ns(res, namespace, required=True), name, subresource,
                                        resource_version=resource_version)

    async def get_or_none(self, res: Resource, name: str, namespace: str | None = None, *,
                          resource_version: str = "") -> dict[str, Any] | None:
        """:meth:`get`, or None when the object does not exist (404); other errors are raised."""
        try:
            return await self.get(res, name, namespace, resource_version=resource_version)
        except ApiException as e:
            if is_not_found(e):
                return None
            raise

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 0,
        continue_: str = "",
        resource_version: str = "",
        resource_version_match: str = "",
    ) -> dict[str, Any]:
        """One page of the collection (all namespaces when ``namespace`` is None): the List object."""
        q = _query({
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "limit": str(limit) if limit else "",
            "continue": continue_,
            "resourceVersion": resource_version,
            "resourceVersionMatch": resource_version_match,
        })
        return await self.transport.list(res, self._ns(res, namespace, required=False), q)

    async def create(self, res: Resource, obj: dict[str, Any], namespace: str | None = None, *,
                     field_manager: str = "", dry_run: bool = False) -> dict[str, Any]:
        """Create ``obj`` (namespace: the argument, else ``obj.metadata.namespace``)."""
        ns = namespace or (obj.get("metadata") or {}).get("namespace")
        return await self.transport.create(res, self._ns(res, ns, required=True), obj,
                                           self._write_query(field_manager, dry_run))

    async def update(self, res: Resource, obj: dict[str, Any], *, subresource: str | None = None,
                     field_manager: str = "", dry_run: bool = False) -> dict[str, Any]:
        """PUT ``obj`` (its ``metadata.resourceVersion``, if set, is the optimistic lock)."""
        ns, name = _name_of(obj)
        return await self.transport.update(res, self._ns(res, ns, required=True), name, obj, subresource,
                                           self._write_query(field_manager, dry_run))

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: str = "merge",
        subresource: str | None = None,
        field_manager: str = "",
        force: bool = False,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """``patch_type``: merge | json | strategic | apply (server-side apply needs ``field_manager``)."""
        content_type = PATCH_CONTENT_TYPES.get(patch_type, patch_type)
        return await self.transport.patch(res, self._ns(res, namespace, required=True), name, patch, content_type,
                                          subresource, self._write_query(field_manager, dry_run, force))

    @staticmethod
    def _delete_options(propagation_policy: str | None, preconditions: dict[str, str] | None,
                        grace_period_seconds: int | None, dry_run: bool) -> dict[str, Any]:
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if preconditions:
            options["preconditions"] = dict(preconditions)
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if dry_run:
            options["dryRun"] = ["All"]
        return options

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str | None = None,
        preconditions: dict[str, str] | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Delete; returns the server's answer: a Success Status, or the object while finalizers hold it."""
        options = self._delete_options(propagation_policy, preconditions, grace_period_seconds, dry_run)
        return await self.transport.delete(res, self._ns(res, namespace, required=True), name, options,
                                           self._write_query("", dry_run))

    async def delete_collection(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        propagation_policy: str | None = None,
    ) -> dict[str, Any]:
        q = _query({"labelSelector": label_selector, "fieldSelector": field_selector})
        options = self._delete_options(propagation_policy, None, None, False)
        return await self.transport.delete_collection(res, self._ns(res, namespace, required=False), options, q)

    def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str = "",
        label_selector: str = "",
        field_selector: str = "",
        allow_bookmarks: bool = True,
        timeout_seconds: float | None = None,
    ) -> WatchStream:
        """An async iterator of WatchEvent(type, object); connects on the first read.

        ``resource_version`` "" (or "0") starts with a synthetic ADDED per existing object; "N" delivers changes
        after N. ERROR events raise ApiException (``is_gone``: re-list). Ends when the server ends the watch.
        Use ``async with client.watch(...) as w`` (or ``aclose()``) to release the connection early.
        """
        q = _query({
            "resourceVersion": resource_version,
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "allowWatchBookmarks": "true" if allow_bookmarks else "",
            "timeoutSeconds": str(max(1, int(timeout_seconds))) if timeout_seconds is not None else "",
        })
        return self.transport.watch(res, self._ns(res, namespace, required=False), q)
