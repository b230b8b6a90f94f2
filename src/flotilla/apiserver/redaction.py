"""What a requester who may not read Secrets is served of the objects that carry a Secret's content.

The read-only roles may not read Secrets, but they read Works (they follow a failover through them), and a Work
holds the manifests it propagates in full: a propagated Secret would be readable, data and all, through its Work.
So for such a requester every read path (get, list, watch events, Table rows) serves a redacted view instead:

* a **Work**: each ``v1 Secret`` in ``spec.workload.manifests`` keeps its keys, but every value of ``data`` and
  ``stringData`` is :data:`REDACTED` (an empty string); its ``kubectl.kubernetes.io/last-applied-configuration``
  annotation and any top-level field a Secret does not have are left out. The ``status`` reflected from a Secret
  (``status.manifestStatuses[*]`` whose identifier is a ``v1 Secret``) is left out too (an interpreter script may
  reflect anything), and so is the Work's own last-applied-configuration when the Work it records held a Secret.
* a **ResourceBinding** / **ClusterResourceBinding** of a ``v1 Secret``: the ``status`` of each
  ``status.aggregatedStatus[*]`` entry is left out, each value of ``preservedLabelState`` (of the graceful
  eviction tasks, taken from that status) is :data:`REDACTED`, and the binding's own last-applied-configuration
  is left out.

Everything else (names, namespaces, labels, other annotations, ``type``, health, conditions) is served as is.

The functions are pure and never change what they are given: the objects served may be shared with the store's
cache and other watchers. An object with nothing to redact is returned itself (no copy); otherwise only the
containers on the way to what is redacted are copied, the rest is shared with the original.

Looking through every Work of a list costs about a microsecond a Work, as much as serializing it. So the HTTP
layer serializes the response first and asks :func:`may_carry_secret` about the bytes (one substring search, in C):
only when they may carry something to redact does it redact the objects and serialize again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

__all__ = [
    "LAST_APPLIED",
    "REDACTED",
    "Redactor",
    "binding_for_viewer",
    "for_requester",
    "is_secret_manifest",
    "may_carry_secret",
    "redact_secret_manifest",
    "redactor_for",
    "work_for_viewer",
]

#: What each value of a Secret's ``data`` and ``stringData`` becomes: empty (valid base64, decodes to nothing).
REDACTED = ""
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

_WORK_GROUP = "work.karmada.io"
_SECRET_API_VERSION = "v1"
_SECRET_KIND = "Secret"
#: The top-level fields of a v1 Secret; others in a Work's manifest are not served redacted.
_SECRET_FIELDS = frozenset({"apiVersion", "kind", "metadata", "type", "immutable", "data", "stringData"})
_VALUE_FIELDS = ("data", "stringData")

Obj = dict[str, Any]
Redactor = Callable[[Obj], Obj]


def is_secret_manifest(manifest: Any) -> bool:
    """Whether a manifest (or a binding's ``spec.resource``) is a core ``v1 Secret``."""
    return (type(manifest) is dict and manifest.get("kind") == _SECRET_KIND
            and manifest.get("apiVersion") == _SECRET_API_VERSION)


def _is_secret_identifier(identifier: Any) -> bool:
    return (type(identifier) is dict and identifier.get("kind") == _SECRET_KIND
            and identifier.get("version") == _SECRET_API_VERSION and not identifier.get("group"))


def _without_last_applied(metadata: Any) -> Any:
    """``metadata`` without the last-applied-configuration annotation (itself when it has none)."""
    if type(metadata) is not dict:
        return metadata
    annotations = metadata.get("annotations")
    if type(annotations) is not dict or LAST_APPLIED not in annotations:
        return metadata
    out = dict(metadata)
    out["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
    return out


def redact_secret_manifest(manifest: Obj) -> Obj:
    """A copy of a Secret manifest with each ``data``/``stringData`` value :data:`REDACTED` (keys kept), without
    its last-applied-configuration annotation and without fields a Secret does not have."""
    out = {k: v for k, v in manifest.items() if k in _SECRET_FIELDS}
    for name in _VALUE_FIELDS:
        values = out.get(name)
        if type(values) is dict:
            out[name] = dict.fromkeys(values, REDACTED)
        elif name in out and values is not None:
            del out[name]  # not an object: nothing of it can be served without its content
    if "metadata" in out:
        out["metadata"] = _without_last_applied(out["metadata"])
    return out


def _applied_work_held_secret(metadata: Obj) -> bool:
    """Whether a Work's own last-applied-configuration annotation records a Work holding a Secret (or cannot be
    read, so it may)."""
    annotations = metadata.get("annotations")
    if type(annotations) is not dict or LAST_APPLIED not in annotations:
        return False
    try:
        applied = orjson.loads(annotations[LAST_APPLIED])
    except (orjson.JSONDecodeError, TypeError):
        return True
    return bool(_secret_ordinals(applied)) or type(applied) is not dict


def _manifests(work: Any) -> list[Any]:
    if type(work) is not dict:
        return []
    spec = work.get("spec")
    workload = spec.get("workload") if type(spec) is dict else None
    manifests = workload.get("manifests") if type(workload) is dict else None
    return manifests if type(manifests) is list else []


def _secret_ordinals(work: Any) -> list[int]:
    return [i for i, m in enumerate(_manifests(work)) if is_secret_manifest(m)]


def _may_hold_secret(work: Obj) -> bool:
    """False when the Work certainly holds nothing of a Secret: the common case, which must cost next to nothing
    (every Work a viewer lists goes through here), hence written out inline."""
    spec = work.get("spec")
    if type(spec) is dict:
        workload = spec.get("workload")
        if type(workload) is dict:
            manifests = workload.get("manifests")
            if type(manifests) is list:
                for m in manifests:
                    if type(m) is dict and m.get("kind") == _SECRET_KIND:
                        return True
    status = work.get("status")
    if type(status) is dict:
        statuses = status.get("manifestStatuses")
        if type(statuses) is list:
            for s in statuses:
                if type(s) is dict:
                    identifier = s.get("identifier")
                    if type(identifier) is dict and identifier.get("kind") == _SECRET_KIND:
                        return True
    metadata = work.get("metadata")
    if type(metadata) is dict:
        annotations = metadata.get("annotations")
        if type(annotations) is dict and LAST_APPLIED in annotations:
            return True
    return False


def work_for_viewer(work: Obj) -> Obj:
    """The Work as a requester who may not read Secrets is served it (itself when it holds no Secret)."""
    if not _may_hold_secret(work):
        return work
    secrets = _secret_ordinals(work)
    status = work.get("status")
    statuses = status.get("manifestStatuses") if type(status) is dict else None
    reflected = ([i for i, s in enumerate(statuses) if type(s) is dict and "status" in s
                  and _is_secret_identifier(s.get("identifier"))] if type(statuses) is list else [])
    metadata = work.get("metadata")
    own_applied = type(metadata) is dict and (bool(secrets) or _applied_work_held_secret(metadata))
    if not secrets and not reflected and not own_applied:
        return work
    out = dict(work)
    if secrets:
        manifests = list(_manifests(work))
        for i in secrets:
            manifests[i] = redact_secret_manifest(manifests[i])
        out["spec"] = spec = dict(work["spec"])
        spec["workload"] = {**spec["workload"], "manifests": manifests}
    if reflected:
        assert type(statuses) is list and type(status) is dict
        entries = list(statuses)
        for i in reflected:
            entries[i] = {k: v for k, v in entries[i].items() if k != "status"}
        out["status"] = {**status, "manifestStatuses": entries}
    if own_applied:
        out["metadata"] = _without_last_applied(metadata)
    return out


def binding_for_viewer(binding: Obj) -> Obj:
    """A (Cluster)ResourceBinding as a requester who may not read Secrets is served it: itself unless it binds a
    Secret."""
    spec = binding.get("spec")
    if type(spec) is not dict or not is_secret_manifest(spec.get("resource")):
        return binding
    out = dict(binding)
    out["metadata"] = _without_last_applied(binding.get("metadata"))
    tasks = spec.get("gracefulEvictionTasks")
    if type(tasks) is list and any(type(t) is dict and type(t.get("preservedLabelState")) is dict for t in tasks):
        out["spec"] = {**spec, "gracefulEvictionTasks": [
            {**t, "preservedLabelState": dict.fromkeys(t["preservedLabelState"], REDACTED)}
            if type(t) is dict and type(t.get("preservedLabelState")) is dict else t
            for t in tasks]}
    status = binding.get("status")
    aggregated = status.get("aggregatedStatus") if type(status) is dict else None
    if type(status) is dict and type(aggregated) is list:
        out["status"] = {**status, "aggregatedStatus": [
            {k: v for k, v in item.items() if k != "status"} if type(item) is dict else item
            for item in aggregated]}
    return out


_REDACTORS: dict[tuple[str, str], Redactor] = {
    (_WORK_GROUP, "Work"): work_for_viewer,
    (_WORK_GROUP, "ResourceBinding"): binding_for_viewer,
    (_WORK_GROUP, "ClusterResourceBinding"): binding_for_viewer,
}


def may_carry_secret(serialized: bytes) -> bool:
    """False when JSON bytes, as orjson writes them, certainly hold nothing :func:`for_requester` would redact.

    Everything redacted is reached through the string ``Secret`` (a manifest's, an identifier's or a binding's
    resource's kind; what a last-applied-configuration annotation records), and orjson writes letters as they
    are. Only JSON held in a string may spell it otherwise, with ``\\u`` escapes (``\\u0053ecret``), which orjson
    writes as ``\\\\u``: then it answers True as well. (A single byte is searched for first, which is several times
    faster than a longer string, and many bodies hold no backslash at all.)
    """
    return b"Secret" in serialized or (b"\\" in serialized and b"\\\\u" in serialized)


def redactor_for(group: str, kind: str) -> Redactor | None:
    """The redaction of a kind whose objects may carry a Secret's content; None for every other kind."""
    return _REDACTORS.get((group, kind))


def for_requester(group: str, kind: str, obj: Obj, *, may_read_secrets: bool) -> Obj:
    """The object to serve: ``obj`` itself to a requester who may read Secrets or when nothing in it is a
    Secret's content, else a redacted copy (``obj`` is never changed)."""
    if may_read_secrets:
        return obj
    redact = redactor_for(group, kind)
    return obj if redact is None else redact(obj)
