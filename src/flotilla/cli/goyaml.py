"""YAML as ``karmadactl interpret`` prints a result: a JSON value written by Go's ``gopkg.in/yaml.v3`` encoder.

karmadactl turns each result into JSON and back (so every number is a float64) and encodes it with yaml.v3's
defaults. What that means, and what :func:`dump` does:

* block style, 4-space indentation; a sequence under a mapping key is indented too, and the content of a
  sequence item starts right after its ``- ``;
* mapping keys in yaml.v3's order: runs of digits compare as numbers, letters by code point, and other characters
  sort before letters (``a2`` < ``a10``, ``a_b`` < ``aB``);
* numbers as Go's ``strconv.FormatFloat(f, 'g', -1, 64)`` (``3``, ``0.5``, ``1e+06``);
* a string is plain unless, unquoted, it would read as something else under yaml.v3's rules (null, bool, number,
  timestamp) or as a YAML 1.1 bool or base-60 number (``yes``, ``on``, ``1:20``): those are double-quoted; a
  string plain style cannot carry (leading space, ``*`` or ``: `` and so on) is single-quoted; one with a line
  break is a literal block (``|``, ``|-`` or ``|+``);
* an empty mapping or sequence is ``{}`` or ``[]``.

The emitter is PyYAML's (a port of libyaml, as yaml.v3's is), with yaml.v3's indentation rule and resolver.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from typing import Any

import yaml
from yaml.emitter import Emitter
from yaml.nodes import ScalarNode
from yaml.representer import SafeRepresenter
from yaml.serializer import Serializer

from flotilla.jsonpath.formatting import go_float_v

__all__ = ["dump", "key_less", "resolves_to_string"]

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"

_IN_MAP: dict[str, str] = {
    **dict.fromkeys(("true", "True", "TRUE", "false", "False", "FALSE"), _BOOL),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), _NULL),
    **dict.fromkeys((".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF",
                     "-.inf", "-.Inf", "-.INF"), _FLOAT),
}
_YAML_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_GO_FLOAT = re.compile(r"[-+]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[iI]nf(?:inity)?|[nN]a[nN])")
_INT_FORMS = (
    (re.compile(r"[-+]?0[xX][0-9a-fA-F]+"), 16), (re.compile(r"[-+]?0[oO][0-7]+"), 8),
    (re.compile(r"[-+]?0[bB][01]+"), 2), (re.compile(r"[-+]?0[0-7]*"), 8), (re.compile(r"[-+]?[1-9][0-9]*"), 10),
)
_TIMESTAMP_RE = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})(?:(?:[Tt](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.\d+)?"
                           r"(?:Z|[+-]\d{2}:\d{2}))|(?: (\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.\d+)?))?")
_BASE60_FLOAT = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?")
_OLD_BOOLS = frozenset(("y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "n", "N", "no", "No", "NO",
                        "off", "Off", "OFF"))


def _go_int(text: str) -> bool:
    """Whether Go's ``strconv.ParseInt(text, 0, 64)`` or ``ParseUint`` accepts ``text``."""
    for form, base in _INT_FORMS:
        if form.fullmatch(text):
            digits = text.lstrip("+-")
            body = digits[2:] if base in (16, 2) or digits[:2] in ("0o", "0O") else digits
            value = int(body or "0", base)
            return value < 2**64 if not text.startswith("-") else value <= 2**63
    return False


def _timestamp(text: str) -> bool:
    m = _TIMESTAMP_RE.fullmatch(text)
    if m is None:
        return False
    month, day = int(m.group(2)), int(m.group(3))
    clock = [int(x) for x in (m.group(4, 5, 6) if m.group(4) else m.group(7, 8, 9)) if x is not None]
    return 1 <= month <= 12 and 1 <= day <= 31 and (not clock or (clock[0] < 24 and clock[1] < 60 and clock[2] < 60))


def _resolve(text: str) -> str:
    """The tag yaml.v3 gives ``text`` written as a plain scalar."""
    if text in _IN_MAP:
        return _IN_MAP[text]
    first = text[0]
    if first == ".":
        return _FLOAT if _GO_FLOAT.fullmatch(text) else _STR
    if first in "+-0123456789":
        if _timestamp(text):
            return _TIMESTAMP
        plain = text.replace("_", "")
        if _go_int(plain):
            return _INT
        if _YAML_FLOAT.fullmatch(plain):
            return _FLOAT
    return _STR


def resolves_to_string(text: str) -> bool:
    """Whether yaml.v3 writes ``text`` unquoted (plain), as far as its meaning goes."""
    return _resolve(text) == _STR and not (_BASE60_FLOAT.fullmatch(text) or text in _OLD_BOOLS)


def _is_letter(c: str) -> bool:
    return c.isalpha()


def key_less(a: str, b: str) -> bool:
    """yaml.v3's order of two mapping keys (its ``keyList.Less`` for strings)."""
    digits = False
    for i in range(min(len(a), len(b))):
        if a[i] == b[i]:
            digits = a[i].isdigit()
            continue
        al, bl = _is_letter(a[i]), _is_letter(b[i])
        if al and bl:
            return a[i] < b[i]
        if al or bl:
            return al if digits else bl
        an = bn = 0
        if a[i] == "0" or b[i] == "0":
            j = i - 1
            while j >= 0 and a[j].isdigit():
                if a[j] != "0":
                    an = bn = 1
                    break
                j -= 1
        ai = i
        while ai < len(a) and a[ai].isdigit():
            an = an * 10 + int(a[ai])
            ai += 1
        bi = i
        while bi < len(b) and b[bi].isdigit():
            bn = bn * 10 + int(b[bi])
            bi += 1
        if an != bn:
            return an < bn
        if ai != bi:
            return ai < bi
        return a[i] < b[i]
    return len(a) < len(b)


_KEY = functools.cmp_to_key(lambda a, b: -1 if key_less(a, b) else (1 if key_less(b, a) else 0))


class _Number(str):
    """A number already written as Go writes a float64."""


class _Emitter(Emitter):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # yaml.v3: never indentless; the node of a sequence item starts after "- ", everything else goes to the
        # next multiple of the indentation
        self.indents.append(self.indent)
        if self.indent is None:
            self.indent = self.best_indent if flow else 0
        elif self.states and self.states[-1] == self.expect_block_sequence_item:
            self.indent += 2
        else:
            self.indent = self.best_indent * ((self.indent + self.best_indent) // self.best_indent)

    def expect_block_sequence(self) -> None:
        self.increase_indent(flow=False, indentless=False)
        self.state = self.expect_first_block_sequence_item


class _Representer(SafeRepresenter):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: _Representer, data: str) -> ScalarNode:
    if "\n" in data:
        style: str | None = "|"
    elif resolves_to_string(data):
        style = None
    else:
        style = '"'
    return dumper.represent_scalar(_STR, data, style=style)


def _represent_number(dumper: _Representer, data: _Number) -> ScalarNode:
    return dumper.represent_scalar(_resolve(str(data)), str(data))


def _represent_dict(dumper: _Representer, data: dict[str, Any]) -> Any:
    return dumper.represent_mapping("tag:yaml.org,2002:map", sorted(data.items(), key=lambda kv: _KEY(kv[0])))


_Representer.add_representer(str, _represent_str)
_Representer.add_representer(_Number, _represent_number)
_Representer.add_representer(dict, _represent_dict)


class _Resolver:
    """Implicit tags as yaml.v3 reads plain scalars (quoted scalars are strings)."""

    yaml_implicit_resolvers: dict[str, Any] = {}
    yaml_path_resolvers: dict[Any, Any] = {}

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        return None

    def ascend_resolver(self) -> None:
        return None

    def resolve(self, kind: Any, value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is ScalarNode:
            return _resolve(value) if implicit[0] else _STR
        return "tag:yaml.org,2002:seq" if kind is yaml.SequenceNode else "tag:yaml.org,2002:map"


class _Dumper(_Emitter, Serializer, _Representer, _Resolver):
    def __init__(self, stream: Any, **_: Any) -> None:
        _Emitter.__init__(self, stream, canonical=False, indent=4, width=1 << 30, allow_unicode=True,
                          line_break=None)
        Serializer.__init__(self, explicit_start=False, explicit_end=False, version=None, tags=None)
        _Representer.__init__(self, default_style=None, default_flow_style=False, sort_keys=False)


def _prepare(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        f = float(value)
        return _Number(go_float_v(f) if math.isfinite(f) else {math.inf: ".inf", -math.inf: "-.inf"}.get(f, ".nan"))
    if isinstance(value, dict):
        return {str(k): _prepare(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_prepare(v) for v in value]
    raise TypeError(f"cannot write a {type(value).__name__} as YAML")


def dump(value: Any, *, to_json: Callable[[Any], Any] = lambda v: json.loads(json.dumps(v))) -> str:
    """``value`` (a JSON value) as karmadactl's ``printObjectYaml`` writes it."""
    text: str = yaml.dump(_prepare(to_json(value)), Dumper=_Dumper)
    if text.endswith("\n...\n"):
        text = text[: -len("...\n")]
    return text
