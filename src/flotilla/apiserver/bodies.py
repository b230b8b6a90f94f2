"""Decoding request bodies (JSON or YAML) into plain JSON values, safely.

YAML is a superset of JSON with features that do not map to JSON (sets, binary, timestamps, non-string
keys) and aliases that can expand a tiny document into a huge one. Like sigs.k8s.io/yaml, keys are
turned into strings and timestamps stay strings; anything else that is not JSON is a 400, and so are
documents that expand past a node budget or nest too deeply to store.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import orjson
import yaml

from flotilla.apiserver import errors

MAX_NODES = 2_000_000
MAX_DEPTH = 200  # what the store's JSON encoder accepts with room to spare
MAX_ALIASES = 1000


class _Loader(yaml.SafeLoader):
    """SafeLoader that keeps timestamps as strings and limits aliases."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.events.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise yaml.YAMLError(f"the document uses more than {MAX_ALIASES} aliases")
        return super().compose_node(parent, index)


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _key(k: Any, path: str) -> str:
    if isinstance(k, str):
        return k
    if isinstance(k, bool):
        return "true" if k else "false"
    if isinstance(k, (int, float)) or k is None:
        return "null" if k is None else str(k)
    if isinstance(k, (date, datetime)):
        return k.isoformat()
    raise errors.bad_request(f"the request body has a map key at {path or '<root>'} that is not a string: {k!r}")


def to_json_value(value: Any) -> Any:
    """A copy of ``value`` that is plain JSON; raises 400 for what JSON cannot hold or a too-large expansion."""
    budget = MAX_NODES

    def convert(v: Any, depth: int, path: str) -> Any:
        nonlocal budget
        budget -= 1
        if budget < 0:
            raise errors.bad_request("the request body expands to too many values (YAML aliases?)")
        if depth > MAX_DEPTH:
            raise errors.bad_request(f"the request body nests deeper than {MAX_DEPTH} levels")
        if v is None or isinstance(v, (str, bool)):
            return v
        if isinstance(v, int):
            if -(1 << 63) <= v < (1 << 64):
                return v
            try:  # beyond 64 bits a number is a float, as when JSON is decoded (orjson, Kubernetes)
                return float(v)
            except OverflowError:
                raise errors.bad_request(f"the request body has a number out of range at {path or '<root>'}") from None
        if isinstance(v, float):
            if v != v or v in (float("inf"), float("-inf")):
                raise errors.bad_request(f"the request body has a non-finite number at {path or '<root>'}")
            return v
        if isinstance(v, dict):
            return {(kk := _key(k, path)): convert(x, depth + 1, f"{path}.{kk}" if path else kk)
                    for k, x in v.items()}
        if isinstance(v, list):
            return [convert(x, depth + 1, f"{path}[{i}]") for i, x in enumerate(v)]
        if isinstance(v, (date, datetime)):
            return v.isoformat()
        raise errors.bad_request(
            f"the request body has a {type(v).__name__} at {path or '<root>'}, which JSON cannot represent"
        )

    return convert(value, 0, "")


def _depth_ok(value: Any) -> bool:
    stack = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if d > MAX_DEPTH:
            return False
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
    return True


def parse_body(raw: bytes, *, yaml_ok: bool) -> Any:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        if not yaml_ok:
            raise errors.bad_request(f"the request body is not valid JSON: {e}") from None
    else:
        # a document cannot nest deeper than it has brackets: most bodies need no walk at all
        if raw.count(b"{") + raw.count(b"[") > MAX_DEPTH and not _depth_ok(value):
            raise errors.bad_request(f"the request body nests deeper than {MAX_DEPTH} levels")
        return value
    try:
        loaded = yaml.load(raw, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except RecursionError:
        raise errors.bad_request(f"the request body nests deeper than {MAX_DEPTH} levels") from None
    except yaml.YAMLError as e:
        raise errors.bad_request(f"the request body is not valid YAML: {e}") from None
    try:
        return to_json_value(loaded)
    except RecursionError:
        raise errors.bad_request(f"the request body nests deeper than {MAX_DEPTH} levels") from None
