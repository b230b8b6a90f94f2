"""Parsed templates and the module-level entry points (parse, parse_expression, evaluate)."""

from __future__ import annotations

import functools
from typing import Any, Final

from flotilla.jsonpath.errors import JSONPathSyntaxError
from flotilla.jsonpath.evaluator import find_results
from flotilla.jsonpath.formatting import NO_VALUE, format_value
from flotilla.jsonpath.nodes import Expression, Node
from flotilla.jsonpath.parser import parse_nodes

_EXPRESSION_STARTS: Final = frozenset(".$@[")


class Template:
    """A parsed kubectl JSONPath template. Immutable; safe to share and reuse."""

    __slots__ = ("nodes", "source")

    def __init__(self, source: str, nodes: tuple[Node, ...]) -> None:
        self.source = source
        self.nodes = nodes

    def __repr__(self) -> str:
        return f"Template({self.source!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Template) and other.source == self.source

    def __hash__(self) -> int:
        return hash(self.source)

    def execute(self, data: Any, *, allow_missing_keys: bool = False) -> list[list[Any]]:
        """The values of each text and ``{...}`` node in order, ``{range}`` bodies expanded.

        Text nodes give ``[text]``. Values are the objects found in ``data`` (not copies).
        Raises :class:`JSONPathMissingKeyError` for a missing field unless ``allow_missing_keys``,
        and :class:`JSONPathEvaluationError` for other failures (index out of bounds, filtering a
        non-list, comparing incompatible types ...).
        """
        results = find_results(self.nodes, data, allow_missing_keys=allow_missing_keys)
        return [[None if value is NO_VALUE else value for value in values] for values in results]

    def render(self, data: Any, *, allow_missing_keys: bool = False) -> str:
        """What ``kubectl get -o jsonpath=TEMPLATE`` prints for ``data`` (without a trailing newline).

        Each node's values are printed separated by one space; strings raw, numbers and booleans
        as Go prints them, maps and lists as compact JSON (see :mod:`flotilla.jsonpath.formatting`).
        """
        results = find_results(self.nodes, data, allow_missing_keys=allow_missing_keys)
        return "".join(" ".join(format_value(value) for value in values) for values in results)


def parse(template: str) -> Template:
    """Parse a kubectl JSONPath template such as ``{range .items[*]}{.metadata.name}{"\\n"}{end}``.

    Raises :class:`JSONPathSyntaxError` (with ``message`` and ``position``).
    """
    return Template(template, parse_nodes(template))


@functools.lru_cache(maxsize=1024)
def parse_expression(expression: str) -> Template:
    """Parse one expression, with or without braces: ``.status.phase``, ``status.phase``,
    ``$.status.phase``, ``{.status.phase}``, ``{ .jobStatus.jobId }``.

    Without braces, a leading ``.`` is added unless the expression starts with ``.``, ``$``,
    ``@`` or ``[`` (as kubectl's RelaxedJSONPathExpression does for custom columns). The result
    must be a single action: text, several actions or ``{range}`` are a syntax error.
    """
    stripped = expression.strip()
    if not stripped:
        raise JSONPathSyntaxError("empty expression", 0, expression)
    if stripped.startswith("{"):
        prefix = ""
    elif stripped[0] in _EXPRESSION_STARTS:
        prefix = "{"
    else:
        prefix = "{."
    source = prefix + stripped + ("}" if prefix else "")
    try:
        template = parse(source)
    except JSONPathSyntaxError as error:
        # report the position in what the caller wrote, not in the braced form
        shift = len(expression) - len(expression.lstrip()) - len(prefix)
        position = min(max(error.position + shift, 0), len(expression))
        raise JSONPathSyntaxError(error.message, position, expression) from None
    if len(template.nodes) != 1 or not isinstance(template.nodes[0], Expression):
        raise JSONPathSyntaxError(
            "expected a single expression such as {.status.phase}, without text or {range}", 0, expression
        )
    return template


def evaluate(expression: str, data: Any, *, allow_missing_keys: bool = False) -> list[Any]:
    """The values ``expression`` (see :func:`parse_expression`) selects in ``data``."""
    results = parse_expression(expression).execute(data, allow_missing_keys=allow_missing_keys)
    return results[0]
