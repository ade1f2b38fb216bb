"""Integers of any size: a whole number is of JSON type `integer` whatever its size (`2^63`,
`1e19`, `1e300`), as JSON Schema 2020-12 says. A value read as a typed integer must also fit the 64
bits the Rust side decodes (it refuses the rest as "cannot be represented"), but that limit never
decides a check that is negated or counted: `{"not": {"type": "integer"}}` refuses `2^63` and
`1e300`, and `{"oneOf": [{"type": "integer"}, {"type": "number"}]}` refuses `1e300` (both branches
match), as the `jsonschema` package, the generated Rust and the generated TypeScript do."""

from __future__ import annotations

import importlib
import json
import math
import subprocess
import sys
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Annotated, Any

import pytest
from pydantic import Field, TypeAdapter, ValidationError

from openagents import _rt

from .conftest import generate_python

# JSON numbers at and beyond the 64-bit range, as JSON text, with whole and fractional ones inside.
NUMBERS = [
    "0",
    "1.0",
    "-7",
    "1.5",
    "-2.5e-300",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "123456789012345678901234567890",
    "-123456789012345678901234567890",
    "1e19",
    "-1e19",
    "1e300",
    "-1e300",
    "1.7976931348623157e308",
]
OTHERS = ['"x"', "true", "null", "[]", "{}"]


def _whole(value: object) -> bool:
    """Whether a decoded JSON value is of JSON type integer (JSON Schema 2020-12)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value) and value.is_integer())


def _number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float))


def _num(value: object) -> float:
    """A decoded JSON number, typed as one."""
    assert isinstance(value, (int, float))
    return value


def _fits(value: object) -> bool:
    """Whether a whole number fits the 64-bit integer the typed models hold."""
    return _whole(value) and -(2**63) <= int(_num(value)) < 2**63


# Each schema with the verdict JSON Schema gives (checked with `jsonschema`'s Draft202012Validator)
# for a decoded value, and where it applies how the value is wrapped: `{}` is the value.
SCHEMAS: dict[str, tuple[dict[str, Any], str, Callable[[Any], bool]]] = {
    "not_integer": ({"not": {"type": "integer"}}, "{}", lambda v: not _whole(v)),
    "one_of_integer_number": (
        {"oneOf": [{"type": "integer"}, {"type": "number"}]},
        "{}",
        lambda v: _number(v) and not _whole(v),
    ),
    "any_of_integer_string": (
        {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        "{}",
        lambda v: _whole(v) or isinstance(v, str),
    ),
    "one_of_integer_string": (
        {"oneOf": [{"type": "integer"}, {"type": "string"}]},
        "{}",
        lambda v: _whole(v) or isinstance(v, str),
    ),
    "number_not_integer": (
        {"type": "number", "not": {"type": "integer"}},
        "{}",
        lambda v: _number(v) and not _whole(v),
    ),
    "not_nonpositive_integer": (
        {"not": {"type": "integer", "maximum": 0}},
        "{}",
        lambda v: not (_whole(v) and _num(v) <= 0),
    ),
    "not_integer_or_null": ({"not": {"type": ["integer", "null"]}}, "{}", lambda v: not (_whole(v) or v is None)),
    "not_any_of": (
        {"not": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]}},
        "{}",
        lambda v: not (_whole(v) or isinstance(v, bool)),
    ),
    "integer_or_string": ({"type": ["integer", "string"]}, "{}", lambda v: _whole(v) or isinstance(v, str)),
    "not_object_with_integer": (
        {"not": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}},
        '{{"a": {}}}',
        lambda v: not _whole(v),
    ),
    "property_not_integer": (
        {"type": "object", "properties": {"a": {"not": {"type": "integer"}}}},
        '{{"a": {}}}',
        lambda v: not _whole(v),
    ),
    "not_array_of_integers": (
        {"not": {"type": "array", "items": {"type": "integer"}}},
        "[{}]",
        lambda v: not _whole(v),
    ),
    # The object is kept as it is (a free-form value, as in Rust), so its integer property is only
    # tested: any size.
    "object_with_integer_and_any_of": (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
        },
        '{{"a": {}}}',
        _whole,
    ),
    # Typed integers: JSON Schema accepts every whole number, the typed models (here as in Rust)
    # refuse those beyond 64 bits.
    "integer": ({"type": "integer"}, "{}", _fits),
    "object_with_integer": ({"type": "object", "properties": {"a": {"type": "integer"}}}, '{{"a": {}}}', _fits),
}


def _root(name: str) -> str:
    """The name of the root type generated for a schema of `SCHEMAS`."""
    return "".join(part.title() for part in name.split("_"))


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ModuleType]]:
    """Each schema of `SCHEMAS` generated into a package `bigint_<name>`, its `models` module."""
    root = tmp_path_factory.mktemp("big_integers")
    for name, (schema, _, _) in SCHEMAS.items():
        path = root / "schemas" / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        document = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": _root(name), **schema}
        path.write_text(json.dumps(document))
        generate_python(path, root / f"bigint_{name}")
    sys.path.insert(0, str(root))
    try:
        yield {name: importlib.import_module(f"bigint_{name}.models") for name in SCHEMAS}
    finally:
        sys.path.remove(str(root))
        for name in SCHEMAS:
            for module in [m for m in sys.modules if m == f"bigint_{name}" or m.startswith(f"bigint_{name}.")]:
                del sys.modules[module]


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_the_generated_validators_give_json_schemas_verdict_on_integers_of_any_size(
    generated: dict[str, ModuleType], name: str
) -> None:
    _, wrap, expected = SCHEMAS[name]
    models = generated[name]
    root = _root(name)
    wrong = []
    for number in NUMBERS + OTHERS:
        text = wrap.format(number)
        want = expected(json.loads(number))
        document = json.loads(text)
        for path, got in (
            ("validate", models.validate(root, document)),
            ("validate_json", models.validate_json(root, text)),
        ):
            if (got == []) != want:
                wrong.append(f"{path}({text}): {'accepted' if not got else got}, expected {want}")
        # The models themselves, as the conformance runner reads them, strict and lenient.
        adapter = _rt.adapter(models.TYPES, root)
        for context in (_rt.STRICT, None):
            for path, check in (("validate_python", adapter.validate_python), ("validate_json", adapter.validate_json)):
                try:
                    check(document if path == "validate_python" else text, context=context)
                    got_valid = True
                except ValidationError:
                    got_valid = False
                if got_valid != want:
                    wrong.append(f"adapter.{path}({text}, {context}): {got_valid}, expected {want}")
    assert not wrong, "\n".join(wrong)


def _verdict(annotation: Any, value: object, *, text: bool = False) -> list[str]:
    """The keywords `_rt.violations` reports for a value (`[]`: valid), decoded or as JSON text."""
    adapter: TypeAdapter[Any] = TypeAdapter(annotation)
    try:
        if text:
            assert isinstance(value, str)
            adapter.validate_json(value, context=_rt.STRICT)
        else:
            adapter.validate_python(value, context=_rt.STRICT)
    except ValidationError as e:
        return [v.keyword for v in _rt.violations(e)]
    return []


BIG = [2**63, -(2**63) - 1, 2**64, 10**30, -(10**30), 1e19, -1e19, 1e300, -1e300, 2.0**63]
FREE = "null boolean number string array object"


@pytest.mark.parametrize("value", BIG, ids=repr)
def test_a_negated_or_counted_integer_check_is_decided_on_the_json_type_alone(value: object) -> None:
    not_integer = Annotated[_rt.JsonValue, _rt.Json(FREE, not_=lambda: _rt.Int)]
    one_of = Annotated[_rt.JsonValue, _rt.Json(FREE, one_of=lambda: [_rt.Int, _rt.Float])]
    any_of = Annotated[_rt.JsonValue, _rt.Json(FREE, any_of=lambda: [_rt.Int, _rt.Str])]
    all_of = Annotated[_rt.JsonValue, _rt.Json(FREE, all_of=lambda: [_rt.Int])]
    below_zero = Annotated[int, Field(lt=0), _rt.INT]
    not_below_zero = Annotated[_rt.JsonValue, _rt.Json(FREE, not_=lambda: below_zero)]
    text = json.dumps(value)
    for as_text, given in ((False, value), (True, text)):
        assert _verdict(not_integer, given, text=as_text) == ["not"]
        assert _verdict(one_of, given, text=as_text) == ["oneOf"]
        assert _verdict(any_of, given, text=as_text) == []
        assert _verdict(all_of, given, text=as_text) == []
        # The schema's own bounds still count under `not`: only the 64-bit range is lifted.
        negative = _num(value) < 0
        assert _verdict(not_below_zero, given, text=as_text) == (["not"] if negative else [])


@pytest.mark.parametrize("value", BIG, ids=repr)
def test_the_dynamic_check_takes_an_integer_of_any_size_as_an_integer(value: object) -> None:
    integer_or_string = Annotated[str | int, _rt.Json("integer string")]
    # A rule beside the types (here one only strings have) makes it the check in Python.
    integer_or_null = Annotated[int | None, _rt.Json("integer null", min_length=0)]
    for annotation in (integer_or_string, integer_or_null):
        assert _verdict(annotation, value) == []
        assert _verdict(annotation, json.dumps(value), text=True) == []
    # A whole float becomes the integer it is, whatever its size.
    got = TypeAdapter(integer_or_string).validate_python(value, context=_rt.STRICT)
    assert type(got) is int and got == value
    assert _rt.json_type(value) == "integer"


@pytest.mark.parametrize("value", BIG, ids=repr)
def test_a_typed_integer_still_refuses_what_64_bits_cannot_hold(value: object) -> None:
    # The Rust side decodes such an integer as an `i64` and refuses it as "cannot be represented";
    # the typed models refuse it too, at the `type` keyword, saying why.
    for as_text, given in ((False, value), (True, json.dumps(value))):
        assert _verdict(_rt.Int, given, text=as_text) == ["type"]
        assert _verdict(list[_rt.Int], [value] if not as_text else f"[{given}]", text=as_text) == ["type"]
    with pytest.raises(ValidationError) as info:
        TypeAdapter(_rt.Int).validate_python(value)
    assert "beyond the supported range" in str(info.value)


@pytest.mark.parametrize("value", BIG, ids=repr)
def test_a_typed_integer_beyond_64_bits_and_a_bound_breaks_the_bound(value: object) -> None:
    # As the Rust side reports it: its check of the value finds the bound broken, so it does not
    # fall back on "cannot be represented".
    bounded = Annotated[int, Field(ge=0, le=100), _rt.INT]
    assert _verdict(bounded, value) == ["minimum" if _num(value) < 0 else "maximum"]
    assert _verdict(bounded, json.dumps(value), text=True) == ["minimum" if _num(value) < 0 else "maximum"]
    # Only one bound: the other side still refuses beyond the range.
    at_least_zero = Annotated[int, Field(ge=0), _rt.INT]
    assert _verdict(at_least_zero, value) == ["minimum" if _num(value) < 0 else "type"]


def test_a_typed_integer_takes_the_64_bit_range_and_whole_floats_within_it() -> None:
    for value in (0, -(2**63), 2**63 - 1, 1.0, -9.2e18, 9.2e18):
        got = TypeAdapter(_rt.Int).validate_python(value, context=_rt.STRICT)
        assert type(got) is int and got == value
    for refused in (1.5, True, "1", None, math.inf, math.nan):
        assert _verdict(_rt.Int, refused) == ["type"]
    assert TypeAdapter(_rt.Int).validate_json("-9223372036854775808") == -(2**63)
    assert _verdict(_rt.Int, "1e400", text=True) == ["type"]  # not a finite number


def test_a_branch_only_tests_the_value_and_leaves_the_typed_check_of_the_document_as_it_was() -> None:
    # The same integer, tested under `not` and read as a typed property of the same document.
    class Holder(_rt.Model):
        model_config = _rt.CLOSED
        n: _rt.Int
        other: Annotated[_rt.JsonValue, _rt.Json(FREE, not_=lambda: _rt.Int)]

    found = _rt.violations(_expect_error(lambda: Holder.from_wire({"n": 2**63, "other": 2**63}, strict=True)))
    assert sorted((v.pointer, v.keyword) for v in found) == [("/n", "type"), ("/other", "not")]
    held = Holder.from_wire({"n": 5, "other": 1.5}, strict=True)
    assert (held.n, held.other) == (5, 1.5)


def _expect_error(call: Callable[[], object]) -> ValidationError:
    try:
        call()
    except ValidationError as e:
        return e
    raise AssertionError("expected a ValidationError")


def test_the_context_of_a_branch_keeps_what_the_document_was_checked_under() -> None:
    assert _rt._tested(None) == {_rt._TESTED_KEY: True}
    assert _rt._tested(_rt.STRICT) == {_rt.STRICT_KEY: True, _rt._TESTED_KEY: True}
    given = {"mine": 1}
    assert _rt._tested(given) == {"mine": 1, _rt._TESTED_KEY: True} and given == {"mine": 1}
    tested = _rt._tested(given)
    assert _rt._tested(tested) is tested


_REFERENCE = """
import json, sys
from jsonschema import Draft202012Validator
cases = json.load(sys.stdin)
json.dump([Draft202012Validator(s).is_valid(json.loads(t)) for s, t in cases], sys.stdout)
"""


def test_the_expected_verdicts_are_json_schemas() -> None:
    # The expected verdicts above, from the `jsonschema` package (Draft 2020-12), run by this
    # Python or the system's `python3`, whichever has it; skipped where neither has.
    typed = ("integer", "object_with_integer")  # the typed models' documented limit
    cases = [
        (schema, wrap.format(number), expected(json.loads(number)))
        for name, (schema, wrap, expected) in SCHEMAS.items()
        if name not in typed
        for number in NUMBERS + OTHERS
    ]
    given = json.dumps([(schema, text) for schema, text, _ in cases])
    for python in (sys.executable, "python3"):
        try:
            done = subprocess.run([python, "-c", _REFERENCE], input=given, capture_output=True, text=True, timeout=120)
        except OSError:
            continue
        if done.returncode == 0:
            break
    else:
        pytest.skip("the `jsonschema` package is not installed")
    verdicts = json.loads(done.stdout)
    wrong = [(text, schema) for (schema, text, want), got in zip(cases, verdicts, strict=True) if got != want]
    assert not wrong


def test_the_double_minus_two_to_the_63_is_not_taken_for_the_integer() -> None:
    # Every integer from about -2^63 - 1024 up reads as that double: as in Rust, a typed integer
    # refuses it written as a float (written as an integer, -2^63 is exact and kept).
    from pydantic_core import SchemaValidator, core_schema

    typed = SchemaValidator(core_schema.chain_schema(_rt._INT_STEPS))
    assert typed.validate_python(-(2**63)) == -(2**63)
    for value in (-9223372036854775808.0, -9223372036854775809.0):
        with pytest.raises(ValidationError, match="beyond the supported range"):
            typed.validate_python(value)
        with pytest.raises(ValidationError, match="beyond the supported range"):
            typed.validate_json("-9223372036854775808.0")
    # Only tested against a schema, it is an integer all the same.
    assert isinstance(typed.validate_python(-9223372036854775808.0, context=_rt._TESTED), int)
