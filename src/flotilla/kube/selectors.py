"""Label and field selectors with Kubernetes (apimachinery) syntax and semantics.

Pure functions, no I/O. Everything raises :class:`SelectorError` on malformed input; the API server
turns that into a 400 BadRequest.

Label selectors (``?labelSelector=``)
    ``k=v``, ``k==v``, ``k!=v`` (also matches objects without ``k``), ``k in (a,b)``,
    ``k notin (a,b)`` (also matches objects without ``k``), ``k`` (exists), ``!k`` (absent) and the
    numeric ``k>5`` / ``k<5`` that apimachinery also accepts. Comma means AND; commas inside
    parentheses separate values. Whitespace between tokens is ignored. ``k=`` means "value is the
    empty string" and ``k in ()`` is the set ``{""}``, as upstream. Keys are validated as qualified
    names (optional DNS-subdomain prefix, ``example.com/x``) and values as label values.

Field selectors (``?fieldSelector=``)
    ``f=v``, ``f==v``, ``f!=v``; comma means AND. A backslash escapes ``\\``, ``,`` and ``=`` in values;
    any other escape, or an unescaped ``=``/``,`` in a value, is an error (as upstream).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from flotilla.kube import content

__all__ = [
    "FieldSelector",
    "LabelSelector",
    "Operator",
    "Requirement",
    "SelectorError",
    "check_supported",
    "label_selector_from_dict",
    "object_field_value",
    "parse_field_selector",
    "parse_label_selector",
    "validate_label_key",
    "validate_label_value",
]


class SelectorError(ValueError):
    """A malformed or unsupported label/field selector (the server answers 400 BadRequest)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# ---------------------------------------------------------------------------------------------
# Validation of label keys and values (k8s.io/apimachinery/pkg/util/validation semantics)
# ---------------------------------------------------------------------------------------------


def _check_label_text(what: str, text: Any, errors: Callable[..., list[str]]) -> None:
    if not isinstance(text, str):
        raise SelectorError(f"invalid {what} {text!r}: must be a string")
    problems = errors(text, legacy=True)
    if problems:
        raise SelectorError(f"invalid {what} {text!r}: {'; '.join(problems)}")


def validate_label_key(key: str) -> None:
    """Raise :class:`SelectorError` unless ``key`` is a valid label key (qualified name)."""
    _check_label_text("label key", key, content.label_key_errors)


def validate_label_value(value: str) -> None:
    """Raise :class:`SelectorError` unless ``value`` is a valid label value (may be empty)."""
    _check_label_text("label value", value, content.label_value_errors)


# ---------------------------------------------------------------------------------------------
# Label selector model
# ---------------------------------------------------------------------------------------------


class Operator(StrEnum):
    """Label requirement operators (the string values are apimachinery's ``selection.Operator``)."""

    EQUALS = "="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


_SINGLE_VALUE_OPS = frozenset({Operator.EQUALS, Operator.NOT_EQUALS})
_SET_OPS = frozenset({Operator.IN, Operator.NOT_IN})
_EXISTENCE_OPS = frozenset({Operator.EXISTS, Operator.DOES_NOT_EXIST})
_NUMERIC_OPS = frozenset({Operator.GREATER_THAN, Operator.LESS_THAN})
_INT_RE = re.compile(r"[+-]?[0-9]+")


def _parse_int64(text: str) -> int | None:
    if not _INT_RE.fullmatch(text):
        return None
    number = int(text)
    if not -(2**63) <= number < 2**63:
        return None
    return number


@dataclass(frozen=True, order=True)
class Requirement:
    """One clause of a label selector. ``values`` is sorted and de-duplicated."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    @classmethod
    def create(cls, key: str, operator: Operator | str, values: Iterable[str] = ()) -> Requirement:
        """Validate and build a requirement (mirrors apimachinery's ``NewRequirement`` checks)."""
        try:
            op = Operator(operator)
        except ValueError:
            raise SelectorError(f"{operator!r} is not a valid label selector operator") from None
        validate_label_key(key)
        vals = list(values)
        if op in _SET_OPS and not vals:
            raise SelectorError(f"for 'in', 'notin' operators, values set can't be empty (key {key!r})")
        if op in _SINGLE_VALUE_OPS and len(vals) != 1:
            raise SelectorError(f"exact-match compatibility requires one single value (key {key!r})")
        if op in _EXISTENCE_OPS and vals:
            raise SelectorError(f"values set must be empty for exists and does not exist (key {key!r})")
        if op in _NUMERIC_OPS:
            if len(vals) != 1:
                raise SelectorError(f"for 'Gt', 'Lt' operators, exactly one value is required (key {key!r})")
            if _parse_int64(vals[0]) is None:
                raise SelectorError(
                    f"for 'Gt', 'Lt' operators, the value must be an integer (key {key!r}, value {vals[0]!r})"
                )
        for v in vals:
            validate_label_value(v)
        return cls(key, op, tuple(sorted(set(vals))))

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        present = self.key in labels
        if op is Operator.EXISTS:
            return present
        if op is Operator.DOES_NOT_EXIST:
            return not present
        if op in (Operator.EQUALS, Operator.IN):
            return present and labels[self.key] in self.values
        if op in (Operator.NOT_EQUALS, Operator.NOT_IN):
            return not present or labels[self.key] not in self.values
        # Gt / Lt: the label must exist and parse as an integer.
        if not present:
            return False
        actual = _parse_int64(labels[self.key])
        wanted = _parse_int64(self.values[0])
        if actual is None or wanted is None:
            return False
        return actual > wanted if op is Operator.GREATER_THAN else actual < wanted

    def __str__(self) -> str:
        op = self.operator
        if op is Operator.EXISTS:
            return self.key
        if op is Operator.DOES_NOT_EXIST:
            return f"!{self.key}"
        if op in _SET_OPS:
            return f"{self.key} {op.value} ({','.join(self.values)})"
        symbol = {Operator.GREATER_THAN: ">", Operator.LESS_THAN: "<"}.get(op, op.value)
        return f"{self.key}{symbol}{self.values[0]}"


@dataclass(frozen=True)
class LabelSelector:
    """A conjunction of :class:`Requirement`s. The empty selector matches every object.

    ``LabelSelector.nothing()`` is the selector that matches no object (what a ``null``
    ``metav1.LabelSelector`` means to ``LabelSelectorAsSelector``); it renders as ``""`` like
    upstream, so do not round-trip it through a string.
    """

    requirements: tuple[Requirement, ...] = ()
    matches_nothing: bool = field(default=False, compare=True)

    def __post_init__(self) -> None:
        # Canonical order: by key, then operator and values; duplicates removed.
        object.__setattr__(self, "requirements", tuple(sorted(set(self.requirements))))

    @classmethod
    def everything(cls) -> LabelSelector:
        return cls()

    @classmethod
    def nothing(cls) -> LabelSelector:
        return cls((), matches_nothing=True)

    @property
    def empty(self) -> bool:
        """True when the selector has no requirements (and therefore matches everything)."""
        return not self.requirements and not self.matches_nothing

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.matches_nothing:
            return False
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


# ---------------------------------------------------------------------------------------------
# Label selector parser
# ---------------------------------------------------------------------------------------------

_WHITESPACE = " \t\r\n"
_SPECIAL = "=!(),<>"
# Longest match first.
_SYMBOLS = ("==", "!=", "=", "!", "(", ")", ",", ">", "<")
_EOS = ""  # token kind for end of string


@dataclass(frozen=True)
class _Token:
    kind: str  # "ident", one of _SYMBOLS, or _EOS
    text: str


def _tokenize(s: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(s)
    while True:
        while i < n and s[i] in _WHITESPACE:
            i += 1
        if i >= n:
            tokens.append(_Token(_EOS, ""))
            return tokens
        if s[i] in _SPECIAL:
            for sym in _SYMBOLS:
                if s.startswith(sym, i):
                    tokens.append(_Token(sym, sym))
                    i += len(sym)
                    break
            continue
        start = i
        while i < n and s[i] not in _WHITESPACE and s[i] not in _SPECIAL:
            i += 1
        tokens.append(_Token("ident", s[start:i]))


class _LabelParser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.pos = 0

    def peek(self) -> _Token:
        return self.tokens[self.pos]

    def take(self) -> _Token:
        tok = self.tokens[self.pos]
        if tok.kind != _EOS:
            self.pos += 1
        return tok

    def fail(self, found: _Token, expected: str, *, requirement: bool = False) -> SelectorError:
        prefix = "unable to parse requirement: " if requirement else ""
        return SelectorError(
            f"invalid label selector {self.text!r}: {prefix}found '{found.text}', expected: {expected}"
        )

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            tok = self.peek()
            if tok.kind == _EOS:
                return requirements
            if tok.kind not in ("ident", "!"):
                raise self.fail(tok, "!, identifier, or 'end of string'")
            requirements.append(self.requirement())
            after = self.take()
            if after.kind == _EOS:
                return requirements
            if after.kind != ",":
                raise self.fail(after, "',' or 'end of string'")
            nxt = self.peek()
            if nxt.kind not in ("ident", "!"):
                raise self.fail(nxt, "identifier after ','")

    def requirement(self) -> Requirement:
        negated = False
        tok = self.take()
        if tok.kind == "!":
            negated = True
            tok = self.take()
        if tok.kind != "ident":
            raise self.fail(tok, "identifier", requirement=True)
        key = tok.text
        validate_label_key(key)
        if negated:
            return Requirement.create(key, Operator.DOES_NOT_EXIST)
        if self.peek().kind in (_EOS, ","):
            return Requirement.create(key, Operator.EXISTS)
        op_tok = self.take()
        if op_tok.kind == "ident" and op_tok.text in ("in", "notin"):
            op = Operator.IN if op_tok.text == "in" else Operator.NOT_IN
            return Requirement.create(key, op, self.value_set())
        symbol_ops = {
            "=": Operator.EQUALS,
            "==": Operator.EQUALS,
            "!=": Operator.NOT_EQUALS,
            ">": Operator.GREATER_THAN,
            "<": Operator.LESS_THAN,
        }
        if op_tok.kind not in symbol_ops:
            raise self.fail(op_tok, "in, notin, =, ==, !=, gt, lt", requirement=True)
        return Requirement.create(key, symbol_ops[op_tok.kind], [self.exact_value()])

    def exact_value(self) -> str:
        if self.peek().kind in (_EOS, ","):
            return ""  # "k=" selects the empty value
        tok = self.take()
        if tok.kind != "ident":
            raise self.fail(tok, "identifier", requirement=True)
        return tok.text

    def value_set(self) -> list[str]:
        tok = self.take()
        if tok.kind != "(":
            raise self.fail(tok, "'('", requirement=True)
        values: list[str] = []
        expect_value = True  # at the start and after each comma
        while True:
            tok = self.take()
            if tok.kind == ")":
                if expect_value:
                    values.append("")  # "()" and "(a,)" contain the empty value
                return values
            if tok.kind == "ident" and expect_value:
                values.append(tok.text)
                expect_value = False
            elif tok.kind == ",":
                if expect_value:
                    values.append("")  # "(,a)" and "(a,,b)"
                expect_value = True
            elif tok.kind == "ident":
                raise self.fail(tok, "',' or ')'", requirement=True)
            else:
                raise self.fail(tok, "',', ')' or identifier", requirement=True)


def parse_label_selector(s: str | None) -> LabelSelector:
    """Parse a label selector string (already URL-decoded). ``""``/``None`` select everything."""
    if s is None:
        return LabelSelector()
    if not isinstance(s, str):
        raise SelectorError("label selector must be a string")
    return LabelSelector(tuple(_LabelParser(s).parse()))


_DICT_OPERATORS = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
}


def label_selector_from_dict(sel: Mapping[str, Any] | None) -> LabelSelector:
    """Convert a ``metav1.LabelSelector`` (``{matchLabels, matchExpressions}``) to a selector.

    ``None`` gives :meth:`LabelSelector.nothing` and ``{}`` gives the empty (match-all) selector,
    as ``metav1.LabelSelectorAsSelector`` does.
    """
    if sel is None:
        return LabelSelector.nothing()
    if not isinstance(sel, Mapping):
        raise SelectorError("label selector must be an object")
    requirements: list[Requirement] = []
    match_labels = sel.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        raise SelectorError("matchLabels must be an object")
    for key, value in match_labels.items():
        if not isinstance(value, str):
            raise SelectorError(f"matchLabels[{key!r}]: value must be a string")
        requirements.append(Requirement.create(key, Operator.EQUALS, [value]))
    expressions = sel.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise SelectorError("matchExpressions must be a list")
    for i, expr in enumerate(expressions):
        where = f"matchExpressions[{i}]"
        if not isinstance(expr, Mapping):
            raise SelectorError(f"{where}: must be an object")
        key = expr.get("key")
        if not isinstance(key, str):
            raise SelectorError(f"{where}.key: Required value")
        operator = expr.get("operator")
        if operator not in _DICT_OPERATORS:
            raise SelectorError(f"{where}.operator: {operator!r} is not a valid label selector operator")
        op = _DICT_OPERATORS[operator]
        values = expr.get("values") or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise SelectorError(f"{where}.values: must be a list of strings")
        if op in _SET_OPS and not values:
            raise SelectorError(
                f"{where}.values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
            )
        if op in _EXISTENCE_OPS and values:
            raise SelectorError(
                f"{where}.values: Forbidden: may not be specified when `operator` is 'Exists' or "
                "'DoesNotExist'"
            )
        requirements.append(Requirement.create(key, op, values))
    return LabelSelector(tuple(requirements))


# ---------------------------------------------------------------------------------------------
# Field selectors
# ---------------------------------------------------------------------------------------------

FieldRequirement = tuple[str, str, str]  # (field, "=" or "!=", value)


def _escape_field_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


@dataclass(frozen=True)
class FieldSelector:
    """A conjunction of ``(field, op, value)`` requirements; ``op`` is ``"="`` or ``"!="``
    (``==`` is normalised to ``=``). The empty selector matches everything."""

    requirements: tuple[FieldRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    @property
    def fields(self) -> list[str]:
        return [f for f, _, _ in self.requirements]

    def matches(self, getter: Callable[[str], str | None]) -> bool:
        """``getter(field)`` returns the object's value for a field; ``None`` counts as ``""``."""
        for fld, op, value in self.requirements:
            actual = getter(fld)
            actual = "" if actual is None else actual
            if (actual == value) != (op == "="):
                return False
        return True

    def matches_object(self, obj: Mapping[str, Any]) -> bool:
        return self.matches(lambda f: object_field_value(obj, f))

    def value_for(self, fld: str) -> str | None:
        """The value an ``=`` requirement pins ``fld`` to (handy for ``metadata.name`` lookups)."""
        for f, op, value in self.requirements:
            if f == fld and op == "=":
                return value
        return None

    def __str__(self) -> str:
        return ",".join(f"{f}{op}{_escape_field_value(v)}" for f, op, v in self.requirements)


def _split_unescaped(s: str, sep: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    escaped = False
    for ch in s:
        if escaped:
            current.append(ch)
            escaped = False
        elif ch == "\\":
            current.append(ch)
            escaped = True
        elif ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _unescape_field_value(raw: str, selector: str) -> str:
    out: list[str] = []
    escaped = False
    for ch in raw:
        if escaped:
            if ch not in "\\,=":
                raise SelectorError(f"invalid field selector {selector!r}: invalid escape sequence '\\{ch}'")
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ",=":
            raise SelectorError(
                f"invalid field selector {selector!r}: invalid field selector value: unescaped '{ch}'"
            )
        else:
            out.append(ch)
    if escaped:
        raise SelectorError(f"invalid field selector {selector!r}: invalid escape sequence '\\'")
    return "".join(out)


_FIELD_OPS = ("!=", "==", "=")
_FIELD_NAME_RE = re.compile(r"[^\s\\!=,]+")  # non-empty; no whitespace, backslash, '!', '=' or ','


def parse_field_selector(s: str | None) -> FieldSelector:
    """Parse a field selector string (already URL-decoded). ``""``/``None`` select everything.

    Field names and values are stripped of surrounding whitespace (upstream does not strip, but a
    field name with spaces is never supported anyway).
    """
    if s is None:
        return FieldSelector()
    if not isinstance(s, str):
        raise SelectorError("field selector must be a string")
    requirements: list[FieldRequirement] = []
    for term in _split_unescaped(s, ","):
        if not term.strip():
            continue
        # The first operator occurrence (scanning left to right) splits the term.
        found: tuple[int, str] | None = None
        for i in range(len(term)):
            op = next((o for o in _FIELD_OPS if term.startswith(o, i)), None)
            if op is not None:
                found = (i, op)
                break
        if found is None:
            raise SelectorError(f"invalid field selector {s!r}: can't understand {term!r}")
        i, op = found
        fld = term[:i].strip()
        if not _FIELD_NAME_RE.fullmatch(fld):
            raise SelectorError(f"invalid field selector {s!r}: can't understand {term!r}: bad field name")
        value = _unescape_field_value(term[i + len(op) :].strip(), s)
        requirements.append((fld, "!=" if op == "!=" else "=", value))
    return FieldSelector(tuple(requirements))


# Fields whose selectable value is not at the dotted path of the same name, per kind.
_FIELD_ALIASES: dict[tuple[str, str], str] = {
    ("Event", "source"): "source.component",
}


def _scalar_to_field_string(value: Any) -> str | None:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return None  # maps and lists are not selectable


def object_field_value(obj: Mapping[str, Any], field: str) -> str | None:
    """The field-selector value of ``field`` (a dotted path such as ``spec.nodeName``) in ``obj``.

    Missing fields give ``""`` (Kubernetes field sets contain every selectable field, defaulting to
    the empty string); booleans give ``"true"``/``"false"``; numbers their decimal form. A path that
    ends on a map or a list gives ``None`` (not selectable).
    """
    path = _FIELD_ALIASES.get((str(obj.get("kind", "")), field), field)
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return _FIELD_DEFAULTS.get((str(obj.get("kind", "")), field), "")
        current = current[part]
    return _scalar_to_field_string(current)


# Field-set values Kubernetes gives absent boolean fields (a Node without spec.unschedulable is "false")
_FIELD_DEFAULTS: dict[tuple[str, str], str] = {("Node", "spec.unschedulable"): "false"}


def check_supported(selector: FieldSelector, supported: Iterable[str]) -> None:
    """Raise ``SelectorError('field label not supported: <field>')`` for the first field of
    ``selector`` that is not in ``supported``."""
    allowed = supported if isinstance(supported, (set, frozenset)) else set(supported)
    for fld, _, _ in selector.requirements:
        if fld not in allowed:
            raise SelectorError(f"field label not supported: {fld}")
