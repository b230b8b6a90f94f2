"""Quantity strings are parsed once and remembered: equal strings give equal values, errors are never
remembered (each raises again, naming the field it was read from)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from flotilla.kube import quantity as interpreter_quantity
from flotilla.scheduler.errors import ModelError
from flotilla.scheduler.model import parse_quantity


def test_a_remembered_quantity_string_gives_the_same_exact_value() -> None:
    for _ in range(3):
        assert parse_quantity("100m") == Fraction(1, 10)
        assert parse_quantity("1Gi") == 2**30
        assert parse_quantity(" 2 ") == 2
        assert parse_quantity("1e3") == 1000
    assert parse_quantity(5) == 5 and parse_quantity(0.5) == Fraction(1, 2)


@pytest.mark.parametrize(("text", "tail"), [
    ("1x", "is not a quantity"), ("", "is not a quantity"), ("9" * 1001, "has too many digits"),
    ("1e99999", "has an exponent out of range"),
])
def test_a_bad_quantity_string_raises_each_time_with_its_field(text: str, tail: str) -> None:
    for where in ("spec.a", "spec.b"):
        with pytest.raises(ModelError) as e:
            parse_quantity(text, where)
        assert str(e.value) == f"{where}: {text!r} {tail}"


def test_a_str_subclass_is_parsed_as_a_string() -> None:
    class Text(str):
        pass

    assert parse_quantity(Text("250m")) == Fraction(1, 4)
    with pytest.raises(ModelError, match="is not a quantity"):
        parse_quantity(Text("x"))


def test_interpreter_quantities_are_remembered_and_errors_are_not() -> None:
    first = interpreter_quantity.parse_quantity("1.5Gi")
    assert interpreter_quantity.parse_quantity("1.5Gi") == first
    assert str(first) == "1536Mi" and interpreter_quantity.parse_quantity(2) == interpreter_quantity.Quantity(2)
    for _ in range(2):
        with pytest.raises(interpreter_quantity.QuantityError, match="unknown suffix 'x'"):
            interpreter_quantity.parse_quantity("1x")
    with pytest.raises(TypeError):
        interpreter_quantity.parse_quantity(None)  # type: ignore[arg-type]
