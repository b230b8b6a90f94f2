"""What the API server knows about a kind of resource: names, scope, subresources, columns, schema."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flotilla.kube.resources import api_path, group_version

# Groups whose objects kube-apiserver stores under /registry/<resource>/... (no group in the key).
_LEGACY_KEY_GROUPS = frozenset({"", "apps", "batch", "coordination.k8s.io", "apiextensions.k8s.io"})


@dataclass(frozen=True)
class PrinterColumn:
    """A column of ``kubectl get`` (CRD additionalPrinterColumns semantics)."""

    name: str
    type: str  # string | integer | number | boolean | date
    json_path: str  # kubectl JSONPath without braces, e.g. ".status.phase"
    description: str = ""
    priority: int = 0  # >0: shown only with -o wide
    format: str = ""


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    has_status: bool = False  # serves the /status subresource (then spec/status writes are split)
    has_scale: bool = False  # serves the /scale subresource (autoscaling/v1 Scale)
    scale_spec_path: str = ".spec.replicas"
    scale_status_path: str = ".status.replicas"
    scale_selector_path: str = ""
    printer_columns: tuple[PrinterColumn, ...] = ()
    # OpenAPI v3 schema of the whole object (type: object, properties ...). Used for discovery of
    # fields (kubectl explain) and, when ``strict_schema`` is true, for fieldValidation=Strict.
    schema: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    strict_schema: bool = False
    # generation counting: "spec" (built-ins: +1 when .spec changes) or "non-metadata" (custom
    # resources: +1 when anything but metadata, and status if has_status, changes); "" = never.
    generation: str = "spec"
    verbs: tuple[str, ...] = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
    builtin_smp: bool = True  # accepts strategic-merge-patch (kubectl compiles this kind in)
    from_crd: bool = False
    selectable_fields: tuple[str, ...] = ()  # extra field selectors, e.g. "spec.nodeName"
    return_deleted_object: bool = False  # DELETE answers with the object (pods, services...) not a Status

    def __post_init__(self) -> None:
        if not self.singular:
            object.__setattr__(self, "singular", self.kind.lower())

    @property
    def subresources(self) -> frozenset[str]:
        """The subresources served besides the object itself: status, scale, and a Namespace's finalize."""
        served = {"status"} if self.has_status else set()
        if self.has_scale:
            served.add("scale")
        if self.group == "" and self.kind == "Namespace":
            served.add("finalize")
        return frozenset(served)

    @property
    def group_version(self) -> str:
        return group_version(self.group, self.version)

    @property
    def api_version(self) -> str:
        return self.group_version

    @property
    def qualified_resource(self) -> str:
        """``deployments.apps``, ``configmaps`` - how error messages name the resource."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def url_prefix(self) -> str:
        return api_path(self.group, self.version)

    def key_prefix(self, namespace: str | None = None) -> str:
        """The storage key prefix of this resource (kube-apiserver's etcd layout), ending in '/'."""
        if self.group in _LEGACY_KEY_GROUPS:
            base = f"/registry/{self.plural}/"
        else:
            base = f"/registry/{self.group}/{self.plural}/"
        if self.namespaced and namespace:
            return f"{base}{namespace}/"
        return base

    def key(self, namespace: str | None, name: str) -> str:
        if self.namespaced:
            return f"{self.key_prefix(namespace)}{name}"
        return f"{self.key_prefix()}{name}"
