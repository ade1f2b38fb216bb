"""`multipleOf` in decimal: the number and the divisor are read as the decimals JSON writes them
as, and the quotient must be whole exactly (`0.3` is a multiple of `0.1`, though `0.3 / 0.1` is
`2.9999999999999996` in doubles), as the Rust and TypeScript runtimes answer."""

from __future__ import annotations

import random
from fractions import Fraction
from typing import Annotated

import pytest
from pydantic import Field, TypeAdapter, ValidationError

from openagents import _rt

MULTIPLES = [(0.3, 0.1), (0.0075, 0.0001), (4.5, 1.5), (-4.5, 1.5), (0.0, 0.7), (1e308, 1e300), (10.0, 2.0)]
MULTIPLES += [(19.99, 0.01), (2**60, float(2**60)), (float(2**60), float(2**60))]
MULTIPLES += [(12391239123, 1e-8), (2**80, 2), (-9, 3), (10, 0.5), (10, 2.0)]
NOT_MULTIPLES = [(0.00751, 0.0001), (35, 1.5), (7, 2), (1e308, 0.123456789), (1e-300, 1e-299), (2**80 + 1, 2)]
NOT_MULTIPLES += [(float("nan"), 1), (float("inf"), 1), (19.999, 0.01), (1152921504606847000, float(2**60))]


@pytest.mark.parametrize(("value", "multiple"), MULTIPLES)
def test_a_multiple_in_decimal_is_one(value: float, multiple: float) -> None:
    assert _rt.multiple_of(value, multiple)


@pytest.mark.parametrize(("value", "multiple"), NOT_MULTIPLES)
def test_a_number_off_by_any_decimal_is_not_one(value: float, multiple: float) -> None:
    assert not _rt.multiple_of(value, multiple)


def test_the_answer_is_the_exact_quotient_of_the_written_decimals() -> None:
    # Against an oracle of its own: the exact quotient of the decimals `repr` writes, as fractions.
    rng = random.Random(7)
    for _ in range(5000):
        multiple = round(rng.uniform(0.001, 50), rng.randint(0, 4)) or 0.5
        value = round(multiple * rng.randint(-10_000, 10_000) + rng.choice([0, 0, 1e-9, 0.01]), rng.randint(0, 8))
        expected = (Fraction(repr(value)) / Fraction(repr(multiple))).denominator == 1
        assert _rt.multiple_of(value, multiple) == expected, (value, multiple)


def test_a_typed_number_reports_the_keyword_after_its_own_checks() -> None:
    even: TypeAdapter[int] = TypeAdapter(Annotated[int, Field(ge=0), _rt.INT, _rt.MultipleOf(2.0)])
    assert even.validate_python(4) == 4
    assert even.validate_python(6.0) == 6
    for bad, kind in [(5, "multipleOf"), (-2, "greater_than_equal"), ("4", "int_type")]:
        with pytest.raises(ValidationError) as e:
            even.validate_python(bad)
        assert e.value.errors()[0]["type"] == kind, bad
    cents: TypeAdapter[float] = TypeAdapter(Annotated[_rt.Float, _rt.MultipleOf(0.01)])
    assert cents.validate_json("19.99") == 19.99
    with pytest.raises(ValidationError) as e:
        cents.validate_json("19.999")
    assert [v.keyword for v in _rt.violations(e.value)] == ["multipleOf"]
