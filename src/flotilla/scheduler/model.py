"""Typed, immutable inputs and outputs of the scheduler, parsed from plain Karmada dicts.

Everything here is pure data. The ``parse_*`` functions accept the JSON shapes of the Karmada API
(``cluster.karmada.io/v1alpha1`` Cluster, ``policy.karmada.io/v1alpha1`` Placement,
``work.karmada.io/v1alpha2`` ResourceBinding spec and status) and keep only what scheduling needs.

Placement normalisation (what Karmada's webhooks do before the scheduler ever sees a placement, and
what the scheduler itself assumes) is applied while parsing, and is idempotent:

* no ``replicaScheduling`` means Duplicated;
* ``replicaScheduling`` with an empty ``replicaSchedulingType`` means Divided;
* Divided with an empty ``replicaDivisionPreference`` means Weighted;
* a spread constraint with neither ``spreadByField`` nor ``spreadByLabel`` spreads by ``cluster``;
  ``minGroups`` 0 becomes 1 (``maxGroups`` has no default).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from fractions import Fraction
from functools import cached_property, lru_cache
from typing import Any, TypeVar

from flotilla.kube.selectors import LabelSelector, SelectorError, label_selector_from_dict
from flotilla.kube.times import parse_time as kube_parse_time

from .errors import ModelError

__all__ = [
    "MAX_INT32",
    "NO_EXECUTE",
    "NO_SCHEDULE",
    "PREFER_NO_SCHEDULE",
    "APIEnablement",
    "Component",
    "BindingSpec",
    "BindingStatus",
    "Cluster",
    "ClusterAffinity",
    "ClusterAffinityTerm",
    "FieldRequirement",
    "GracefulEvictionTask",
    "Placement",
    "ReplicaRequirements",
    "ReplicaScheduling",
    "ResourceRef",
    "ResourceSummary",
    "SpreadConstraint",
    "StaticWeight",
    "Strategy",
    "Taint",
    "TargetCluster",
    "Toleration",
    "WeightPreference",
    "milli_value",
    "parse_binding",
    "parse_binding_spec",
    "parse_binding_status",
    "parse_cluster",
    "parse_clusters",
    "parse_placement",
    "parse_quantity",
    "parse_time",
    "quantity_value",
    "target_clusters_from",
]

MAX_INT32 = 2**31 - 1

# Taint effects and well-known values.
NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"


class Strategy(StrEnum):
    """How replicas are assigned (Karmada's ``assignFuncMap`` keys)."""

    DUPLICATED = "Duplicated"
    STATIC_WEIGHT = "StaticWeight"
    DYNAMIC_WEIGHT = "DynamicWeight"
    AGGREGATED = "Aggregated"


# ------------------------------------------------------------------------------------------------
# Small parsing helpers
# ------------------------------------------------------------------------------------------------


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if type(value) is not dict and not isinstance(value, Mapping):
        raise ModelError(f"{where}: must be an object")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise ModelError(f"{where}: must be a list")
    return list(value)


def _str(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ModelError(f"{where}: must be a string")
    return value


def _int(value: Any, where: str, default: int = 0) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ModelError(f"{where}: must be an integer")
    return value


def _opt_int(value: Any, where: str) -> int | None:
    if value is None:
        return None
    return _int(value, where)


def _strings(value: Any, where: str) -> tuple[str, ...]:
    return tuple(_str(v, f"{where}[{i}]") for i, v in enumerate(_list(value, where)))


def parse_time(value: Any, where: str = "time") -> datetime | None:
    """Parse an RFC 3339 timestamp (``metav1.Time``) into an aware UTC datetime; ``None`` stays ``None``.

    A ``datetime`` is accepted as is (a naive one is taken as UTC).
    """
    if value is None or value == "":
        return None
    parsed = kube_parse_time(value)
    if parsed is not None:
        return parsed
    if not isinstance(value, str):
        raise ModelError(f"{where}: must be an RFC 3339 timestamp")
    raise ModelError(f"{where}: {value!r} is not an RFC 3339 timestamp")


T = TypeVar("T")


class _Fields:
    """The fields of one object read by type; an error names the field as ``<where>.<key>``."""

    __slots__ = ("d", "where")

    def __init__(self, value: Any, where: str) -> None:
        self.d = _mapping(value, where)
        self.where = where

    def text(self, key: str) -> str:
        return _str(self.d.get(key), f"{self.where}.{key}")

    def number(self, key: str) -> int:
        return _int(self.d.get(key), f"{self.where}.{key}")

    def optional_number(self, key: str) -> int | None:
        return _opt_int(self.d.get(key), f"{self.where}.{key}")

    def texts(self, key: str) -> tuple[str, ...]:
        return _strings(self.d.get(key), f"{self.where}.{key}")

    def time(self, key: str) -> datetime | None:
        return parse_time(self.d.get(key), f"{self.where}.{key}")

    def resources(self, key: str) -> dict[str, Fraction] | None:
        return _resource_list(self.d.get(key), f"{self.where}.{key}")

    def each(self, key: str, parse: Callable[[Any, str], T]) -> tuple[T, ...]:
        """``parse(item, "<where>.<key>[i]")`` for each item of the list at ``key``."""
        where = f"{self.where}.{key}"
        return tuple(parse(item, f"{where}[{i}]") for i, item in enumerate(_list(self.d.get(key), where)))


# ------------------------------------------------------------------------------------------------
# Quantities (k8s.io/apimachinery resource.Quantity), exact
# ------------------------------------------------------------------------------------------------

_QUANTITY_RE = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(.*)$")
_BINARY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_SUFFIXES = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_EXPONENT_RE = re.compile(r"^[eE]([+-]?[0-9]+)$")


def parse_quantity(value: Any, where: str = "quantity") -> Fraction:
    """Parse a Kubernetes quantity (``"500m"``, ``"1Gi"``, ``"2"``, ``"1e3"``, or a JSON number) exactly."""
    if type(value) is str:
        try:
            return _parse_quantity_text(value)
        except _NotAQuantity as e:
            raise ModelError(f"{where}: {value!r} {e}") from None
    if isinstance(value, bool):
        raise ModelError(f"{where}: {value!r} is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ModelError(f"{where}: {value!r} is not a quantity")
        return Fraction(str(value))
    if not isinstance(value, str):
        raise ModelError(f"{where}: {value!r} is not a quantity")
    try:
        return _parse_quantity_string(value)
    except _NotAQuantity as e:
        raise ModelError(f"{where}: {value!r} {e}") from None


class _NotAQuantity(Exception):
    """Why a string is not a quantity (the end of :class:`ModelError`'s message); never cached."""


def _parse_quantity_string(value: str) -> Fraction:
    match = _QUANTITY_RE.match(value.strip())
    if match is None:
        raise _NotAQuantity("is not a quantity")
    if len(match.group(1)) > 1000:  # Python refuses to parse integers of more than 4300 digits
        raise _NotAQuantity("has too many digits")
    number = Fraction(match.group(1))
    suffix = match.group(2)
    if suffix in _BINARY_SUFFIXES:
        return number * _BINARY_SUFFIXES[suffix]
    if suffix in _DECIMAL_SUFFIXES:
        return number * _DECIMAL_SUFFIXES[suffix]
    exponent = _EXPONENT_RE.match(suffix)
    if exponent is not None:
        power = exponent.group(1)
        if len(power.lstrip("+-").lstrip("0")) > 4 or abs(int(power)) > 1000:  # 10**1e9 would never finish
            raise _NotAQuantity("has an exponent out of range")
        return number * Fraction(10) ** int(power)
    raise _NotAQuantity("is not a quantity")


#: the same few quantity strings ("100m", "1Gi", ...) come back again and again; a Fraction is immutable, and a
#: string that is not a quantity raises, which lru_cache does not remember
_parse_quantity_text = lru_cache(maxsize=1024)(_parse_quantity_string)


def _round_away_from_zero(value: Fraction) -> int:
    return math.ceil(value) if value >= 0 else math.floor(value)


def quantity_value(q: Fraction) -> int:
    """``Quantity.Value()``: the value rounded up, away from zero, to an integer."""
    return _round_away_from_zero(q)


def milli_value(q: Fraction) -> int:
    """``Quantity.MilliValue()``: the value in thousandths, rounded away from zero."""
    return _round_away_from_zero(q * 1000)


def _resource_list(value: Any, where: str) -> dict[str, Fraction] | None:
    if value is None:
        return None
    return {str(k): parse_quantity(v, f"{where}.{k}") for k, v in _mapping(value, where).items()}


# ------------------------------------------------------------------------------------------------
# Cluster
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Taint:
    key: str
    effect: str
    value: str = ""
    time_added: datetime | None = None

    def __str__(self) -> str:
        """``corev1.Taint.ToString()``: ``key=value:effect``, or ``key:effect`` without a value."""
        if self.value:
            return f"{self.key}={self.value}:{self.effect}"
        return f"{self.key}:{self.effect}"

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "taint") -> Taint:
        f = _Fields(d, where)
        return cls(key=f.text("key"), effect=f.text("effect"), value=f.text("value"), time_added=f.time("timeAdded"))


@dataclass(frozen=True)
class Toleration:
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """``corev1.Toleration.ToleratesTaint`` with the comparison operators disabled (as in Karmada).

        The one rule, shared with the taint manager: :func:`flotilla.kube.taints.tolerates`.
        """
        from flotilla.kube.taints import tolerates

        return tolerates(self, taint)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "toleration") -> Toleration:
        f = _Fields(d, where)
        return cls(key=f.text("key"), operator=f.text("operator"), value=f.text("value"), effect=f.text("effect"),
                   toleration_seconds=f.optional_number("tolerationSeconds"))


@dataclass(frozen=True)
class APIEnablement:
    group_version: str
    kinds: frozenset[str]


@dataclass(frozen=True)
class ResourceSummary:
    """``status.resourceSummary``; each list maps a resource name to an exact quantity (``None`` if absent)."""

    allocatable: Mapping[str, Fraction] | None = None
    allocated: Mapping[str, Fraction] | None = None
    allocating: Mapping[str, Fraction] | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "resourceSummary") -> ResourceSummary:
        f = _Fields(d, where)
        return cls(allocatable=f.resources("allocatable"), allocated=f.resources("allocated"),
                   allocating=f.resources("allocating"))


def _pods(resources: Mapping[str, Fraction] | None) -> int:
    if not resources or "pods" not in resources:
        return 0
    return quantity_value(resources["pods"])


@dataclass(frozen=True)
class Cluster:
    """What the scheduler reads of a ``cluster.karmada.io/v1alpha1`` Cluster."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    provider: str = ""
    region: str = ""
    zones: tuple[str, ...] = ()
    taints: tuple[Taint, ...] = ()
    api_enablements: tuple[APIEnablement, ...] = ()
    complete_api_enablements: bool = False
    resource_summary: ResourceSummary | None = None
    deleting: bool = False

    @cached_property
    def pods_left(self) -> int | None:
        """``allocatable.pods - allocated.pods - allocating.pods`` of the resource summary (None without
        one); computed once per parsed Cluster, which the scheduler keeps while the object is unchanged."""
        summary = self.resource_summary
        if summary is None:
            return None
        return _pods(summary.allocatable) - _pods(summary.allocated) - _pods(summary.allocating)

    @cached_property
    def _api_answers(self) -> dict[tuple[str, str], str]:
        """The answers of :meth:`api_enabled` so far (a parsed Cluster never changes; the scheduler asks
        the same question of every cluster for every binding it schedules)."""
        return {}

    def api_enabled(self, api_version: str, kind: str) -> str:
        """``Cluster.APIEnablement(gvk)``: ``"Enabled"``, ``"Disabled"`` or ``"Unknown"``."""
        answers = self._api_answers
        answer = answers.get((api_version, kind))
        if answer is None:
            answer = answers[(api_version, kind)] = self._api_enablement(api_version, kind)
        return answer

    def _api_enablement(self, api_version: str, kind: str) -> str:
        group_version = _canonical_group_version(api_version)
        for enablement in self.api_enablements:
            if enablement.group_version == group_version and kind in enablement.kinds:
                return "Enabled"
        return "Disabled" if self.complete_api_enablements else "Unknown"

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> Cluster:
        return parse_cluster(obj)


def _canonical_group_version(api_version: str) -> str:
    """``schema.ParseGroupVersion(v).String()`` for well-formed input: ``"v1"``, ``"apps/v1"``."""
    if "/" not in api_version:
        return api_version
    group, _, version = api_version.partition("/")
    return version if group == "" else f"{group}/{version}"


def parse_cluster(obj: Mapping[str, Any] | Cluster,
                  previous: tuple[Mapping[str, Any], Cluster] | None = None) -> Cluster:
    """Parse a Cluster object (``{metadata, spec, status}``).

    ``previous`` is an earlier version of the same Cluster and its parse: the parts of the status whose raw value
    is equal to it there (the API enablements, the resource summary) are taken from that parse instead of being
    parsed again. A member's status is written every time its resource summary moves, its API enablements almost
    never change, and they are most of the parse.
    """
    if isinstance(obj, Cluster):
        return obj
    obj = _mapping(obj, "cluster")
    before = previous[0].get("status") if previous is not None else None
    if not isinstance(before, Mapping):
        before = {}
    meta = _mapping(obj.get("metadata"), "metadata")
    name = _str(meta.get("name"), "metadata.name")
    if not name:
        raise ModelError("metadata.name: Required value")
    where = f"Cluster {name!r}"
    labels = {
        str(k): _str(v, f"{where} metadata.labels.{k}")
        for k, v in _mapping(meta.get("labels"), "labels").items()
    }
    spec_fields = _Fields(obj.get("spec"), f"{where} spec")
    status = _mapping(obj.get("status"), f"{where} status")
    zones = spec_fields.texts("zones")
    legacy_zone = spec_fields.text("zone")
    if not zones and legacy_zone:
        zones = (legacy_zone,)  # the Cluster API canonicalises spec.zone into spec.zones
    taints = spec_fields.each("taints", Taint.from_dict)
    raw_enablements = status.get("apiEnablements")
    enablements: tuple[APIEnablement, ...]
    if previous is not None and "apiEnablements" in before and before["apiEnablements"] == raw_enablements:
        enablements = previous[1].api_enablements
    else:
        enablements = _api_enablements(raw_enablements, where)
    complete = False
    for cond in _list(status.get("conditions"), f"{where} status.conditions"):
        cond = _mapping(cond, "condition")
        if cond.get("type") == "CompleteAPIEnablements" and cond.get("status") == "True":
            complete = True
    summary = status.get("resourceSummary")
    parsed_summary: ResourceSummary | None
    if summary is None:
        parsed_summary = None
    elif previous is not None and "resourceSummary" in before and before["resourceSummary"] == summary:
        parsed_summary = previous[1].resource_summary
    else:
        parsed_summary = ResourceSummary.from_dict(summary, f"{where} resourceSummary")
    cluster = Cluster(
        name=name,
        labels=labels,
        provider=spec_fields.text("provider"),
        region=spec_fields.text("region"),
        zones=zones,
        taints=taints,
        api_enablements=enablements,
        complete_api_enablements=complete,
        resource_summary=parsed_summary,
        deleting=bool(meta.get("deletionTimestamp")),
    )
    if previous is not None:
        earlier = previous[1]
        if (earlier.api_enablements is enablements and earlier.complete_api_enablements == complete
                and "_api_answers" in earlier.__dict__):
            cluster.__dict__["_api_answers"] = earlier.__dict__["_api_answers"]  # the same answers: keep them
    return cluster


def _api_enablements(raw: Any, where: str) -> tuple[APIEnablement, ...]:
    enablements = []
    for i, item in enumerate(_list(raw, f"{where} status.apiEnablements")):
        item = _mapping(item, f"{where} status.apiEnablements[{i}]")
        kinds = frozenset(
            _str(_mapping(r, "resource").get("kind"), "kind")
            for r in _list(item.get("resources"), f"{where} status.apiEnablements[{i}].resources")
        )
        enablements.append(APIEnablement(_str(item.get("groupVersion"), "groupVersion"), kinds))
    return tuple(enablements)


def parse_clusters(objs: Iterable[Mapping[str, Any] | Cluster]) -> tuple[Cluster, ...]:
    return tuple(o if isinstance(o, Cluster) else parse_cluster(o) for o in objs)


# ------------------------------------------------------------------------------------------------
# Placement
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldRequirement:
    """One ``fieldSelector.matchExpressions`` entry (a ``corev1.NodeSelectorRequirement``)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClusterAffinity:
    """``policy.karmada.io/v1alpha1`` ClusterAffinity.

    ``label_selector`` is ``None`` when absent (no constraint). A selector that Kubernetes would refuse
    to convert is kept as :meth:`LabelSelector.nothing` (Karmada then treats the cluster as not matching).
    ``field_selector`` is ``None`` when absent.
    """

    label_selector: LabelSelector | None = None
    field_selector: tuple[FieldRequirement, ...] | None = None
    cluster_names: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, where: str = "clusterAffinity") -> ClusterAffinity:
        d = _mapping(d, where)
        selector: LabelSelector | None = None
        raw_selector = d.get("labelSelector")
        if raw_selector is not None:
            try:
                selector = label_selector_from_dict(raw_selector)
            except SelectorError:
                selector = LabelSelector.nothing()
        fields: tuple[FieldRequirement, ...] | None = None
        raw_fields = d.get("fieldSelector")
        if raw_fields is not None:
            exprs = []
            raw_exprs = _list(_mapping(raw_fields, f"{where}.fieldSelector").get("matchExpressions"), where)
            for i, e in enumerate(raw_exprs):
                e = _mapping(e, f"{where}.fieldSelector.matchExpressions[{i}]")
                exprs.append(
                    FieldRequirement(
                        key=_str(e.get("key"), "key"),
                        operator=_str(e.get("operator"), "operator"),
                        values=_strings(e.get("values"), "values"),
                    )
                )
            fields = tuple(exprs)
        return cls(
            label_selector=selector,
            field_selector=fields,
            cluster_names=_strings(d.get("clusterNames"), f"{where}.clusterNames"),
            exclude=_strings(d.get("exclude"), f"{where}.exclude"),
        )

    @cached_property
    def cluster_name_set(self) -> frozenset[str]:
        """``cluster_names`` for membership tests (a policy may list hundreds; every pass tests each cluster)."""
        return frozenset(self.cluster_names)

    @cached_property
    def exclude_set(self) -> frozenset[str]:
        """``exclude`` for membership tests."""
        return frozenset(self.exclude)


@dataclass(frozen=True)
class ClusterAffinityTerm:
    """One ``placement.clusterAffinities`` group with its optional overflow affinities."""

    name: str
    affinity: ClusterAffinity
    overflow: tuple[ClusterAffinity, ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "clusterAffinities[]") -> ClusterAffinityTerm:
        f = _Fields(d, where)
        return cls(name=f.text("affinityName"), affinity=ClusterAffinity.from_dict(f.d, where),
                   overflow=f.each("overflowAffinities", ClusterAffinity.from_dict))


@dataclass(frozen=True)
class SpreadConstraint:
    spread_by_field: str = "cluster"
    spread_by_label: str = ""
    max_groups: int = 0
    min_groups: int = 1

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "spreadConstraints[]") -> SpreadConstraint:
        f = _Fields(d, where)
        by_field, by_label = f.text("spreadByField"), f.text("spreadByLabel")
        if not by_field and not by_label:
            by_field = "cluster"
        min_groups = f.number("minGroups")
        return cls(spread_by_field=by_field, spread_by_label=by_label, max_groups=f.number("maxGroups"),
                   min_groups=1 if min_groups == 0 else min_groups)


@dataclass(frozen=True)
class StaticWeight:
    target: ClusterAffinity
    weight: int


@dataclass(frozen=True)
class WeightPreference:
    static_weights: tuple[StaticWeight, ...] = ()
    dynamic_weight: str = ""


@dataclass(frozen=True)
class ReplicaScheduling:
    type: str = "Divided"
    division_preference: str = "Weighted"
    weight_preference: WeightPreference | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "replicaScheduling") -> ReplicaScheduling:
        f = _Fields(d, where)
        d = f.d
        type_ = f.text("replicaSchedulingType") or "Divided"
        preference = f.text("replicaDivisionPreference")
        if type_ == "Divided" and not preference:
            preference = "Weighted"
        weight_preference: WeightPreference | None = None
        raw_wp = d.get("weightPreference")
        if raw_wp is not None:
            wp = _mapping(raw_wp, f"{where}.weightPreference")
            weights = []
            for i, item in enumerate(
                _list(wp.get("staticWeightList"), f"{where}.weightPreference.staticWeightList")
            ):
                w = f"{where}.weightPreference.staticWeightList[{i}]"
                item = _mapping(item, w)
                weights.append(
                    StaticWeight(
                        target=ClusterAffinity.from_dict(item.get("targetCluster"), f"{w}.targetCluster"),
                        weight=_int(item.get("weight"), f"{w}.weight"),
                    )
                )
            weight_preference = WeightPreference(
                static_weights=tuple(weights),
                dynamic_weight=_str(wp.get("dynamicWeight"), f"{where}.weightPreference.dynamicWeight"),
            )
        return cls(type=type_, division_preference=preference, weight_preference=weight_preference)


@dataclass(frozen=True)
class Placement:
    """The scheduling-relevant part of ``policy.karmada.io/v1alpha1`` Placement (normalised)."""

    cluster_affinity: ClusterAffinity | None = None
    cluster_affinities: tuple[ClusterAffinityTerm, ...] | None = None
    cluster_tolerations: tuple[Toleration, ...] = ()
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    replica_scheduling: ReplicaScheduling | None = None

    @property
    def strategy(self) -> Strategy:
        rs = self.replica_scheduling
        if rs is None or rs.type == "Duplicated":
            return Strategy.DUPLICATED
        if rs.division_preference == "Aggregated":
            return Strategy.AGGREGATED
        wp = rs.weight_preference
        if wp is not None and wp.dynamic_weight:
            return Strategy.DYNAMIC_WEIGHT
        return Strategy.STATIC_WEIGHT

    @property
    def is_duplicated(self) -> bool:
        return self.replica_scheduling is None or self.replica_scheduling.type == "Duplicated"

    def spread_constraints_ignored(self) -> bool:
        """Karmada's ``shouldIgnoreSpreadConstraint``: static weighting selects every feasible cluster.

        True for Divided+Weighted with no ``weightPreference``, or with a non-empty ``staticWeightList``
        and no ``dynamicWeight`` (so ``weightPreference: {}`` does *not* ignore spread constraints).
        """
        rs = self.replica_scheduling
        if rs is None or rs.type != "Divided" or rs.division_preference != "Weighted":
            return False
        wp = rs.weight_preference
        return wp is None or (len(wp.static_weights) != 0 and not wp.dynamic_weight)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Placement:
        return parse_placement(d)


def parse_placement(d: Mapping[str, Any] | Placement | None) -> Placement:
    """Parse (and normalise) a ``placement`` object; ``None`` gives the empty placement (Duplicated, all)."""
    if isinstance(d, Placement):
        return d
    f = _Fields(d, "placement")
    d = f.d
    affinity = d.get("clusterAffinity")
    terms: tuple[ClusterAffinityTerm, ...] | None = None
    if d.get("clusterAffinities"):  # an empty list is treated as absent
        terms = f.each("clusterAffinities", ClusterAffinityTerm.from_dict)
    tolerations = f.each("clusterTolerations", Toleration.from_dict)
    spread = f.each("spreadConstraints", SpreadConstraint.from_dict)
    raw_rs = d.get("replicaScheduling")
    return Placement(
        cluster_affinity=None
        if affinity is None
        else ClusterAffinity.from_dict(affinity, "placement.clusterAffinity"),
        cluster_affinities=terms,
        cluster_tolerations=tolerations,
        spread_constraints=spread,
        replica_scheduling=None
        if raw_rs is None
        else ReplicaScheduling.from_dict(raw_rs, "placement.replicaScheduling"),
    )


# ------------------------------------------------------------------------------------------------
# ResourceBinding
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TargetCluster:
    name: str
    replicas: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "replicas": self.replicas}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "clusters[]") -> TargetCluster:
        f = _Fields(d, where)
        return cls(name=f.text("name"), replicas=f.number("replicas"))


@dataclass(frozen=True)
class GracefulEvictionTask:
    from_cluster: str
    purge_mode: str = ""
    replicas: int | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "gracefulEvictionTasks[]") -> GracefulEvictionTask:
        f = _Fields(d, where)
        return cls(from_cluster=f.text("fromCluster"), purge_mode=f.text("purgeMode"),
                   replicas=f.optional_number("replicas"))


@dataclass(frozen=True)
class ReplicaRequirements:
    resource_request: Mapping[str, Fraction] = field(default_factory=dict)


@dataclass(frozen=True)
class Component:
    """One entry of a binding's ``spec.components``: a pod template's replicas and per-replica resource request."""

    name: str = ""
    replicas: int = 0
    resource_request: Mapping[str, Fraction] = field(default_factory=dict)


@dataclass(frozen=True)
class ResourceRef:
    api_version: str = ""
    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""


@dataclass(frozen=True)
class BindingSpec:
    """The scheduling-relevant part of a ResourceBinding / ClusterResourceBinding ``spec``."""

    resource: ResourceRef = field(default_factory=ResourceRef)
    replicas: int = 0
    replica_requirements: ReplicaRequirements | None = None
    components: int = 0
    #: the components themselves (``components`` is their number)
    component_specs: tuple[Component, ...] = ()
    clusters: tuple[TargetCluster, ...] = ()
    graceful_eviction_tasks: tuple[GracefulEvictionTask, ...] = ()
    placement: Placement = field(default_factory=Placement)
    reschedule_triggered_at: datetime | None = None

    @property
    def is_workload(self) -> bool:
        """``IsWorkload()``: replicas > 0, or replica requirements, or at least one component."""
        return self.replicas > 0 or self.replica_requirements is not None or self.components >= 1

    def target_contains(self, name: str) -> bool:
        return any(c.name == name for c in self.clusters)

    def assigned_replicas(self, name: str) -> int:
        for c in self.clusters:
            if c.name == name:
                return c.replicas
        return 0

    def in_graceful_eviction(self, name: str) -> bool:
        return any(t.from_cluster == name for t in self.graceful_eviction_tasks)


@dataclass(frozen=True)
class BindingStatus:
    """What the scheduler reads back from a binding's ``status``."""

    affinity_name: str = ""  # status.schedulerObservingAffinityName
    last_scheduled_time: datetime | None = None


def _components(value: Any, where: str) -> tuple[Component, ...]:
    out = []
    for i, raw in enumerate(_list(value, where)):
        c = _Fields(raw, f"{where}[{i}]")
        req = _Fields(c.d.get("replicaRequirements") or {}, f"{where}[{i}].replicaRequirements")
        out.append(Component(name=c.text("name"), replicas=c.number("replicas"),
                             resource_request=req.resources("resourceRequest") or {}))
    return tuple(out)


def parse_binding_spec(spec: Mapping[str, Any] | BindingSpec) -> BindingSpec:
    """Parse a binding ``spec`` dict."""
    if isinstance(spec, BindingSpec):
        return spec
    f = _Fields(spec, "spec")
    spec = f.d
    res = _Fields(spec.get("resource"), "spec.resource")
    requirements: ReplicaRequirements | None = None
    raw_req = spec.get("replicaRequirements")
    if raw_req is not None:
        requirements = ReplicaRequirements(
            resource_request=_Fields(raw_req, "spec.replicaRequirements").resources("resourceRequest") or {})
    components = _components(spec.get("components"), "spec.components")
    return BindingSpec(
        resource=ResourceRef(api_version=res.text("apiVersion"), kind=res.text("kind"),
                             namespace=res.text("namespace"), name=res.text("name"), uid=res.text("uid")),
        replicas=f.number("replicas"),
        replica_requirements=requirements,
        components=len(components),
        component_specs=components,
        clusters=f.each("clusters", TargetCluster.from_dict),
        graceful_eviction_tasks=f.each("gracefulEvictionTasks", GracefulEvictionTask.from_dict),
        placement=parse_placement(spec.get("placement")),
        reschedule_triggered_at=f.time("rescheduleTriggeredAt"),
    )


def parse_binding_status(status: Mapping[str, Any] | BindingStatus | None) -> BindingStatus:
    if isinstance(status, BindingStatus):
        return status
    f = _Fields(status, "status")
    return BindingStatus(affinity_name=f.text("schedulerObservingAffinityName"),
                         last_scheduled_time=f.time("lastScheduledTime"))


def parse_binding(obj: Mapping[str, Any] | BindingSpec) -> tuple[BindingSpec, BindingStatus | None]:
    """Parse a whole ResourceBinding (``{spec, status}``) or a bare spec.

    Returns the spec and, when the object carried one, its status.
    """
    if isinstance(obj, BindingSpec):
        return obj, None
    obj = _mapping(obj, "binding")
    if "spec" in obj and isinstance(obj.get("spec"), Mapping):
        status = obj.get("status")
        return parse_binding_spec(obj["spec"]), None if status is None else parse_binding_status(status)
    return parse_binding_spec(obj), None


def target_clusters_from(items: Sequence[Mapping[str, Any] | TargetCluster]) -> tuple[TargetCluster, ...]:
    return tuple(i if isinstance(i, TargetCluster) else TargetCluster.from_dict(i) for i in items)
