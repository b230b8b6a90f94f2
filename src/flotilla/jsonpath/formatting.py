"""How kubectl's JSONPath printer turns a found value into text, reproduced for Python values.

kubectl decodes objects the "unstructured" way: JSON integers become int64, other numbers float64,
objects ``map[string]interface{}`` and arrays ``[]interface{}``. The printer then writes

* maps and lists as compact JSON, as Go's ``encoding/json`` does: keys sorted, ``<``, ``>``
  and ``&`` escaped as ``\\u003c`` ..., U+2028/U+2029 escaped, floats in ``'f'`` notation unless
  the magnitude is below 1e-6 or at least 1e21;
* JSON null as ``null`` (and a ``{range}`` item that is null as ``<no value>``);
* everything else with Go's ``fmt.Fprint``: strings raw, ``true``/``false``, integers in decimal,
  floats like ``%v`` (shortest digits, exponent form when the exponent is < -4 or >= 6, e.g.
  ``1e-05``, ``1.2345675e+06``).

One deliberate difference: a float that holds an integer in the int64 range is printed as that
integer (``1734462491693.0`` -> ``1734462491693``, where kubectl would print
``1.734462491693e+12``). Go only sees a float there when the JSON had a fraction part; in
Python an integral float usually stands for an integer a Go client would have kept as int64.
Python integers outside the int64 range are printed as the float64 Go would have decoded.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, Final

from flotilla.jsonpath.errors import JSONPathEvaluationError

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1


class _NoValue:
    """The value a ``{range}`` body sees for a null item (Go's invalid ``reflect.Value``)."""

    _instance: _NoValue | None = None

    def __new__(cls) -> _NoValue:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_VALUE"


NO_VALUE: Final = _NoValue()


def is_int64(value: int) -> bool:
    return INT64_MIN <= value <= INT64_MAX


def _shortest_digits(value: float) -> tuple[str, int]:
    """The shortest decimal digits that round-trip ``abs(value)`` (non-zero, finite) and the
    position of the decimal point relative to them: ``value == 0.<digits> * 10**point``."""
    _sign, digit_tuple, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(str(d) for d in digit_tuple)
    return digits, len(digits) + exponent


def _fixed(digits: str, point: int) -> str:
    if point <= 0:
        return "0." + "0" * -point + digits
    if point >= len(digits):
        return digits + "0" * (point - len(digits))
    return digits[:point] + "." + digits[point:]


def _exponent(digits: str, point: int) -> str:
    exp = point - 1
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"


def _go_special(value: float) -> str | None:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return None


def go_float_v(value: float) -> str:
    """Go's ``fmt.Sprint(float64)``: ``strconv.FormatFloat(v, 'g', -1, 64)`` with %e from exponent 6."""
    special = _go_special(value)
    if special is not None:
        return special
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    digits, point = _shortest_digits(value)
    exp = point - 1
    body = _exponent(digits, point) if exp < -4 or exp >= 6 else _fixed(digits, point)
    return ("-" if value < 0 else "") + body


def go_float_json(value: float) -> str:
    """Go's ``encoding/json`` rendering of a float64."""
    special = _go_special(value)
    if special is not None:
        raise JSONPathEvaluationError(f"json: unsupported value: {special}")
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    digits, point = _shortest_digits(value)
    magnitude = abs(value)
    if magnitude < 1e-6 or magnitude >= 1e21:
        body = _exponent(digits, point)
        # encoding/json turns e-07 into e-7 (but leaves e+21 alone)
        if body[-4:-1] == "e-0":
            body = body[:-2] + body[-1]
    else:
        body = _fixed(digits, point)
    return ("-" if value < 0 else "") + body


_JSON_SHORT_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def go_json_string(text: str) -> str:
    """A JSON string literal as Go's ``json.Marshal`` writes it (HTML-safe)."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in _JSON_SHORT_ESCAPES:
            out.append(_JSON_SHORT_ESCAPES[ch])
        elif code < 0x20 or ch in "<>&" or code in (0x2028, 0x2029):
            out.append(f"\\u{code:04x}")
        elif 0xD800 <= code <= 0xDFFF:  # a lone surrogate: invalid UTF-8 to Go
            out.append("\\ufffd")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def go_json(value: Any) -> str:
    """Compact JSON exactly as Go's ``json.Marshal`` writes an unstructured value."""
    parts: list[str] = []
    _write_json(value, parts)
    return "".join(parts)


def _write_json(value: Any, out: list[str]) -> None:
    if value is None or value is NO_VALUE:
        out.append("null")
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, int):
        out.append(str(value) if is_int64(value) else _out_of_range_int(value, go_float_json))
    elif isinstance(value, float):
        out.append(go_float_json(value))
    elif isinstance(value, str):
        out.append(go_json_string(value))
    elif isinstance(value, Mapping):
        out.append("{")
        items = sorted((str(k), v) for k, v in value.items())
        for index, (key, item) in enumerate(items):
            if index:
                out.append(",")
            out.append(go_json_string(key))
            out.append(":")
            _write_json(item, out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write_json(item, out)
        out.append("]")
    else:
        out.append(go_json_string(str(value)))


def _out_of_range_int(value: int, float_format: Callable[[float], str]) -> str:
    try:
        as_float = float(value)
    except OverflowError:
        return str(value)
    return float_format(as_float)


def format_value(value: Any) -> str:
    """One found value as kubectl's JSONPath printer writes it (see the module docstring)."""
    if value is NO_VALUE:
        return "<no value>"
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, Mapping | list | tuple):
        return go_json(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if is_int64(value) else _out_of_range_int(value, go_float_v)
    if isinstance(value, float):
        if value.is_integer() and INT64_MIN <= value < 2.0**63:
            return str(int(value))
        return go_float_v(value)
    return str(value)


def go_sprint(value: Any) -> str:
    """Roughly Go's ``%v`` of an unstructured value, for error messages (``map[a:1 b:[x y]]``)."""
    if value is NO_VALUE:
        return "<invalid reflect.Value>"
    if value is None:
        return "<nil>"
    if isinstance(value, Mapping):
        inner = " ".join(f"{k}:{go_sprint(v)}" for k, v in sorted((str(k), v) for k, v in value.items()))
        return f"map[{inner}]"
    if isinstance(value, list | tuple):
        return "[" + " ".join(go_sprint(v) for v in value) + "]"
    if isinstance(value, float):
        return go_float_v(value)
    return format_value(value)


def go_type_name(value: Any) -> str:
    """The Go type kubectl's decoder would have produced for ``value`` (for error messages)."""
    if value is NO_VALUE:
        return "<no value>"
    if isinstance(value, Mapping):
        return "map[string]interface {}"
    if isinstance(value, list | tuple):
        return "[]interface {}"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64" if is_int64(value) else "float64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    return type(value).__name__
