"""Decoding request bodies (JSON or YAML) into plain JSON values, safely and within budgets.

YAML is a superset of JSON with features that do not map to JSON (sets, binary, timestamps, non-string
keys) and aliases that can expand a tiny document into a huge one. Like sigs.k8s.io/yaml, keys are
turned into strings and timestamps stay strings; anything else that is not JSON is a 400, and so are
documents that expand past a node budget or nest too deeply to store.

YAML is read with libyaml (PyYAML's C parser and composer) when PyYAML was built with it, with the
pure-Python loader as the fallback; both resolve scalars the same way (no timestamps, no path resolvers)
and construct with PyYAML's SafeConstructor (a repeated key: the last one wins; ``<<`` merge keys).

Budgets, each a Kubernetes Status error:

* aliases: at most :data:`MAX_ALIASES` alias uses, and the values they repeat at most
  :data:`MAX_ALIAS_VALUES` in all - counted on the composed node graph, where a repeated node is one
  object, so a "billion laughs" document is refused in about the time it takes to read it (400);
* nesting: :data:`MAX_DEPTH` levels (400);
* time: a decode that runs past its time budget (:data:`PARSE_SECONDS` by default) stops at the next
  check (every few thousand values) with 413 RequestEntityTooLarge: the body costs more to decode than
  the server spends on one request; sent as JSON, or in smaller parts, it goes through.

The size limit on the raw body is the HTTP layer's (``app.MAX_BODY_BYTES``); where a body is decoded (on
the event loop or in a worker thread) is :mod:`flotilla.apiserver.fairness`' concern.
"""

from __future__ import annotations

import time
from datetime import date, datetime
from typing import Any

import orjson
import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from flotilla.apiserver import errors

MAX_NODES = 2_000_000
MAX_DEPTH = 200  # what the store's JSON encoder accepts with room to spare
MAX_ALIASES = 1000
#: values that alias uses may add to a document beyond what it spells out (each use counts the whole node)
MAX_ALIAS_VALUES = 100_000
#: seconds one body may take to decode
PARSE_SECONDS = 10.0
#: whether PyYAML has libyaml (the C parser); without it the pure-Python loader is used
HAS_LIBYAML = bool(getattr(yaml, "__with_libyaml__", False))

_CHECK_EVERY = 4096  # values between two looks at the clock

_STR = "tag:yaml.org,2002:str"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"

# implicit scalar tags by first character, YAML 1.1's less timestamps (they stay strings, as in Kubernetes)
_IMPLICIT: dict[Any, tuple[tuple[str, Any], ...]] = {
    first: tuple((tag, rx) for tag, rx in resolvers if tag != _TIMESTAMP)
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_WILDCARD = _IMPLICIT.pop(None, ())


class _Clock:
    """The time budget of one decode: ``tick`` looks at the clock every few thousand calls."""

    __slots__ = ("deadline", "seconds", "ticks")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.ticks = 0

    def tick(self) -> None:
        self.ticks += 1
        if self.ticks % _CHECK_EVERY == 0:
            self.check()

    def check(self) -> None:
        if time.monotonic() > self.deadline:
            raise errors.ApiError(
                413, "RequestEntityTooLarge",
                f"the request body takes longer than {self.seconds:g}s to decode; "
                "send it as JSON or split it into smaller objects",
            )


class _Resolving:
    """Scalar resolution for both loaders: YAML 1.1 implicit tags without timestamps, no path resolvers.

    Called by the composer once per scalar, sequence and mapping it builds, which makes it the place
    where the time budget is checked while a document is composed.
    """

    _clock: _Clock

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        return None

    def ascend_resolver(self) -> None:
        return None

    def resolve(self, kind: type[Node], value: Any, implicit: Any) -> str:
        self._clock.tick()
        if kind is ScalarNode:
            if implicit[0]:
                for tag, rx in _IMPLICIT.get(value[:1], ()) + _WILDCARD:
                    if rx.match(value):
                        return tag
            return _STR
        return _SEQ if kind is SequenceNode else _MAP

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        # most values of a manifest are strings: SafeConstructor would return the same ``node.value``
        # after three calls and two lookups
        if node.tag == _STR and node.__class__ is ScalarNode:
            return node.value
        return super().construct_object(node, deep)


class _Loader(_Resolving, yaml.SafeLoader):
    """The pure-Python loader (PyYAML without libyaml)."""

    def __init__(self, stream: Any, clock: _Clock) -> None:
        super().__init__(stream)
        self._clock = clock


if HAS_LIBYAML:
    class _CLoader(_Resolving, yaml.CSafeLoader):
        """libyaml parses and composes; resolution and construction as in :class:`_Loader`."""

        def __init__(self, stream: Any, clock: _Clock) -> None:
            super().__init__(stream)
            self._clock = clock

    _LOADER: type[Any] = _CLoader
else:  # pragma: no cover - the project's environment has libyaml
    _LOADER = _Loader


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def check_aliases(root: Node, clock: _Clock | None = None) -> None:
    """400 if the composed document uses too many aliases, repeats too many values through them, or
    contains itself; counted on the node graph (a repeated node is one object), never by expanding it."""
    size: dict[int, int] = {}  # id(node) -> values once expanded, for nodes done
    open_: set[int] = set()  # nodes whose children are being visited: meeting one again is a cycle
    aliases = 0
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_.discard(key)
            size[key] = min(1 + sum(size[id(c)] for c in _children(node)), MAX_NODES + 1)
            continue
        if key in size or key in open_:
            aliases += 1
            if key in open_:
                raise errors.bad_request("the request body is not valid YAML: an alias refers to a node that "
                                         "contains it (a recursive document)")
            if aliases > MAX_ALIASES:
                raise errors.bad_request(f"the request body uses more than {MAX_ALIASES} YAML aliases; "
                                         "write the repeated parts out or send JSON")
            continue
        if clock is not None:
            clock.tick()
        open_.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node))
    added = size[id(root)] - len(size)
    if added > MAX_ALIAS_VALUES:
        raise errors.bad_request(
            f"the request body's YAML aliases expand it by more than {MAX_ALIAS_VALUES} values "
            f"({min(added, MAX_NODES)}{'+' if added > MAX_NODES else ''}); "
            "write the repeated parts out or send JSON"
        )


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


def to_json_value(value: Any, clock: _Clock | None = None) -> Any:
    """A copy of ``value`` that is plain JSON; raises 400 for what JSON cannot hold or a too-large expansion."""
    budget = MAX_NODES
    tick = clock.tick if clock is not None else None

    def convert(v: Any, depth: int, path: str) -> Any:
        nonlocal budget
        budget -= 1
        if budget < 0:
            raise errors.bad_request("the request body expands to too many values (YAML aliases?)")
        if depth > MAX_DEPTH:
            raise errors.bad_request(f"the request body nests deeper than {MAX_DEPTH} levels")
        if v is None or isinstance(v, (str, bool)):
            return v
        if tick is not None:
            tick()
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


def _load_yaml(raw: bytes, clock: _Clock, pure: bool) -> Any:
    """One YAML document as Python values (SafeConstructor's), within the alias and time budgets."""
    loader = (_Loader if pure else _LOADER)(raw, clock)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        clock.check()
        if b"*" in raw:  # no alias without an asterisk
            check_aliases(node, clock)
        value = loader.construct_document(node)
        clock.check()
        return value
    finally:
        loader.dispose()


def not_json(e: Exception) -> errors.ApiError:
    return errors.bad_request(f"the request body is not valid JSON: {e}")


def parse_json(raw: bytes) -> Any:
    """The JSON value of ``raw``; raises ``orjson.JSONDecodeError`` if it is not JSON, 400 if too deep."""
    value = orjson.loads(raw)
    # a document cannot nest deeper than it has brackets: most bodies need no walk at all
    if raw.count(b"{") + raw.count(b"[") > MAX_DEPTH and not _depth_ok(value):
        raise errors.bad_request(f"the request body nests deeper than {MAX_DEPTH} levels")
    return value


def parse_yaml(raw: bytes, *, seconds: float = PARSE_SECONDS, pure: bool = False) -> Any:
    """The JSON value of one YAML document; 400 for what JSON cannot hold or a broken budget, 413 if it
    takes longer than ``seconds``. ``pure`` forces the pure-Python loader (as where PyYAML lacks libyaml)."""
    clock = _Clock(seconds)
    try:
        loaded = _load_yaml(raw, clock, pure)
    except RecursionError:
        raise errors.bad_request(f"the request body nests deeper than {MAX_DEPTH} levels") from None
    except yaml.YAMLError as e:
        raise errors.bad_request(f"the request body is not valid YAML: {e}") from None
    try:
        return to_json_value(loaded, clock)
    except RecursionError:
        raise errors.bad_request(f"the request body nests deeper than {MAX_DEPTH} levels") from None


def parse_body(raw: bytes, *, yaml_ok: bool, seconds: float = PARSE_SECONDS, pure: bool = False) -> Any:
    """The JSON value of a request body: JSON first, YAML when ``yaml_ok`` and the body is not JSON."""
    try:
        return parse_json(raw)
    except orjson.JSONDecodeError as e:
        if not yaml_ok:
            raise not_json(e) from None
    return parse_yaml(raw, seconds=seconds, pure=pure)
