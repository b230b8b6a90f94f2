"""OverridePolicy / ClusterOverridePolicy application, as Karmada's override manager does it.

Pure functions on plain JSON objects, no I/O; inputs are never mutated.

Order (``pkg/util/overridemanager``), per target cluster:

1. All ClusterOverridePolicies first; then, for namespaced objects only, the OverridePolicies of the
   object's namespace (taken from the object *after* the cluster overrides were applied).
2. Within each set: keep the policies whose ``resourceSelectors`` match the object (no selectors:
   match all), evaluated once against the object as it is before that set is applied; sort them
   stably by implicit priority **ascending** (no selectors = match-all = 1, label selector = 2,
   name = 3) then by name ascending. Later policies are applied later and so win.
3. For each policy, every rule (``overrideRules``; or, when that is empty, the deprecated
   ``targetCluster`` + ``overriders`` pair as one rule) whose ``targetCluster`` is null or matches
   the cluster contributes its ``overriders`` block, in rule order. Each contributing rule is
   recorded as an applied item, even when its block is empty.
4. Within one block: image -> command -> args -> labels -> annotations -> field -> plaintext, each
   turned into an RFC 6902 JSON patch and applied; the first failure fails the whole cluster.

Overriders
    ``imageOverrider``: without ``predicate`` every ``containers[*].image`` of a Pod (``/spec``) or
    of the pod template of a ReplicaSet/Deployment/DaemonSet/StatefulSet/Job
    (``/spec/template/spec``); init containers and other kinds are left alone. With a predicate the
    image at ``predicate.path`` (walked through maps and list indexes). The image is parsed like
    ``distribution/reference.Parse`` (no docker.io normalisation: ``nginx`` has no registry), then
    ``component`` Registry/Repository/Tag is changed: ``add`` appends the value to the current
    component text, ``replace`` sets it, ``remove`` clears it. For Tag the new text becomes the tag
    when it is a valid tag, else the digest when it is a valid digest, else nothing changes; a
    reference carrying both a tag and a digest loses its digest on any image override.
    ``commandOverrider``/``argsOverrider``: for each container named ``containerName`` (same kinds as
    above), ``add`` appends ``value``, ``remove`` drops every entry equal to one of ``value``; a
    missing list is created. ``labelsOverrider``/``annotationsOverrider``: ``add`` sets keys (the
    map is created when missing); ``replace``/``remove`` only touch keys that exist.
    ``fieldOverrider``: JSON or YAML patch applied to the string at ``fieldPath``.
    ``plaintext``: the listed operations as one JSON patch.

Applied items are recorded on the Work as JSON ``[{"policyName": …, "overriders": {…}}]`` sorted by
policy name, in ``policy.karmada.io/applied-cluster-overrides`` (ClusterOverridePolicies) and
``policy.karmada.io/applied-overrides`` (OverridePolicies); see :func:`applied_override_annotations`.

Replica revision per cluster (``ReviseReplica``) is the resource interpreter's job and happens
before overrides; it is not done here.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import yaml

from flotilla.jsonpath.formatting import go_float_json, go_float_v, go_json_string
from flotilla.kube.jsoncopy import json_copy
from flotilla.kube.objects import as_str
from flotilla.kube.patch import PatchError, apply_json_patch
from flotilla.policy.matching import (
    ImplicitPriority,
    override_policy_precision,
    resource_matches_selectors,
)
from flotilla.scheduler.affinity import cluster_object_matches

__all__ = [
    "APPLIED_CLUSTER_OVERRIDES_ANNOTATION",
    "APPLIED_OVERRIDES_ANNOTATION",
    "AppliedOverride",
    "ImageComponents",
    "ImageParseError",
    "OverrideError",
    "applied_override_annotations",
    "applied_overrides_json",
    "apply_overriders",
    "apply_overrides",
    "cluster_overriders",
    "go_json_dumps",
    "matching_override_policies",
    "override_image",
    "override_rules",
    "parse_image",
]

APPLIED_OVERRIDES_ANNOTATION = "policy.karmada.io/applied-overrides"
APPLIED_CLUSTER_OVERRIDES_ANNOTATION = "policy.karmada.io/applied-cluster-overrides"

_POD_KIND = "Pod"
_POD_TEMPLATE_KINDS = frozenset({"ReplicaSet", "Deployment", "DaemonSet", "StatefulSet", "Job"})
_POD_CONTAINERS: tuple[str, ...] = ("spec", "containers")
_POD_TEMPLATE_CONTAINERS: tuple[str, ...] = ("spec", "template", "spec", "containers")


class OverrideError(ValueError):
    """An override could not be applied (the Work for that cluster is not written)."""

    def __init__(self, message: str, *, policy_name: str = "", cluster_scoped: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.policy_name = policy_name
        self.cluster_scoped = cluster_scoped


class ImageParseError(OverrideError):
    """An image reference that ``distribution/reference.Parse`` rejects."""


class AppliedOverride(NamedTuple):
    """One applied rule: the policy name and the rule's ``overriders`` block."""

    policy_name: str
    overriders: dict[str, Any]
    cluster_scoped: bool  # True: from a ClusterOverridePolicy


# ---------------------------------------------------------------------------------------------
# Image references (distribution/reference + Karmada's imageparser)
# ---------------------------------------------------------------------------------------------

_ALPHANUMERIC = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_OPTIONAL_PORT = r"(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][0-9A-Fa-f]{32,}"
_IPV6 = r"\[(?:[a-fA-F0-9:]+)\]"
_DOMAIN_NAME = _DOMAIN_COMPONENT + r"(?:\." + _DOMAIN_COMPONENT + r")*"
_DOMAIN_AND_PORT = r"(?:" + _DOMAIN_NAME + "|" + _IPV6 + ")" + _OPTIONAL_PORT
_PATH_COMPONENT = _ALPHANUMERIC + r"(?:" + _SEPARATOR + _ALPHANUMERIC + r")*"
_REMOTE_NAME = _PATH_COMPONENT + r"(?:/" + _PATH_COMPONENT + r")*"
_NAME = r"(?:" + _DOMAIN_AND_PORT + r"/)?" + _REMOTE_NAME

# Go's RE2 has ASCII \w and "$" = end of text: re.ASCII + fullmatch.
_REFERENCE_RE = re.compile(r"(" + _NAME + r")(?::(" + _TAG + r"))?(?:@(" + _DIGEST + r"))?", re.ASCII)
_ANCHORED_NAME_RE = re.compile(r"(?:(" + _DOMAIN_AND_PORT + r")/)?(" + _REMOTE_NAME + r")", re.ASCII)
_TAG_RE = re.compile(_TAG, re.ASCII)
_DIGEST_RE = re.compile(_DIGEST, re.ASCII)
# go-digest's own (looser) digest syntax, used only to pick the error message.
_GO_DIGEST_RE = re.compile(r"[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+")
_DIGEST_SIZES = {"sha256": 32, "sha384": 48, "sha512": 64}
_LOWER_HEX_RE = re.compile(r"[a-f0-9]+")
_NAME_TOTAL_LENGTH_MAX = 255


def _validate_digest(digest: str) -> None:
    i = digest.find(":")
    if i <= 0 or i + 1 == len(digest):
        raise ImageParseError("invalid checksum digest format")
    algorithm, encoded = digest[:i], digest[i + 1 :]
    size = _DIGEST_SIZES.get(algorithm)
    if size is None:
        if not _GO_DIGEST_RE.fullmatch(digest):
            raise ImageParseError("invalid checksum digest format")
        raise ImageParseError("unsupported digest algorithm")
    if len(encoded) != size * 2:
        raise ImageParseError("invalid checksum digest length")
    if not _LOWER_HEX_RE.fullmatch(encoded):
        raise ImageParseError("invalid checksum digest format")


def _split_hostname(name: str) -> tuple[str, str]:
    i = name.find("/")
    if i == -1 or (not any(c in ".:" for c in name[:i]) and name[:i] != "localhost"):
        return "", name
    return name[:i], name[i + 1 :]


@dataclass
class ImageComponents:
    """``[hostname/]repository[:tag|@digest]`` (tag and digest never both set)."""

    hostname: str = ""
    repository: str = ""
    tag: str = ""
    digest: str = ""

    def full_repository(self) -> str:
        return f"{self.hostname}/{self.repository}" if self.hostname else self.repository

    def __str__(self) -> str:
        if self.tag:
            return f"{self.full_repository()}:{self.tag}"
        if self.digest:
            return f"{self.full_repository()}@{self.digest}"
        return self.full_repository()

    def tag_or_digest(self) -> str:
        return self.tag or self.digest

    def set_tag_or_digest(self, value: str) -> None:
        """Becomes the tag if ``value`` is a valid tag, else the digest if a valid digest, else no-op."""
        if _TAG_RE.fullmatch(value):
            self.tag, self.digest = value, ""
        elif _DIGEST_RE.fullmatch(value):
            self.tag, self.digest = "", value

    def remove_tag_or_digest(self) -> None:
        if self.tag:
            self.tag = ""
        else:
            self.digest = ""


def parse_image(image: str) -> ImageComponents:
    """Split an image reference; raises :class:`ImageParseError` for an invalid reference."""
    match = _REFERENCE_RE.fullmatch(image)
    if match is None:
        if image == "":
            raise ImageParseError("repository name must have at least one component")
        if _REFERENCE_RE.fullmatch(image.lower()):
            raise ImageParseError("repository name must be lowercase")
        raise ImageParseError("invalid reference format")
    name, tag, digest = match.group(1), match.group(2) or "", match.group(3) or ""
    name_match = _ANCHORED_NAME_RE.fullmatch(name)
    domain, path = (name_match.group(1) or "", name_match.group(2)) if name_match else ("", name)
    if len(path) > _NAME_TOTAL_LENGTH_MAX:
        raise ImageParseError(f"repository name must not be more than {_NAME_TOTAL_LENGTH_MAX} characters")
    if digest:
        _validate_digest(digest)
    hostname, repository = _split_hostname(f"{domain}/{path}" if domain else path)
    if tag:
        return ImageComponents(hostname, repository, tag=tag)
    return ImageComponents(hostname, repository, digest=digest)


#: the image components an overrider sets as plain fields of :class:`ImageComponents` (the tag is a method's)
_IMAGE_FIELDS = {"Registry": "hostname", "Repository": "repository"}


def override_image(image: str, component: str, operator: str, value: str) -> str:
    """The image after one image overrider (an unknown operator only normalises the reference)."""
    try:
        parsed = parse_image(image)
    except ImageParseError as e:
        raise ImageParseError(f"failed to parse image value({image}), error: {e}") from None
    if component == "Tag":
        current, put, remove = parsed.tag_or_digest(), parsed.set_tag_or_digest, parsed.remove_tag_or_digest
    elif component in _IMAGE_FIELDS:
        field = _IMAGE_FIELDS[component]
        current = getattr(parsed, field)

        def put(text: str) -> None:
            setattr(parsed, field, text)

        def remove() -> None:
            put("")
    else:
        raise OverrideError(f"unsupported image component({component})")
    if operator == "add":
        put(current + value)
    elif operator == "replace":
        put(value)
    elif operator == "remove":
        remove()
    return str(parsed)


# ---------------------------------------------------------------------------------------------
# Go formatting helpers (exact text of the annotations Karmada writes)
# ---------------------------------------------------------------------------------------------


def _go_sprint_s(value: Any) -> str:
    """Go's ``fmt.Sprintf("%s", v)`` for a decoded JSON value."""
    if isinstance(value, str):
        return value
    if value is None:
        return "%!s(<nil>)"
    if isinstance(value, bool):
        return f"%!s(bool={'true' if value else 'false'})"
    if isinstance(value, int):
        return f"%!s(int64={value})"
    if isinstance(value, float):
        return f"%!s(float64={go_float_v(value)})"
    if isinstance(value, list):
        return "[" + " ".join(_go_sprint_s(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "map[" + " ".join(f"{k}:{_go_sprint_s(value[k])}" for k in sorted(value)) + "]"
    return str(value)


def go_json_dumps(value: Any, *, sort_keys: bool = False) -> str:
    """Encode like Go's ``json.Marshal``: compact, HTML-escaped, Go number formatting.

    Mappings keep their order unless ``sort_keys`` (Go sorts ``map`` keys; structs use field order).
    """
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"json: unsupported value: {value}")
        return go_float_json(value)
    if isinstance(value, str):
        return go_json_string(value)
    if isinstance(value, Mapping):
        keys = sorted(value) if sort_keys else list(value)
        return (
            "{"
            + ",".join(
                f"{go_json_string(str(k))}:{go_json_dumps(value[k], sort_keys=sort_keys)}" for k in keys
            )
            + "}"
        )
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(go_json_dumps(v, sort_keys=sort_keys) for v in value) + "]"
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


# ---------------------------------------------------------------------------------------------
# Patch plumbing
# ---------------------------------------------------------------------------------------------


def _apply_patch(obj: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """JSON patch then the Unstructured round trip (which needs a non-empty ``kind``)."""
    try:
        result = apply_json_patch(obj, ops)
    except PatchError as e:
        raise OverrideError(e.message) from None
    kind = result.get("kind")
    if not isinstance(kind, str) or not kind:
        raise OverrideError("Object 'Kind' is missing in the patched object")
    return result


def _items(value: Any) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [v if isinstance(v, Mapping) else {} for v in value]


def _type_name(value: Any) -> str:
    return {
        dict: "map[string]interface {}",
        list: "[]interface {}",
        str: "string",
        bool: "bool",
        int: "int64",
        float: "float64",
    }.get(type(value), "<nil>" if value is None else type(value).__name__)


# ---------------------------------------------------------------------------------------------
# imageOverrider
# ---------------------------------------------------------------------------------------------


def _conversion_error(obj: Mapping[str, Any], detail: str) -> OverrideError:
    """The typed conversion's refusal of ``obj``."""
    return OverrideError(f"failed to convert {obj.get('kind')} from unstructured object: {detail}")


def _typed_containers(obj: Mapping[str, Any], path: Sequence[str]) -> list[Mapping[str, Any]]:
    """``podSpec.Containers`` as the typed conversion sees it (null/missing = none)."""
    current: Any = obj
    for key in path:
        if current is None:
            return []
        if not isinstance(current, Mapping):
            raise _conversion_error(obj, f"{key}: expected an object, got {_type_name(current)}")
        current = current.get(key)
    if current is None:
        return []
    if not isinstance(current, list):
        raise _conversion_error(obj, f"containers: expected a list, got {_type_name(current)}")
    containers: list[Mapping[str, Any]] = []
    for container in current:
        if container is None:
            container = {}
        if not isinstance(container, Mapping) or not isinstance(container.get("image", ""), (str, type(None))):
            raise _conversion_error(obj, "bad container")
        containers.append(container)
    return containers


_GO_INT32_RE = re.compile(r"[+-]?[0-9]+")


def _obtain_image_value(obj: Mapping[str, Any], predicate_path: str) -> str:
    segments = predicate_path.strip("/").split("/")
    current: Mapping[str, Any] = obj
    index = 0
    while index < len(segments) - 1:
        value = current.get(segments[index])
        if isinstance(value, Mapping):
            current = value
        elif isinstance(value, list):
            token = segments[index + 1]
            if not _GO_INT32_RE.fullmatch(token) or not -(2**31) <= int(token) < 2**31:
                raise OverrideError(f"path({token}) of rawObj's is not number")
            position = int(token)
            if not 0 <= position < len(value) or not isinstance(value[position], Mapping):
                # Upstream panics here (index out of range / failed type assertion).
                raise OverrideError(f"path({token}) of rawObj's is not a valid index of an object list")
            current = value[position]
            index += 1
        else:
            raise OverrideError(
                f"path({segments[index]}) of rawObj's type is not map[string]interface{{}} and []interface{{}}"
            )
        index += 1
    image = current.get(segments[-1])
    if not isinstance(image, str):
        raise OverrideError(f"failed to convert path({segments[-1]}) to string")
    return image


def _image_patches(obj: Mapping[str, Any], overrider: Mapping[str, Any]) -> list[dict[str, Any]]:
    component, operator, value = (
        as_str(overrider.get("component")),
        as_str(overrider.get("operator")),
        as_str(overrider.get("value")),
    )
    predicate = overrider.get("predicate")
    if predicate is not None:
        path = as_str(predicate.get("path")) if isinstance(predicate, Mapping) else ""
        try:
            image = _obtain_image_value(obj, path)
        except OverrideError as e:
            raise OverrideError(
                f"failed to obtain imageValue with predicate path({path}), error: {e}"
            ) from None
        if not path.startswith("/"):
            raise OverrideError("imagePath should be start with / character")
        return [{"op": "replace", "path": path, "value": override_image(image, component, operator, value)}]
    kind = obj.get("kind")
    if kind == _POD_KIND:
        prefix, spec_path = "/spec", _POD_CONTAINERS
    elif kind in _POD_TEMPLATE_KINDS:
        prefix, spec_path = "/spec/template/spec", _POD_TEMPLATE_CONTAINERS
    else:
        return []
    patches = []
    for i, container in enumerate(_typed_containers(obj, spec_path)):
        image = as_str(container.get("image"))
        patches.append(
            {
                "op": "replace",
                "path": f"{prefix}/containers/{i}/image",
                "value": override_image(image, component, operator, value),
            }
        )
    return patches


# ---------------------------------------------------------------------------------------------
# commandOverrider / argsOverrider
# ---------------------------------------------------------------------------------------------


def _nested_slice(obj: Mapping[str, Any], path: Sequence[str]) -> list[Any] | None:
    current: Any = obj
    for key in path:
        if not isinstance(current, Mapping):
            raise OverrideError(
                f"failed to retrieves path({'/'.join(path)}) from rawObj, error: .{'.'.join(path)} accessor error: "
                f"{current} is of the type {_type_name(current)}, expected map[string]interface{{}}"
            )
        if key not in current:
            return None
        current = current[key]
    if not isinstance(current, list):
        raise OverrideError(
            f"failed to retrieves path({'/'.join(path)}) from rawObj, error: .{'.'.join(path)} accessor error: "
            f"{current} is of the type {_type_name(current)}, expected []interface{{}}"
        )
    return current


def _command_args_patches(
    obj: Mapping[str, Any], target: str, overrider: Mapping[str, Any]
) -> list[dict[str, Any]]:
    kind = obj.get("kind")
    if kind == _POD_KIND:
        path = _POD_CONTAINERS
    elif kind in _POD_TEMPLATE_KINDS:
        path = _POD_TEMPLATE_CONTAINERS
    else:
        return []
    containers = _nested_slice(obj, path)
    if not containers:
        return []
    container_name = overrider.get("containerName")
    operator = overrider.get("operator")
    values = [v for v in overrider.get("value") or [] if isinstance(v, str)]
    patches = []
    for index, container in enumerate(containers):
        if not isinstance(container, Mapping):
            raise OverrideError(f"containers[{index}] is not an object")  # upstream panics
        name = container.get("name")
        if not isinstance(name, str) or not isinstance(container_name, str) or name != container_name:
            continue
        current = container.get(target)
        if current is None:
            op, existing = "add", []
        elif isinstance(current, list):
            op, existing = "replace", [_go_sprint_s(v) for v in current]
        else:
            raise OverrideError(f"containers[{index}].{target} is not a list")  # upstream panics
        if operator == "add":
            new = existing + values
        elif operator == "remove":
            removed = set(values)
            new = [v for v in existing if v not in removed]
        else:
            new = existing
        patches.append({"op": op, "path": f"/{'/'.join(path)}/{index}/{target}", "value": new})
    return patches


# ---------------------------------------------------------------------------------------------
# labelsOverrider / annotationsOverrider
# ---------------------------------------------------------------------------------------------


def _nested_string_map(obj: Mapping[str, Any], field: str) -> dict[str, str] | None:
    """``unstructured.NestedStringMap(obj, "metadata", field)``: None when absent or not a string map."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or field not in meta:
        return None
    value = meta[field]
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        return None
    return dict(value)


def _label_annotation_patches(
    obj: dict[str, Any], field: str, overrider: Mapping[str, Any]
) -> list[dict[str, Any]]:
    operator = overrider.get("operator")
    values = overrider.get("value")
    patches: list[dict[str, Any]] = []
    for key, value in values.items() if isinstance(values, Mapping) else ():
        if operator in ("remove", "replace"):
            current = _nested_string_map(obj, field)
            if current is None or key not in current:
                continue
        elif operator == "add" and _nested_string_map(obj, field) is None:
            meta = obj.setdefault("metadata", {})
            if not isinstance(meta, dict):
                continue  # SetNestedStringMap fails: this key is skipped
            meta[field] = {}
        patches.append(
            {"op": operator, "path": f"/metadata/{field}/{str(key).replace('/', '~1')}", "value": value}
        )
    return patches


# ---------------------------------------------------------------------------------------------
# fieldOverrider
# ---------------------------------------------------------------------------------------------


def _pointer_tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise OverrideError('JSON pointer must be empty or start with a "/"')
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _pointer_get(doc: Any, tokens: list[str]) -> Any:
    current = doc
    for token in tokens:
        if isinstance(current, Mapping):
            if token not in current:
                raise OverrideError(f"object has no key {json.dumps(token)}")
            current = current[token]
        elif isinstance(current, list):
            if not re.fullmatch(r"[+-]?[0-9]+", token) or not 0 <= int(token) < len(current):
                raise OverrideError(f"index out of bounds array[0,{len(current)}] index '{token}'")
            current = current[int(token)]
        else:
            raise OverrideError(f"invalid token reference {json.dumps(token)}")
    return current


def _wrapped_ops(ops: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    # The raw document may be an array: patch {"doc": …} with every path prefixed.
    return [
        {"op": as_str(op.get("operator")), "path": "/doc" + as_str(op.get("subPath")), "value": op.get("value")}
        for op in ops
    ]


def _patch_raw_document(doc: Any, ops: Iterable[Mapping[str, Any]]) -> Any:
    if not isinstance(doc, (dict, list)):
        raise OverrideError("the document to patch is not a JSON object or array")
    try:
        return apply_json_patch({"doc": doc}, _wrapped_ops(ops))["doc"]
    except PatchError as e:
        raise OverrideError(e.message) from None


class _GoYAMLLoader(yaml.SafeLoader):
    """YAML 1.1 safe loader that keeps timestamps as strings (as go-yaml does for interface{})."""


_GoYAMLLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class _GoYAMLDumper(yaml.SafeDumper):
    """Closer to go-yaml's output: double quotes where quoting is needed, literal blocks for
    multi-line strings."""

    def choose_scalar_style(self) -> str:
        style: str = super().choose_scalar_style()
        return '"' if style == "'" else style


def _represent_go_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_GoYAMLDumper.add_representer(str, _represent_go_str)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {
            (k if isinstance(k, str) else json.dumps(k) if isinstance(k, bool) else str(k)): _jsonable(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _field_patch(text: str, overrider: Mapping[str, Any]) -> str:
    yaml_ops, json_ops = _items(overrider.get("yaml")), _items(overrider.get("json"))
    if yaml_ops:
        try:
            doc = _jsonable(yaml.load(text, Loader=_GoYAMLLoader))  # a SafeLoader subclass
        except yaml.YAMLError as e:
            raise OverrideError(f"failed to convert yaml to json: {e}") from None
        patched = _patch_raw_document(doc, yaml_ops)
        return yaml.dump(
            patched, Dumper=_GoYAMLDumper, default_flow_style=False, sort_keys=True, allow_unicode=True
        )
    if json_ops:
        if text == "":
            return ""
        try:
            doc = json.loads(text)
        except ValueError:
            raise OverrideError("invalid JSON Document") from None
        return go_json_dumps(_patch_raw_document(doc, json_ops))
    return ""  # neither json nor yaml: upstream writes back an empty string


def _apply_field_overriders(obj: dict[str, Any], overriders: list[Mapping[str, Any]]) -> dict[str, Any]:
    for overrider in overriders:
        tokens = _pointer_tokens(as_str(overrider.get("fieldPath")))
        value = _pointer_get(obj, tokens)
        if not isinstance(value, str):
            raise OverrideError(
                f"Get object's value by overrider's path({as_str(overrider.get('fieldPath'))}) is not string"
            )
        new_text = _field_patch(value, overrider)
        parent = _pointer_get(obj, tokens[:-1])
        if isinstance(parent, list):
            parent[int(tokens[-1])] = new_text
        else:
            parent[tokens[-1]] = new_text
    return obj


# ---------------------------------------------------------------------------------------------
# One overriders block
# ---------------------------------------------------------------------------------------------


def apply_overriders(manifest: Mapping[str, Any], overriders: Mapping[str, Any]) -> dict[str, Any]:
    """Apply one ``overriders`` block (image, command, args, labels, annotations, field, plaintext)."""
    obj = json_copy(dict(manifest))
    for overrider in _items(overriders.get("imageOverrider")):
        obj = _apply_patch(obj, _image_patches(obj, overrider))
    for target, field in (("command", "commandOverrider"), ("args", "argsOverrider")):
        for overrider in _items(overriders.get(field)):
            obj = _apply_patch(obj, _command_args_patches(obj, target, overrider))
    for meta_field, field in (("labels", "labelsOverrider"), ("annotations", "annotationsOverrider")):
        for overrider in _items(overriders.get(field)):
            patches = _label_annotation_patches(obj, meta_field, overrider)
            if patches:
                obj = _apply_patch(obj, patches)
    obj = _apply_field_overriders(obj, _items(overriders.get("fieldOverrider")))
    plaintext = [
        {"op": as_str(p.get("operator")), "path": as_str(p.get("path")), "value": p.get("value")}
        for p in _items(overriders.get("plaintext"))
    ]
    return _apply_patch(obj, plaintext)


# ---------------------------------------------------------------------------------------------
# Policy selection and ordering
# ---------------------------------------------------------------------------------------------


def _policy_name(policy: Mapping[str, Any]) -> str:
    meta = policy.get("metadata")
    return as_str(meta.get("name")) if isinstance(meta, Mapping) else ""


def _policy_namespace(policy: Mapping[str, Any]) -> str:
    meta = policy.get("metadata")
    return as_str(meta.get("namespace")) if isinstance(meta, Mapping) else ""


def _override_spec(policy: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = policy.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def matching_override_policies(
    manifest: Mapping[str, Any], policies: Iterable[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """Policies whose selectors match ``manifest`` (or that have none), in application order."""
    matched = []
    for policy in policies:
        selectors = _items(_override_spec(policy).get("resourceSelectors"))
        if not selectors or resource_matches_selectors(manifest, selectors):
            matched.append(policy)

    def order(policy: Mapping[str, Any]) -> tuple[ImplicitPriority, str]:
        return override_policy_precision(manifest, policy), _policy_name(policy)

    return sorted(matched, key=order)


def override_rules(policy: Mapping[str, Any]) -> list[tuple[Mapping[str, Any] | None, dict[str, Any]]]:
    """``(targetCluster, overriders)`` of each rule; the deprecated pair when ``overrideRules`` is empty."""
    spec = _override_spec(policy)
    rules = _items(spec.get("overrideRules"))
    if not rules:
        rules = [{"targetCluster": spec.get("targetCluster"), "overriders": spec.get("overriders")}]
    result: list[tuple[Mapping[str, Any] | None, dict[str, Any]]] = []
    for rule in rules:
        target = rule.get("targetCluster")
        overriders = rule.get("overriders")
        result.append(
            (
                target if isinstance(target, Mapping) else None,
                dict(overriders) if isinstance(overriders, Mapping) else {},
            )
        )
    return result


def cluster_overriders(
    manifest: Mapping[str, Any], cluster: Mapping[str, Any], policies: Iterable[Mapping[str, Any]]
) -> list[tuple[Mapping[str, Any], dict[str, Any]]]:
    """``(policy, overriders)`` to apply for ``cluster``, in order (one entry per matching rule)."""
    result = []
    for policy in matching_override_policies(manifest, policies):
        for target, overriders in override_rules(policy):
            if target is None or cluster_object_matches(cluster, target):
                result.append((policy, overriders))
    return result


def apply_overrides(
    manifest: Mapping[str, Any],
    cluster: Mapping[str, Any],
    override_policies: Iterable[Mapping[str, Any]],
    cluster_override_policies: Iterable[Mapping[str, Any]],
) -> tuple[dict[str, Any], list[AppliedOverride]]:
    """The manifest for ``cluster`` after all overrides, and the applied items in application order.

    ``override_policies`` may contain OverridePolicies of any namespace: only those of the object's
    namespace are used (an object without namespace uses none). Raises :class:`OverrideError`.
    """
    obj = json_copy(dict(manifest))
    cluster_meta = cluster.get("metadata")
    cluster_name = as_str(cluster_meta.get("name")) if isinstance(cluster_meta, Mapping) else ""
    applied: list[AppliedOverride] = []

    def apply(policies: Iterable[Mapping[str, Any]], namespace: str | None) -> None:
        """One kind of policy in turn; ``namespace`` None for ClusterOverridePolicies."""
        nonlocal obj
        for policy, overriders in cluster_overriders(obj, cluster, policies):
            name = _policy_name(policy)
            try:
                obj = apply_overriders(obj, overriders)
            except OverrideError as e:
                which = f"cluster override policy({name})" if namespace is None else \
                    f"override policy({namespace}/{name})"
                raise OverrideError(f"Apply {which} for cluster({cluster_name}) failed: {e.message}",
                                    policy_name=name, cluster_scoped=namespace is None) from None
            applied.append(AppliedOverride(name, json_copy(overriders), namespace is None))

    apply(cluster_override_policies, None)
    meta = obj.get("metadata")
    namespace = as_str(meta.get("namespace")) if isinstance(meta, Mapping) else ""
    if namespace:
        apply([p for p in override_policies if (_policy_namespace(p) or namespace) == namespace], namespace)
    return obj, applied


# ---------------------------------------------------------------------------------------------
# The applied-overrides annotations
# ---------------------------------------------------------------------------------------------


def _raw_json(value: Any) -> Any:
    # apiextensionsv1.JSON as read back from the API server: keys sorted at every level.
    if isinstance(value, Mapping):
        return {k: _raw_json(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_raw_json(v) for v in value]
    return value


def _patch_operation(op: Mapping[str, Any], path_key: str) -> dict[str, Any]:
    return {
        path_key: as_str(op.get(path_key)),
        "operator": as_str(op.get("operator")),
        "value": _raw_json(op.get("value")),
    }


def _image_shadow(item: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    predicate = item.get("predicate")
    if isinstance(predicate, Mapping):
        out["predicate"] = {"path": as_str(predicate.get("path"))}
    out["component"] = as_str(item.get("component"))
    out["operator"] = as_str(item.get("operator"))
    if as_str(item.get("value")):
        out["value"] = item["value"]
    return out


def _command_args_shadow(item: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "containerName": as_str(item.get("containerName")),
        "operator": as_str(item.get("operator")),
    }
    values = item.get("value")
    if isinstance(values, list) and values:
        out["value"] = [as_str(v) for v in values]
    return out


def _label_annotation_shadow(item: Mapping[str, Any]) -> dict[str, Any]:
    values = item.get("value")
    sorted_values = {k: values[k] for k in sorted(values)} if isinstance(values, Mapping) else None
    return {"operator": as_str(item.get("operator")), "value": sorted_values}


def _field_shadow(item: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"fieldPath": as_str(item.get("fieldPath"))}
    for key in ("json", "yaml"):
        ops = _items(item.get(key))
        if ops:
            out[key] = [_patch_operation(op, "subPath") for op in ops]
    return out


_SHADOW_FIELDS = (
    ("plaintext", lambda item: _patch_operation(item, "path")),
    ("imageOverrider", _image_shadow),
    ("commandOverrider", _command_args_shadow),
    ("argsOverrider", _command_args_shadow),
    ("labelsOverrider", _label_annotation_shadow),
    ("annotationsOverrider", _label_annotation_shadow),
    ("fieldOverrider", _field_shadow),
)


def _overriders_shadow(overriders: Mapping[str, Any]) -> dict[str, Any]:
    """``policyv1alpha1.Overriders`` as Go marshals it: field order, empty lists omitted."""
    out: dict[str, Any] = {}
    for field, convert in _SHADOW_FIELDS:
        items = _items(overriders.get(field))
        if items:
            out[field] = [convert(item) for item in items]
    return out


def applied_overrides_json(items: Sequence[AppliedOverride | tuple[str, Mapping[str, Any]]]) -> str | None:
    """``[{"policyName":…,"overriders":{…}}]`` sorted (stably) by policy name; None for no items."""
    if not items:
        return None
    shadows = [
        {"policyName": item[0], "overriders": _overriders_shadow(item[1])}
        for item in sorted(items, key=lambda item: item[0])
    ]
    return go_json_dumps(shadows)


def applied_override_annotations(applied: Sequence[AppliedOverride]) -> dict[str, str]:
    """The Work annotations recording ``applied`` (each key only when it has items)."""
    annotations = {}
    cluster_json = applied_overrides_json([a for a in applied if a.cluster_scoped])
    if cluster_json is not None:
        annotations[APPLIED_CLUSTER_OVERRIDES_ANNOTATION] = cluster_json
    namespaced_json = applied_overrides_json([a for a in applied if not a.cluster_scoped])
    if namespaced_json is not None:
        annotations[APPLIED_OVERRIDES_ANNOTATION] = namespaced_json
    return annotations
