"""Evaluation of parsed templates, with kubectl's semantics (k8s.io/client-go/util/jsonpath).

Every step maps a list of values to a list of values. The points where kubectl's behaviour is not
obvious, reproduced here:

* A null value is skipped by fields, wildcards, recursion and indexing. A field found on none of
  its (non-empty list of) inputs is an error unless missing keys are allowed; a key that is
  present with a null value is found.
* Index and slice bounds are checked whatever ``allow_missing_keys`` says ("array index out of
  bounds: index 5, length 2"); an empty selection (``[2:2]``, ``[5:]`` on 5 items) is not an
  error but, as in kubectl, ends the step for the remaining inputs too.
* A filter compares exactly one left and one right value (none: skipped, several: an error), with
  Go template comparison rules: int with int, float with float, string with string, bool only
  with ``==``/``!=``; anything else is an error. An existence filter ``[?(@.x)]`` keeps the items
  for which the left side produced anything, even values it produced while failing (kubectl
  keeps ``[?(@.list[1])]`` items whose list is too short, because the failing index step hands
  its input back).
* ``{range}`` evaluates its body once per result; a null item is seen as "no value" (printed
  ``<no value>``); with no results the body still runs once on no value, output discarded,
  so that strict mode reports the keys it lacks.
* Maps are iterated in insertion order (kubectl: Go's random map order).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flotilla.jsonpath.errors import JSONPathEvaluationError, JSONPathMissingKeyError
from flotilla.jsonpath.formatting import NO_VALUE, go_sprint, go_type_name
from flotilla.jsonpath.nodes import (
    Chain,
    Expression,
    Field,
    Filter,
    Literal,
    Node,
    Range,
    Recursive,
    Slice,
    Step,
    Text,
    Union,
    Wildcard,
)


class _StepFailure(Exception):
    """A failed step, with what it handed back (kubectl returns a value with every error)."""

    def __init__(self, error: JSONPathEvaluationError, partial: list[Any]) -> None:
        super().__init__(error.message)
        self.error = error
        self.partial = partial


def find_results(nodes: tuple[Node, ...], data: Any, *, allow_missing_keys: bool) -> list[list[Any]]:
    """The values of every text and expression node, ``{range}`` bodies expanded (kubectl's FindResults)."""
    evaluator = _Evaluator(allow_missing_keys)
    try:
        return evaluator.run(nodes, NO_VALUE if data is None else data)
    except _StepFailure as failure:
        raise failure.error from None


def evaluate_chain(chain: Chain, data: Any, *, allow_missing_keys: bool) -> list[Any]:
    evaluator = _Evaluator(allow_missing_keys)
    try:
        return evaluator.chain(chain, [NO_VALUE if data is None else data])
    except _StepFailure as failure:
        raise failure.error from None


def _fail(message: str, partial: list[Any]) -> _StepFailure:
    return _StepFailure(JSONPathEvaluationError(message), partial)


class _Evaluator:
    def __init__(self, allow_missing_keys: bool) -> None:
        self.allow_missing_keys = allow_missing_keys

    def run(self, nodes: tuple[Node, ...], current: Any) -> list[list[Any]]:
        out: list[list[Any]] = []
        for node in nodes:
            if isinstance(node, Text):
                out.append([node.text])
            elif isinstance(node, Expression):
                out.append(self.chain(node.chain, [current]))
            elif isinstance(node, Range):
                items = self.chain(node.chain, [current])
                if not items:
                    self.run(node.body, NO_VALUE)
                for item in items:
                    out.extend(self.run(node.body, NO_VALUE if item is None else item))
        return out

    def chain(self, chain: Chain, values: list[Any]) -> list[Any]:
        for step in chain:
            values = self.step(step, values)
        return values

    def step(self, step: Step, values: list[Any]) -> list[Any]:
        if isinstance(step, Field):
            return self._field(step.name, values)
        if isinstance(step, Slice):
            return self._slice(step, values)
        if isinstance(step, Wildcard):
            return [child for value in values for child in _children(value)]
        if isinstance(step, Recursive):
            return _descend(values)
        if isinstance(step, Filter):
            return self._filter(step, values)
        if isinstance(step, Union):
            return self._union(step, values)
        if isinstance(step, Literal):
            # kubectl: a string is one text node whatever the input; numbers and bools are per input
            return [step.value] if isinstance(step.value, str) else [step.value] * len(values)
        raise AssertionError(f"unknown step {step!r}")

    def _field(self, name: str, values: list[Any]) -> list[Any]:
        if not values:
            return []
        found = [value[name] for value in values if isinstance(value, Mapping) and name in value]
        if not found and not self.allow_missing_keys:
            raise _StepFailure(JSONPathMissingKeyError(name), [])
        return found

    def _slice(self, step: Slice, values: list[Any]) -> list[Any]:
        result: list[Any] = []
        for value in values:
            if value is None:
                continue
            if not isinstance(value, list | tuple):
                raise _fail(f"{go_type_name(value)} is not array or slice", values)
            length = len(value)
            start = step.start if step.start is not None else 0
            if start < 0:
                start += length
            end = step.end if step.end is not None else length
            if end < 0 or (end == 0 and step.end_derived):
                end += length
            if start == end:
                return result  # kubectl stops here, skipping the remaining inputs
            if start >= length or start < 0:
                raise _fail(f"array index out of bounds: index {start}, length {length}", values)
            if end > length or end < 0:
                raise _fail(f"array index out of bounds: index {end - 1}, length {length}", values)
            if start > end:
                raise _fail(f"starting index {start} is greater than ending index {end}", values)
            stride = 1
            if step.step is not None:
                if step.step <= 0:
                    raise _fail("step must be > 0", values)
                stride = step.step
            result.extend(value[start:end:stride])
        return result

    def _union(self, step: Union, values: list[Any]) -> list[Any]:
        result: list[Any] = []
        for branch in step.branches:
            try:
                result.extend(self.chain(branch, values))
            except _StepFailure as failure:
                raise _StepFailure(failure.error, values) from None
        return result

    def _filter(self, step: Filter, values: list[Any]) -> list[Any]:
        result: list[Any] = []
        for value in values:
            if not isinstance(value, list | tuple):
                raise _fail(f"{go_sprint(value)} is not array or slice and cannot be filtered", values)
            for item in value:
                try:
                    lefts = self.chain(step.left, [item])
                except _StepFailure as failure:
                    if step.op != "exists":
                        raise _StepFailure(failure.error, values) from None
                    lefts = failure.partial
                if step.op == "exists":
                    if lefts:
                        result.append(item)
                    continue
                if not lefts:
                    continue
                if len(lefts) > 1:
                    raise _fail("can only compare one element at a time", values)
                try:
                    rights = self.chain(step.right, [item])
                except _StepFailure as failure:
                    raise _StepFailure(failure.error, values) from None
                if not rights:
                    continue
                if len(rights) > 1:
                    raise _fail("can only compare one element at a time", values)
                try:
                    keep = compare(step.op, lefts[0], rights[0])
                except JSONPathEvaluationError as error:
                    raise _StepFailure(error, result) from None
                if keep:
                    result.append(item)
        return result


def _children(value: Any) -> list[Any]:
    """What ``*`` and ``..`` see inside a value: map values, list items, a string's UTF-8 bytes."""
    if isinstance(value, Mapping):
        return list(value.values())
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, str):
        return list(value.encode("utf-8", "surrogatepass"))
    return []


def _descend(values: list[Any]) -> list[Any]:
    """kubectl's ``..``: every value that has children, each before its descendants."""
    result: list[Any] = []
    stack: list[list[Any]] = [list(reversed(values))]
    while stack:
        pending = stack[-1]
        if not pending:
            stack.pop()
            continue
        value = pending.pop()
        if isinstance(value, str):
            if value:
                result.append(value)  # a string's bytes have no children of their own
            continue
        children = _children(value)
        if children:
            result.append(value)
            stack.append(list(reversed(children)))
    return result


# -- comparisons (Go text/template eq/lt as forked by client-go) ----------------------------------

_INVALID_TYPE = "invalid type for comparison"
_INCOMPATIBLE = "incompatible types for comparison"


#: Go's ``basicKind`` of the types a decoded value may have that a comparison accepts
_BASIC_KINDS = {"bool": "bool", "int64": "int", "float64": "float", "string": "string"}


def _kind(value: Any) -> str:
    kind = _BASIC_KINDS.get(go_type_name(value))
    if kind is None:
        raise JSONPathEvaluationError(_INVALID_TYPE)
    return kind


def _equal(left: Any, right: Any) -> bool:
    left_kind, right_kind = _kind(left), _kind(right)
    if left_kind != right_kind:
        raise JSONPathEvaluationError(_INCOMPATIBLE)
    return bool(left == right)


def _less(left: Any, right: Any) -> bool:
    left_kind, right_kind = _kind(left), _kind(right)
    if left_kind != right_kind:
        raise JSONPathEvaluationError(_INCOMPATIBLE)
    if left_kind == "bool":
        raise JSONPathEvaluationError(_INVALID_TYPE)
    return bool(left < right)


def compare(op: str, left: Any, right: Any) -> bool:
    """``left op right`` as a kubectl filter decides it; raises :class:`JSONPathEvaluationError`."""
    if op == "==":
        return _equal(left, right)
    if op == "!=":
        return not _equal(left, right)
    if op == "<":
        return _less(left, right)
    if op == ">=":
        return not _less(left, right)
    if op == "<=":
        return _less(left, right) or _equal(left, right)
    if op == ">":
        return not (_less(left, right) or _equal(left, right))
    raise JSONPathEvaluationError(f"unrecognized filter operator {op}")
