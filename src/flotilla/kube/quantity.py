"""Kubernetes resource quantities ("500m", "2Gi", "1e3"): parsing, canonical formatting, arithmetic.

Only what the resource interpreter needs: exact values (as :class:`fractions.Fraction`), the three
formats (binary SI, decimal SI, decimal exponent) and the canonical spelling Kubernetes prints after a
quantity went through its parser (``"1000m"`` prints as ``"1"``, ``"1024Mi"`` as ``"1Gi"``,
``"1536Ki"`` stays ``"1536Ki"``). Values are rounded up to the nano unit as Kubernetes does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from fractions import Fraction
from functools import lru_cache
from math import ceil

__all__ = ["Quantity", "QuantityFormat", "QuantityError", "parse_quantity", "format_quantity"]


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


class QuantityFormat(StrEnum):
    BINARY_SI = "BinarySI"
    DECIMAL_SI = "DecimalSI"
    DECIMAL_EXPONENT = "DecimalExponent"


_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_EXP = {v: k for k, v in _DECIMAL.items()}
_BINARY_BY_POWER = {v: k for k, v in _BINARY.items()}
_NUMBER = re.compile(r"([+-]?)(\d+\.?\d*|\.\d+)(.*)", re.DOTALL)
_EXPONENT = re.compile(r"[eE]([+-]?\d+)")
_NANO = Fraction(1, 10**9)


@dataclass(frozen=True)
class Quantity:
    """An exact quantity and the format it prints in."""

    value: Fraction
    format: QuantityFormat = QuantityFormat.DECIMAL_SI

    def __str__(self) -> str:
        return format_quantity(self.value, self.format)

    @property
    def milli_value(self) -> int:
        """The value in thousandths, rounded up (Kubernetes ``MilliValue``)."""
        return ceil(self.value * 1000)

    @property
    def int_value(self) -> int:
        """The value rounded up to a whole number (Kubernetes ``Value``)."""
        return ceil(self.value)

    def __float__(self) -> float:
        return float(self.value)

    def add(self, other: Quantity) -> Quantity:
        """The sum; like Kubernetes, a zero left side takes the right side's format."""
        fmt = other.format if self.value == 0 else self.format
        return Quantity(self.value + other.value, fmt)


def parse_quantity(text: str | int | float) -> Quantity:
    """Parse a quantity string (or a JSON number, which Kubernetes also accepts)."""
    if isinstance(text, bool):
        raise QuantityError(f"{text!r} is not a quantity")
    if isinstance(text, int):
        text = str(text)
    elif isinstance(text, float):
        if text != text or text in (float("inf"), float("-inf")):
            raise QuantityError(f"{text!r} is not a quantity")
        text = json_number(text)
    if type(text) is str:
        return _parse_text_cached(text)
    return _parse_text(text)


def _parse_text(text: str) -> Quantity:
    s = text
    m = _NUMBER.fullmatch(s)
    if not s or m is None:
        raise QuantityError(f"{text!r} is not a quantity: write a number with an optional suffix "
                            "(n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or an exponent such as e3)")
    sign, number, suffix = m.groups()
    value = Fraction(number)
    if suffix in _BINARY:
        value *= 1024 ** _BINARY[suffix]
        fmt = QuantityFormat.BINARY_SI
    elif suffix in _DECIMAL:
        value *= Fraction(10) ** _DECIMAL[suffix]
        fmt = QuantityFormat.DECIMAL_SI
    elif (em := _EXPONENT.fullmatch(suffix)) is not None:
        exp = int(em.group(1))
        if abs(exp) > 1000:
            raise QuantityError(f"quantity {text!r} has an exponent out of range")
        value *= Fraction(10) ** exp
        fmt = QuantityFormat.DECIMAL_EXPONENT
    else:
        raise QuantityError(f"{text!r} is not a quantity: unknown suffix {suffix!r} (use n u m k M G T P E, "
                            "Ki Mi Gi Ti Pi Ei, or an exponent such as e3)")
    if sign == "-":
        value = -value
    # Kubernetes keeps at most nano precision and rounds up what is finer.
    if (value / _NANO).denominator != 1:
        value = Fraction(ceil(value / _NANO)) * _NANO
    return Quantity(value, fmt)


#: the same few strings ("100m", "1Gi", ...) are parsed again and again; a Quantity is immutable (frozen, of a
#: Fraction), and what raises is not remembered by lru_cache
_parse_text_cached = lru_cache(maxsize=1024)(_parse_text)


def _decimal_parts(value: Fraction) -> tuple[int, int]:
    """``value == mantissa * 10**exp`` with ``exp`` a multiple of 3 as large as possible."""
    n = value / _NANO
    mantissa, exp = int(n), -9
    while mantissa % 10 == 0:
        mantissa //= 10
        exp += 1
    r = exp % 3
    return mantissa * 10**r, exp - r


def format_quantity(value: Fraction | int, fmt: QuantityFormat = QuantityFormat.DECIMAL_SI) -> str:
    """The canonical Kubernetes spelling of ``value`` in ``fmt``."""
    value = Fraction(value)
    if value == 0:
        return "0"
    if fmt is QuantityFormat.BINARY_SI and (-1024 < value < 1024 or value.denominator != 1):
        fmt = QuantityFormat.DECIMAL_SI
    if fmt is QuantityFormat.BINARY_SI:
        mantissa, power = int(value), 0
        while mantissa % 1024 == 0 and power < 6:
            mantissa //= 1024
            power += 1
        return f"{mantissa}{_BINARY_BY_POWER.get(power, '')}"
    mantissa, exp = _decimal_parts(value)
    if fmt is QuantityFormat.DECIMAL_EXPONENT:
        return f"{mantissa}e{exp}" if exp else str(mantissa)
    if exp in _DECIMAL_BY_EXP:
        return f"{mantissa}{_DECIMAL_BY_EXP[exp]}"
    return f"{mantissa}e{exp}"


def json_number(f: float) -> str:
    """``f`` spelled as Go's encoding/json spells a float64 (positional unless tiny or huge)."""
    a = abs(f)
    if a == 0 or 1e-6 <= a < 1e21:
        text = format(Decimal(repr(f)), "f")
        return text[:-2] if text.endswith(".0") else text
    return repr(f)


def canonical(text: str | int | float) -> str:
    """Parse and print again: what Kubernetes shows for a quantity that went through its API types."""
    return str(parse_quantity(text))
