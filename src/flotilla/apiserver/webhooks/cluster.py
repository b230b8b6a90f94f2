"""Cluster admission: what Karmada's aggregated API server does to ``cluster.karmada.io`` Clusters.

Defaulting (``PrepareForCreate``/``PrepareForUpdate`` and ``Canonicalize`` of Karmada's Cluster
strategy):
  - ``timeAdded`` = now on every NoExecute taint without one;
  - the deprecated ``spec.zone`` moves to ``spec.zones`` when ``zones`` is empty;
  - resource models (gate CustomizedClusterResourceModeling, on by default): on create, the
    default grades when none are given; otherwise models are sorted by grade, the first grade's
    minimums set to 0 and the last grade's maximums to MaxInt64.

Validation (``ValidateCluster``): the name (a DNS-1123 label of at most 48 characters, on create),
``apiEndpoint`` (a URL with a host, no user information, query or fragment), secret references,
``proxyURL`` (http, https or socks5), ``provider``/``region``/``zone``/``zones`` (label values;
``zone`` and ``zones`` not both), taints (key a qualified name, value a label value, effect
NoSchedule or NoExecute - PreferNoSchedule is rejected as Karmada does; unique by key and effect)
and resource models. ``syncMode`` (required, Push or Pull) is an enum of the schema, which the
server checks before admission.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from flotilla.apiserver.admission import Operation
from flotilla.apiserver.objects import now_rfc3339
from flotilla.apiserver.schemas.meta import taint as taint_schema
from flotilla.apiserver.webhooks.common import (
    MAX_INT64,
    MAX_QUANTITY_DIGITS,
    MAX_QUANTITY_EXPONENT,
    GoStruct,
    NoOpPlugin,
    as_dict,
    child,
    duplicate,
    go_quote,
    invalid,
    label_value_errors,
    metadata,
    not_supported,
    objects_of,
    parse_quantity,
    required,
    spec_unchanged,
    validate_label_name,
)
from flotilla.cluster.names import cluster_name_errors
from flotilla.kube.objects import as_int, as_list, as_str
from flotilla.kube.validation import Cause

SUPPORTED_TAINT_EFFECTS = ("NoSchedule", "NoExecute")
_TAINT_SCHEMA = taint_schema()  # corev1.Taint, as Karmada prints a duplicate
_GIB = 1024**3


def _cpu(n: int) -> str:
    return str(n)


def _memory(n_bytes: int) -> str:
    for suffix, factor in (("Ti", 1024**4), ("Gi", _GIB)):
        if n_bytes and n_bytes % factor == 0:
            return f"{n_bytes // factor}{suffix}"
    return str(n_bytes)


def default_resource_models() -> list[dict[str, Any]]:
    """Karmada's ``SetDefaultClusterResourceModels``: 9 grades of cpu (cores) and memory."""
    cpu = [0, 1, 2, 4, 8, 16, 32, 64, 128, MAX_INT64]
    mem = [0, 4 * _GIB, 16 * _GIB, 32 * _GIB, 64 * _GIB, 128 * _GIB, 256 * _GIB, 512 * _GIB, 1024 * _GIB, MAX_INT64]
    return [
        {
            "grade": grade,
            "ranges": [
                {"name": "cpu", "min": _cpu(cpu[grade]), "max": _cpu(cpu[grade + 1])},
                {"name": "memory", "min": _memory(mem[grade]), "max": _memory(mem[grade + 1])},
            ],
        }
        for grade in range(9)
    ]


def standardize_resource_models(models: list[Any]) -> None:
    """Sort by grade; the first grade starts at 0 and the last one ends at MaxInt64."""
    if not models or not all(isinstance(m, dict) for m in models):
        return
    if all(as_int(m.get("grade")) is not None for m in models):
        models.sort(key=lambda m: as_int(m.get("grade")) or 0)
    for r in as_list(models[0].get("ranges")):
        if isinstance(r, dict):
            r["min"] = "0"
    for r in as_list(models[-1].get("ranges")):
        if isinstance(r, dict):
            r["max"] = str(MAX_INT64)


def default_cluster(
    obj: dict[str, Any],
    op: Operation,
    *,
    now: Callable[[], str] = now_rfc3339,
    resource_modeling: bool = True,
) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    stamp = None
    for taint in as_list(spec.get("taints")):
        if isinstance(taint, dict) and taint.get("effect") == "NoExecute" and not taint.get("timeAdded"):
            stamp = stamp or now()
            taint["timeAdded"] = stamp
    if spec.get("zone") and not as_list(spec.get("zones")):
        spec["zones"] = [spec["zone"]]
        spec.pop("zone", None)
    if resource_modeling:
        models = spec.get("resourceModels")
        if op == "CREATE" and not models:
            spec["resourceModels"] = default_resource_models()
        elif isinstance(models, list) and models:
            standardize_resource_models(models)


# ---------------------------------------------------------------------------------------------
# URLs as Go's net/url parses them
# ---------------------------------------------------------------------------------------------

_HOST_OK = re.compile(r"^[A-Za-z0-9\-._~!$&'()*+,;=:\[\]<>\"%]*$")
_USERINFO_OK = re.compile(r"^[A-Za-z0-9\-._~!$&'()*+,;=:%@]*$")


class GoURL:
    def __init__(self, scheme: str, user: str | None, host: str, query: str, fragment: str) -> None:
        self.scheme = scheme
        self.user = user
        self.host = host
        self.query = query
        self.fragment = fragment


def go_url_parse(raw: str) -> tuple[GoURL | None, str | None]:
    """``url.Parse``: the parts Karmada looks at, or the error text (``parse "<raw>": <why>``)."""

    def fail(why: str) -> tuple[None, str]:
        return None, f"parse {go_quote(raw)}: {why}"

    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        return fail("net/url: invalid control character in URL")
    rest, _, fragment = raw.partition("#")
    scheme = ""
    for i, c in enumerate(rest):
        if c.isascii() and c.isalpha():
            continue
        if c.isascii() and (c.isdigit() or c in "+-."):
            if i == 0:
                break
            continue
        if c == ":":
            if i == 0:
                return fail("missing protocol scheme")
            scheme, rest = rest[:i].lower(), rest[i + 1 :]
        break
    query = ""
    if "?" in rest:
        if rest.endswith("?") and rest.count("?") == 1:
            rest = rest[:-1]
        else:
            rest, _, query = rest.partition("?")
    if not rest.startswith("/"):
        if scheme:
            return GoURL(scheme, None, "", query, fragment), None  # opaque: no host
        if ":" in rest.split("/", 1)[0]:
            return fail("first path segment in URL cannot contain colon")
    user = None
    host = ""
    if rest.startswith("//") and (scheme or not rest.startswith("///")):
        authority = rest[2:].split("/", 1)[0]
        userinfo, at, hostport = authority.rpartition("@")
        if at:
            if not _USERINFO_OK.match(userinfo):
                return fail("net/url: invalid userinfo")
            user = userinfo
        else:
            hostport = authority
        if hostport.startswith("["):
            end = hostport.find("]")
            if end < 0:
                return fail("missing ']' in host")
            port = hostport[end + 1 :]
            if port and not re.fullmatch(r":[0-9]*", port):
                return fail(f"invalid port {go_quote(port)} after host")
        elif ":" in hostport:
            port = hostport[hostport.rfind(":") :]
            if not re.fullmatch(r":[0-9]*", port):
                return fail(f"invalid port {go_quote(port)} after host")
        for c in hostport:
            if c.isascii() and not _HOST_OK.match(c):
                return fail(f"invalid character {go_quote(c)} in host name")
        host = hostport
    return GoURL(scheme, user, host, query, fragment), None


def validate_api_endpoint(endpoint: str, path: str) -> list[Cause]:
    form = "; desired format: hostname, hostname:port, IP or IP:port"
    url, err = go_url_parse(endpoint)
    if url is None:
        return [invalid(path, endpoint, f"apiEndpoint must be a valid URL: {err}{form}")]
    causes = []
    if not url.host:
        causes.append(invalid(path, url.host, "host must be provided" + form))
    if url.user is not None:
        causes.append(invalid(path, url.user, "user information is not permitted in the URL"))
    if url.fragment:
        causes.append(invalid(path, url.fragment, "fragments are not permitted in the URL"))
    if url.query:
        causes.append(invalid(path, url.query, "query parameters are not permitted in the URL"))
    return causes


def validate_proxy_url(proxy_url: str, path: str) -> list[Cause]:
    url, err = go_url_parse(proxy_url)
    if url is None:
        return [invalid(path, proxy_url, f"apiEndpoint must be a valid URL: {err}")]
    if url.scheme not in ("http", "https", "socks5"):
        return [invalid(path, proxy_url, f"unsupported scheme {go_quote(url.scheme)}, must be http, https, or socks5")]
    return []


# ---------------------------------------------------------------------------------------------
# Taints and resource models
# ---------------------------------------------------------------------------------------------


def validate_taint(taint: dict[str, Any], path: str, *, effects: tuple[str, ...] = SUPPORTED_TAINT_EFFECTS) -> list[Cause]:
    """Key a qualified name, value a label value, effect required and supported.

    An absent or null ``effect`` is left to the schema check (a required field there), so the server
    reports it once; an empty one is reported here."""
    key = taint.get("key")
    causes = validate_label_name(key, f"{path}.key") if isinstance(key, str) else []
    value = taint.get("value")
    if isinstance(value, str):
        errs = label_value_errors(value)
        if errs:
            causes.append(invalid(f"{path}.value", value, ";".join(errs)))
    effect = taint.get("effect")
    if effect == "":
        causes.append(required(f"{path}.effect"))
    elif isinstance(effect, str) and effect not in effects:
        causes.append(not_supported(f"{path}.effect", effect, effects))
    return causes


def validate_cluster_taints(taints: Any, path: str) -> list[Cause]:
    """Karmada's ``ValidateClusterTaints`` (lifted from Kubernetes' node taint validation)."""
    causes: list[Cause] = []
    seen: set[tuple[str, str]] = set()
    for i, taint in objects_of(taints):
        where = f"{path}[{i}]"
        causes.extend(validate_taint(taint, where))
        pair = (as_str(taint.get("key")), as_str(taint.get("effect")))
        if pair in seen:
            causes.append(duplicate(where, GoStruct(taint, _TAINT_SCHEMA), "taints must be unique by key and effect pair"))
            continue
        seen.add(pair)
    return causes


def validate_resource_models(models: list[Any], path: str) -> list[Cause]:
    """Karmada's ``ValidateClusterResourceModels``: the first problem found, or nothing."""

    def fail(detail: str) -> list[Cause]:
        return [invalid(path, models, detail)]

    typed = [as_dict(m) for m in models]
    for i, model in enumerate(typed):
        ranges = [as_dict(r) for r in as_list(model.get("ranges"))]
        prev_ranges = [as_dict(r) for r in as_list(typed[i - 1].get("ranges"))] if i else []
        if i and model.get("grade") == typed[i - 1].get("grade"):
            return fail("The grade of each models should not be the same")
        if i and len(prev_ranges) != len(ranges):
            return fail("The number of resource types should be the same")
        for j, r in enumerate(ranges):
            lo, hi = parse_quantity(r.get("min")), parse_quantity(r.get("max"))
            for key, parsed in (("min", lo), ("max", hi)):
                if parsed is None and isinstance(r.get(key), str):
                    return [invalid(f"{path}[{i}].ranges[{j}].{key}", r[key], "quantities must match the regular "
                                    "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' (exponent at most "
                                    f"{MAX_QUANTITY_EXPONENT}, at most {MAX_QUANTITY_DIGITS} digits)")]
            if lo is None or hi is None:
                continue  # the schema reports quantities of the wrong type
            if hi <= lo:
                return fail("The max value of each resource must be greater than the min value")
            if i == 0:
                if lo != 0:
                    return fail("The min value of each resource in the first model should be 0")
            elif prev_ranges[j].get("name") != r.get("name"):
                return fail("The resource types of each models should be the same")
            elif parse_quantity(prev_ranges[j].get("max")) != lo:
                return fail("Model intervals for resources must be contiguous and non-overlapping")
            if i == len(typed) - 1 and math.ceil(hi) != MAX_INT64:
                return fail("The max value of each resource in the last model should be MaxInt64")
    return []


def validate_cluster_spec(spec: dict[str, Any], path: str = "spec") -> list[Cause]:
    causes: list[Cause] = []
    endpoint = spec.get("apiEndpoint")
    if isinstance(endpoint, str) and endpoint:
        causes.extend(validate_api_endpoint(endpoint, f"{path}.apiEndpoint"))
    for ref in ("secretRef", "impersonatorSecretRef"):
        secret = child(spec, ref)
        if secret is not None:
            for key in ("namespace", "name"):
                if secret.get(key) == "":
                    causes.append(required(f"{path}.{ref}.{key}"))
    proxy = spec.get("proxyURL")
    if isinstance(proxy, str) and proxy:
        causes.extend(validate_proxy_url(proxy, f"{path}.proxyURL"))
    for key in ("provider", "region"):
        value = spec.get(key)
        if isinstance(value, str) and (errs := label_value_errors(value)):
            causes.append(invalid(f"{path}.{key}", value, "; ".join(errs)))
    zone, zones = as_str(spec.get("zone")), as_list(spec.get("zones"))
    if zone and zones:
        causes.append(invalid(f"{path}.zone", zone, "Zone and Zones cannot co-exist"))
    elif zone:
        if errs := label_value_errors(zone):
            causes.append(invalid(f"{path}.zone", zone, "; ".join(errs)))
    else:
        for i, value in enumerate(zones):
            if isinstance(value, str) and (errs := label_value_errors(value)):
                causes.append(invalid(f"{path}.zones[{i}]", value, "; ".join(errs)))
    causes.extend(validate_cluster_taints(spec.get("taints"), f"{path}.taints"))
    models = spec.get("resourceModels")
    if isinstance(models, list) and models:
        causes.extend(validate_resource_models(models, f"{path}.resourceModels"))
    return causes


class ClusterAdmission(NoOpPlugin):
    def __init__(self, *, now: Callable[[], str] = now_rfc3339, resource_modeling: bool = True) -> None:
        self.now = now
        self.resource_modeling = resource_modeling

    def default(self, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> None:
        if not spec_unchanged(obj, old, op):
            default_cluster(obj, op, now=self.now, resource_modeling=self.resource_modeling)

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> list[Cause]:
        causes: list[Cause] = []
        if op == "CREATE":
            name = as_str(metadata(obj).get("name"))
            causes.extend(invalid("metadata.name", name, m) for m in cluster_name_errors(name))
        spec = obj.get("spec")
        if isinstance(spec, dict) and not spec_unchanged(obj, old, op):
            causes.extend(validate_cluster_spec(spec))
        return causes
