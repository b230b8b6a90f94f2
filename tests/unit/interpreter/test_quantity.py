"""Kubernetes quantities: parsing and the canonical spelling."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flotilla.kube.quantity import (
    QuantityError,
    QuantityFormat,
    canonical,
    format_quantity,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1000m", "1"),
        ("1500m", "1500m"),
        ("1.5", "1500m"),
        ("0.1", "100m"),
        ("2000", "2k"),
        ("1500", "1500"),
        ("1024Mi", "1Gi"),
        ("1536Ki", "1536Ki"),
        ("1G", "1G"),
        ("2048m", "2048m"),
        ("1e3", "1e3"),
        ("1E", "1E"),
        ("0", "0"),
        ("-1", "-1"),
        ("0.0000000001", "1n"),  # rounded up to the nano unit
        ("+5", "5"),
    ],
)
def test_canonical_spelling(text: str, expected: str) -> None:
    assert canonical(text) == expected


def test_numbers_are_quantities_too() -> None:
    assert canonical(2) == "2"
    assert canonical(0.5) == "500m"
    assert canonical(1e20) == "100E"
    assert canonical(2147483648.0) == "2147483648"


@pytest.mark.parametrize("bad", ["", "abc", "1.2.3", "1Qi", "1e", "--1", " 1", True])
def test_bad_quantities(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)  # type: ignore[arg-type]


def test_binary_format_falls_back_to_decimal_for_small_or_fractional_values() -> None:
    assert format_quantity(512, QuantityFormat.BINARY_SI) == "512"
    assert format_quantity(Fraction(3, 2) * 1024, QuantityFormat.BINARY_SI) == "1536"
    assert format_quantity(1_500_000_000, QuantityFormat.BINARY_SI) == "1500000000"
    assert format_quantity(134_217_728, QuantityFormat.BINARY_SI) == "128Mi"


def test_values_round_up() -> None:
    q = parse_quantity("1500m")
    assert q.int_value == 2
    assert q.milli_value == 1500
    assert parse_quantity("0.1m").milli_value == 1


@given(st.integers(min_value=-(10**15), max_value=10**15), st.sampled_from(list(QuantityFormat)))
def test_formatting_round_trips(value: int, fmt: QuantityFormat) -> None:
    q = parse_quantity(format_quantity(value, fmt))
    assert q.value == value


@given(st.integers(min_value=0, max_value=10**12))
def test_milli_values_round_trip(milli: int) -> None:
    assert parse_quantity(format_quantity(Fraction(milli, 1000))).milli_value == milli
