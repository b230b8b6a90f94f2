"""Quantities the scheduler cannot compute with are a ModelError (reported on the binding), not a hang."""

from __future__ import annotations

from fractions import Fraction

import pytest

from flotilla.scheduler.errors import ModelError
from flotilla.scheduler.model import parse_quantity


@pytest.mark.parametrize("value", ["1e999999999", "1e-999999999", "1e99999999999999999999", "1e1001", "9" * 5000])
def test_quantity_beyond_any_real_amount_is_a_model_error(value: str) -> None:
    with pytest.raises(ModelError):
        parse_quantity(value, "spec.replicaRequirements.resourceRequest.cpu")


@pytest.mark.parametrize(("value", "expected"), [("1e3", Fraction(1000)), ("2e+0003", Fraction(2000)),
                                                 ("5e-3", Fraction(5, 1000)), ("1e1000", Fraction(10) ** 1000)])
def test_quantity_with_an_exponent_up_to_1000_is_exact(value: str, expected: Fraction) -> None:
    assert parse_quantity(value) == expected
