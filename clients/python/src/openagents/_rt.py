"""Runtime support for the generated modules: the Python counterpart of the `openagents-rt` crate.

The generated models call these for what pydantic does not do the JSON Schema way on its own:
scalars that accept exactly their JSON type (and `1.0` as an integer), ECMA-262 patterns, constants,
enums and tagged unions that can keep a value this version does not know, `null` that is not the
same as a missing property, free-form values, and a dynamic check for schemas that allow several
JSON types.

Integers: a whole number is of JSON type `integer` whatever its size (`1.0`, `2^64`, `1e300`), as
JSON Schema says. A value read as a typed integer (`Int`) must also fit the 64 bits the Rust side
decodes: beyond them it is refused (keyword `type`), as the Rust validator refuses it ("cannot be
represented"). Where a value is only tested against a schema and what the test makes of it is not
kept (a branch of `allOf`, `anyOf`, `oneOf` or `not`, a guard, `unevaluatedProperties`), and in the
dynamic `Json` check, an integer of any size is an integer, so that a check negated or counted
never turns on the size: `{"not": {"type": "integer"}}` refuses `2^63` and `1e300`.

Strictness: a document is read leniently by default, the way a client reads what a newer server
sends (an unknown event kind becomes its `Unknown...` model, an unknown enum value a plain `str`).
Validated with the context `STRICT`, it is held to the schema exactly, as the Rust validator does.

Speed: each check is a pydantic-core schema wherever one says the same thing (integers, string
constants and enums, tagged unions, free-form values, `null` refused, a union of JSON types), so a
valid document is checked without calling back into Python. Python runs only where pydantic-core
cannot decide the JSON Schema way: a value the fast check refuses (to keep an unknown kind or
value when reading leniently, and to say exactly where a document is wrong), patterns, constants
other than strings, and the dynamic `Json` check.

Errors: a tagged union, a property that may be left out but not null, and (in JSON text) a string
enum are checked fast first and, only when that fails, exactly; pydantic then reports the errors of
both under the labels `FAST` and `EXACT`. Where the value failed inside what both read alike, the
exact check does not check it again but lets the fast check's errors stand, so a failure deep in
nested unions is checked once. `violations`, `validate`, `validate_json`, the models'
constructors, `from_wire`, `from_json`, `model_validate`, `model_validate_json` and
`model_validate_strings` give the exact errors alone, each as it was raised, located as for a
decoded document; a `TypeAdapter`'s `validate_python` and `validate_json` show both.
"""

from __future__ import annotations

import enum
import importlib
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Annotated, Any, Final, Generic, TypeAlias, TypeVar, cast

from pydantic import AllowInfNan, BaseModel, ConfigDict, GetCoreSchemaHandler, Strict, TypeAdapter, ValidationError
from pydantic import JsonValue as _JsonValue
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError, SchemaValidator, core_schema

__all__ = [
    "CLOSED",
    "EXACT",
    "FAST",
    "FORBIDDEN",
    "OPEN",
    "STRICT",
    "UNIQUE",
    "Bool",
    "Const",
    "EnumOf",
    "Fails",
    "Float",
    "Int",
    "INT",
    "IntCheck",
    "JsonValue",
    "KEYWORDS",
    "Json",
    "MethodSpec",
    "NOT_NULL",
    "Model",
    "MultipleOf",
    "NotNull",
    "OneOf",
    "OpenAgentsError",
    "Pattern",
    "Present",
    "Str",
    "Tagged",
    "TypedError",
    "Unique",
    "UnknownTypeName",
    "Violation",
    "WireEnum",
    "adapter",
    "checker",
    "is_strict",
    "json_equal",
    "json_pointer",
    "multiple_of",
    "not_null",
    "unlabelled",
    "validate",
    "validate_json",
    "violations",
]

STRICT_KEY: Final = "openagents.strict"
STRICT: Final[dict[str, Any]] = {STRICT_KEY: True}
"""The validation context that holds a document to the schema exactly (unknown kinds refused)."""

_STR: Final = core_schema.str_schema(strict=True)

_M = TypeVar("_M", bound="Model")
_T = TypeVar("_T")


class TypedError(Exception):
    """The root of every typed error that generated code raises: the error base class generated for
    a schema derives from it (`openagents-codegen python --error-root` chooses another class)."""


class OpenAgentsError(TypedError):
    """The root of every error this package raises."""


def is_strict(info: core_schema.ValidationInfo) -> bool:
    """Whether the document is being checked strictly (see `STRICT`)."""
    ctx = info.context
    return isinstance(ctx, Mapping) and bool(ctx.get(STRICT_KEY))


# No protected namespaces: a field named after one (`model_dump_`, a schema's `model_dump`) is
# the schema's, never one of pydantic's methods, which the generator's names never shadow.
CLOSED: Final = ConfigDict(
    extra="forbid", serialize_by_alias=True, allow_inf_nan=False, defer_build=True, protected_namespaces=()
)
"""The configuration of an object the schema closes (`additionalProperties: false`)."""

OPEN: Final = ConfigDict(
    extra="allow", serialize_by_alias=True, allow_inf_nan=False, defer_build=True, protected_namespaces=()
)
"""The configuration of an object open to new fields: they are kept, in `model_extra`."""


class Model(BaseModel):
    """The base of every generated model: wire conversions that keep `null` apart from missing."""

    def __init__(self, /, **data: Any) -> None:
        """pydantic's constructor, its errors without the labels of the fast check (see the
        module's documentation)."""
        with unlabelled():
            super().__init__(**data)

    # pydantic's mark of a constructor that only validates (as `BaseModel`'s and `RootModel`'s):
    # without it, pydantic-core would call this one for every nested model, without the context.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    def to_wire(self) -> dict[str, Any]:
        """The model as a JSON object: JSON names, and only the properties that were given."""
        data: dict[str, Any] = self.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return data

    def to_json(self) -> str:
        """The model as compact JSON text, as `to_wire` describes it."""
        return self.model_dump_json(by_alias=True, exclude_unset=True)

    @classmethod
    def from_wire(cls: type[_M], document: object, *, strict: bool = False) -> _M:
        """Validates a decoded JSON document; `strict` refuses what this version does not know."""
        return cls.model_validate(document, context=STRICT if strict else None)

    @classmethod
    def from_json(cls: type[_M], text: str | bytes, *, strict: bool = False) -> _M:
        """Parses and validates JSON text; `strict` refuses what this version does not know."""
        return cls.model_validate_json(text, context=STRICT if strict else None)

    @classmethod
    def model_validate(cls: type[_M], obj: Any, **kwargs: Any) -> _M:
        """pydantic's `model_validate`, its errors without the labels of the fast check (see the
        module's documentation)."""
        with unlabelled():
            return super().model_validate(obj, **kwargs)

    @classmethod
    def model_validate_strings(cls: type[_M], obj: Any, **kwargs: Any) -> _M:
        """pydantic's `model_validate_strings`, its errors without the labels of the fast check."""
        with unlabelled():
            return super().model_validate_strings(obj, **kwargs)

    @classmethod
    def model_validate_json(cls: type[_M], json_data: str | bytes | bytearray, **kwargs: Any) -> _M:
        """pydantic's `model_validate_json`, its errors located as for a decoded document (without
        the labels of the fast check: see the module's documentation)."""
        with unlabelled():
            return super().model_validate_json(json_data, **kwargs)


# --- scalars --------------------------------------------------------------------------------------

_I64_MIN: Final = -(2**63)
_I64_MAX: Final = 2**63

_TESTED_KEY: Final = "openagents.tested"
"""The key of the validation context under which a value is only tested against a schema: an
applicator's branch (`allOf`, `anyOf`, `oneOf`, `not`), a guard or `unevaluatedProperties`, whose
result is never kept. A whole number of any size is an integer there, as JSON Schema says, so that
a check negated or counted is decided on the JSON type alone (see `_tested`)."""

_TESTED: Final[dict[str, Any]] = {_TESTED_KEY: True}
_TESTED_STRICT: Final[dict[str, Any]] = {STRICT_KEY: True, _TESTED_KEY: True}


def _tested(context: object) -> Mapping[str, Any]:
    """The validation context for testing a value against an applicator's branch (`_TESTED_KEY`),
    from the one the value is checked under."""
    if context is None:
        return _TESTED
    if context is STRICT:
        return _TESTED_STRICT
    if isinstance(context, Mapping):
        return context if context.get(_TESTED_KEY) else {**context, _TESTED_KEY: True}
    return _TESTED


def _whole(value: object) -> int:
    """A whole float of `2^63` or more either way as an integer beyond the 64-bit range, whatever
    its size (`1e300` included): pydantic-core converts only those within 64 bits. The double
    `-2^63` is the nearest to every integer from about `-2^63 - 1024` up, so it is not taken for
    `-2^63` itself (the Rust side refuses it too): it becomes `-2^63 - 1`. Called only where the
    conversion within the range failed."""
    if isinstance(value, float) and value.is_integer():
        n = int(value)
        return n - 1 if n == _I64_MIN else n
    raise PydanticCustomError("int_type", "Input should be a valid integer")


_INT: Final = core_schema.int_schema(strict=True)
_FLOAT: Final = core_schema.float_schema(strict=True, allow_inf_nan=False)
# A whole float as the integer it is (`1.0` is `1`): one strictly inside `-2^63..2^63` in
# pydantic-core, any other through `_whole` (`1e300` too).
_WHOLE_FLOAT: Final = core_schema.chain_schema(
    [
        _FLOAT,
        core_schema.union_schema(
            [
                core_schema.chain_schema(
                    [core_schema.float_schema(gt=float(_I64_MIN), lt=float(_I64_MAX)), core_schema.int_schema()]
                ),
                core_schema.no_info_plain_validator_function(_whole),
            ],
            mode="left_to_right",
            custom_error_type="int_type",
        ),
    ]
)

_RANGE_MESSAGE: Final = "integer is beyond the supported range of -2^63..2^63"


def _beyond_64_bits(value: int, info: core_schema.ValidationInfo) -> int:
    """An integer beyond `-2^63..2^63`: refused where it is read as a typed integer (the Rust side
    decodes an `i64`, and refuses it as "cannot be represented"), kept where it is only tested
    against a schema (`_TESTED_KEY`), where it is an integer like any other. Called only for an
    integer beyond the range."""
    ctx = info.context
    if isinstance(ctx, Mapping) and ctx.get(_TESTED_KEY):
        return value
    raise PydanticCustomError("int_range", _RANGE_MESSAGE)


# An integer is checked in pydantic-core, in steps: a JSON integer (an `int`, never a `bool`, or a
# whole finite `float` of any size, which becomes the `int` it is), then the schema's own bounds
# (`IntCheck`), then within the 64 bits the Rust side holds. The first step refuses with
# pydantic's own `int_type` error, the range with `int_range`, which says what the range is. The
# range is a limit of the typed models, not of the JSON type: where a value is only tested against
# a schema (`_TESTED_KEY`) an integer of any size passes it, so that `{"not": {"type": "integer"}}`
# refuses 2^63 and `1e300` as JSON Schema does. Python runs only for a whole float beyond 64 bits
# and an integer beyond the range.
_INT_STEPS: Final[list[core_schema.CoreSchema]] = [
    core_schema.union_schema([_INT, _WHOLE_FLOAT], mode="left_to_right", custom_error_type="int_type"),
    core_schema.union_schema(
        [
            core_schema.int_schema(strict=True, ge=_I64_MIN, lt=_I64_MAX),
            core_schema.with_info_plain_validator_function(_beyond_64_bits),
        ],
        mode="left_to_right",
        custom_error_type="int_range",
        custom_error_message=_RANGE_MESSAGE,
    ),
]


def _int_bound(schema: core_schema.CoreSchema, key: str, up: bool) -> int | None:
    """A bound `Field(...)` put on an integer, as the integer with the same meaning for integers:
    `v >= 0.5` is `v >= 1`, `v > 0.5` is `v > 0`, and so on."""
    bound = schema.get(key)
    if bound is None:
        return None
    return int(math.ceil(bound) if up else math.floor(bound))


class IntCheck:
    """A JSON integer (`1.0` included; never a boolean or a string) within the bounds of a
    `Field(...)` before it and within `-2^63..2^63` (of any size where it is only tested against a
    schema: see `_TESTED_KEY`), all checked in pydantic-core: `Annotated[int, Field(ge=0), INT]`.

    The schema's bounds are checked before the range, so that an integer beyond both breaks the
    bound (as the Rust side reports it too), and the range is not checked again where the bounds
    already keep the integer within it."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        inner = handler(source)
        ge, le = _int_bound(inner, "ge", True), _int_bound(inner, "le", False)
        gt, lt = _int_bound(inner, "gt", False), _int_bound(inner, "lt", True)
        if ge is None and le is None and gt is None and lt is None:
            return core_schema.chain_schema(_INT_STEPS)
        bounded = core_schema.int_schema(strict=True, ge=ge, le=le, gt=gt, lt=lt)
        lows = [b for b in (ge, None if gt is None else gt + 1) if b is not None]
        highs = [b for b in (le, None if lt is None else lt - 1) if b is not None]
        if lows and highs and max(lows) >= _I64_MIN and min(highs) < _I64_MAX:
            return core_schema.chain_schema([_INT_STEPS[0], bounded])
        return core_schema.chain_schema([_INT_STEPS[0], bounded, _INT_STEPS[1]])


INT: Final = IntCheck()
"""The `IntCheck`, as generated models use it."""


def _decimal(n: float) -> tuple[int, int]:
    """A number as an exact decimal `(mantissa, exponent)`: an `int` as itself, a `float` as the
    shortest decimal that reads back as it (`repr`, what JSON text writes for it: `0.1` is
    `(1, -1)`, not the binary fraction next to it), except a whole one below 2^64, which is the
    integer it holds (`2.0**60` is 1152921504606846976, not the 1152921504606847000 of `repr`)."""
    if isinstance(n, int):
        return n, 0
    if n.is_integer() and abs(n) < 2**64:
        return int(n), 0
    sign, digits, exponent = Decimal(repr(n)).as_tuple()
    mantissa = int("".join(map(str, digits)))
    return (-mantissa if sign else mantissa), int(exponent)


def multiple_of(value: float, multiple: float) -> bool:
    """`multipleOf`: whether `value` divided by `multiple` (positive) is an integer, both read as
    the decimal numbers JSON writes them as (`0.3` is a multiple of `0.1`, `0.0075` of `0.0001`),
    exactly, as the Rust and TypeScript runtimes answer."""
    if isinstance(value, int) and isinstance(multiple, int):
        return value % multiple == 0
    if isinstance(value, float) and not math.isfinite(value):
        return False
    (a, p), (b, q) = _decimal(value), _decimal(multiple)
    a, b = abs(a), abs(b)
    if a == 0:
        return True
    if b == 0:
        return False
    if p >= q:
        return a * pow(10, p - q, b) % b == 0
    scale: int = 10 ** (q - p)
    return a % (b * scale) == 0


class MultipleOf:
    """`multipleOf` on a number the annotations before it checked:
    `Annotated[int, Field(ge=0), INT, MultipleOf(2)]` (see `multiple_of`)."""

    def __init__(self, multiple: float) -> None:
        self.multiple = multiple

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def _check(self, value: float) -> float:
        if not multiple_of(value, self.multiple):
            raise PydanticCustomError("multipleOf", "must be a multiple of {n}", {"n": self.multiple})
        return value


Int: TypeAlias = Annotated[int, INT]
"""A JSON integer (`1.0` included; never a boolean or a string)."""

Float: TypeAlias = Annotated[float, Strict(), AllowInfNan(False)]
"""A JSON number (never a boolean or a string, never `NaN` or an infinity)."""

Str: TypeAlias = Annotated[str, Strict()]
"""A JSON string."""

Bool: TypeAlias = Annotated[bool, Strict()]
"""A JSON boolean."""


def not_null(value: object) -> object:
    """Refuses JSON `null` for a property that may be left out but is never null."""
    if value is None:
        raise PydanticCustomError("null_type", "null is not allowed here; leave the property out instead")
    return value


def _null_or_defer(value: object) -> object:
    not_null(value)
    raise _defer(0)


# What a property's value can be but `None`: a decoded JSON value, or a model or mapping given in
# Python (`isinstance` with these is pydantic-core's check, so `NOT_NULL` costs no call to Python).
_NOT_NONE: Final = (str, dict, list, int, float, BaseModel, Mapping)


class NotNull:
    """A property that may be left out (it is `None` then) but whose value is never JSON `null`:
    `Annotated[X | None, NOT_NULL] = None`."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        schema = handler(source)
        if schema["type"] == "nullable":
            # The value's own check first (it refuses null too), then, only when that fails, the
            # exact one, under the labels `violations` reads: `null` refused as such, and for any
            # other value the first check's errors, which are the exact ones (not checked again).
            null = core_schema.no_info_plain_validator_function(_null_or_defer)
            return core_schema.union_schema([(schema["schema"], FAST), (null, EXACT)], mode="left_to_right")
        exact = core_schema.no_info_before_validator_function(not_null, schema)
        refuse = core_schema.custom_error_schema(
            core_schema.is_instance_schema(_NOT_NONE),
            custom_error_type="null_type",
            custom_error_message="null is not allowed here; leave the property out instead",
        )
        return core_schema.json_or_python_schema(
            json_schema=exact, python_schema=core_schema.chain_schema([refuse, schema])
        )


NOT_NULL: Final = NotNull()
"""The `NotNull` check, as generated models use it."""


def _forbidden(value: object) -> object:
    raise PydanticCustomError("extra_forbidden", "Extra inputs are not permitted")


class Forbidden:
    """A property an object closed by `additionalProperties: false` lists in `required` without
    declaring it: no value can stand there, and one that does is an undeclared member (keyword
    `additionalProperties`, as JSON Schema reports it)."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(_forbidden)


FORBIDDEN: Final = Forbidden()
"""The `Forbidden` check, as generated models use it."""


# --- free-form values ----------------------------------------------------------------------------

_FREE_REF: Final = "openagents._rt.JsonValue"

_FREE_FORM_EXACT: Final[TypeAdapter[Any]] = TypeAdapter(
    _JsonValue, config=ConfigDict(allow_inf_nan=False, defer_build=True)
)


def _free_form_fast() -> core_schema.CoreSchema:
    # Dispatched on the exact Python type (`type` is the discriminator, so a subclass matches no
    # branch): every value of a decoded document is checked in pydantic-core, none in Python.
    ref = core_schema.definition_reference_schema(_FREE_REF)
    return core_schema.tagged_union_schema(
        {
            str: _STR,
            int: core_schema.int_schema(strict=True),
            float: core_schema.float_schema(strict=True, allow_inf_nan=False),
            bool: core_schema.bool_schema(strict=True),
            type(None): core_schema.none_schema(),
            dict: core_schema.dict_schema(_STR, ref, strict=True),
            list: core_schema.list_schema(ref, strict=True),
        },
        type,
        ref=_FREE_REF,
    )


def _free_form_exact(value: object) -> object:
    return _FREE_FORM_EXACT.validate_python(value)


class _FreeForm:
    """The check of a free-form value (`{}` or `true` in the schema): any JSON value. JSON text
    is taken as pydantic parses it; a decoded document is checked in pydantic-core, each value by
    its type (finite numbers only). A value that check refuses goes through pydantic's own
    `JsonValue` check, which converts a subclass (an enum member becomes its `str`) and refuses
    what is not JSON (a tuple, a set, a key that is not a string)."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        python = core_schema.union_schema(
            [
                core_schema.definition_reference_schema(_FREE_REF),
                core_schema.no_info_plain_validator_function(_free_form_exact),
            ],
            mode="left_to_right",
            custom_error_type="invalid-json-value",
            custom_error_message="input was not a valid JSON value",
        )
        return core_schema.definitions_schema(
            core_schema.json_or_python_schema(json_schema=core_schema.any_schema(), python_schema=python),
            [_free_form_fast()],
        )


if TYPE_CHECKING:
    JsonValue: TypeAlias = _JsonValue
else:
    JsonValue = _FreeForm
"""Any JSON value: the type of a free-form property (`{}` or `true` in the schema)."""


# --- JSON equality --------------------------------------------------------------------------------


def json_equal(a: object, b: object) -> bool:
    """Equality as JSON Schema's `const` and `enum` see it: `1 == 1.0`, but `true != 1`."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return False


def _canonical(value: object) -> object:
    """A hashable form of a JSON value, equal for values JSON Schema calls equal: `1` and `1.0`
    (each number as the exact text of its value), objects whose members are equal in any order;
    `true` is not `1`. A model or enum member is taken as the JSON it is written as."""
    if isinstance(value, bool):
        return (1, value)
    if isinstance(value, int):
        # As text: Python's number hashes are not randomised (multiples of 2**61 - 1 all hash
        # alike), its text hashes are, so a hostile array cannot make the lookup quadratic.
        return (2, str(int(value)))
    if isinstance(value, float):
        # A whole float is the integer it equals (`1.0` is `1`), written exactly.
        return (2, str(int(value)) if value.is_integer() else repr(value))
    if isinstance(value, str):
        return (3, str(value))
    if value is None:
        return (0,)
    if isinstance(value, (list, tuple)):
        return (4, tuple(map(_canonical, value)))
    if isinstance(value, dict):
        return (5, frozenset((k, _canonical(v)) for k, v in value.items()))
    if isinstance(value, BaseModel):
        return _canonical(value.model_dump(mode="json", by_alias=True, exclude_unset=True))
    if isinstance(value, enum.Enum):
        return _canonical(value.value)
    return (6, id(value))


def _unique(items: list[Any]) -> list[Any]:
    """`uniqueItems`: the first element equal, as JSON, to an earlier one is refused."""
    seen: dict[object, int] = {}
    for i, item in enumerate(items):
        first = seen.setdefault(_canonical(item), i)
        if first != i:
            raise PydanticCustomError(
                "uniqueItems", "items {first} and {i} are equal; the items must be unique", {"first": first, "i": i}
            )
    return items


def _unique_as_given(value: Any, handler: core_schema.ValidatorFunctionWrapHandler) -> Any:
    out = handler(value)
    if isinstance(value, list):
        _unique(value)
    return out


class Unique:
    """`uniqueItems: true` on an array: no two elements are equal as JSON values. The elements
    are compared as given (a decoded document's, or JSON text's as parsed), not as the models
    made of them, so an integer read into a `float` field keeps every digit."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_wrap_validator_function(_unique_as_given, handler(source))


UNIQUE: Final = Unique()
"""The `Unique` check, as generated models use it."""


def _plain_str(value: object) -> bool:
    """Whether a value is a `str` pydantic-core can hold (no lone surrogate), and so a literal it
    can check."""
    if not isinstance(value, str) or value.__class__ is not str:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _show(value: object) -> str:
    import json

    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


class Const:
    """`const`: exactly one JSON value."""

    def __init__(self, value: object) -> None:
        self.value = value

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        if _plain_str(self.value):
            # A string (a tag, mostly): pydantic-core's literal check, which takes only a string.
            return core_schema.custom_error_schema(
                core_schema.literal_schema([self.value]),
                custom_error_type="const",
                custom_error_message="must be {expected}",
                custom_error_context={"expected": _show(self.value)},
            )
        # pydantic's literals hold `True == 1`; JSON Schema does not.
        return core_schema.no_info_plain_validator_function(self._check)

    def _check(self, value: object) -> object:
        if json_equal(value, self.value):
            return self.value
        raise PydanticCustomError("const", "must be {expected}", {"expected": _show(self.value)})


class OneOf:
    """`enum` of values other than a documented string enum: one of the listed JSON values."""

    def __init__(self, values: Sequence[object]) -> None:
        self.values = list(values)

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        if self.values and all(_plain_str(v) for v in self.values):
            return core_schema.custom_error_schema(
                core_schema.literal_schema(self.values),
                custom_error_type="enum",
                custom_error_context={"expected": "one of " + _show(self.values)},
            )
        return core_schema.no_info_plain_validator_function(self._check)

    def _check(self, value: object) -> object:
        for v in self.values:
            if json_equal(value, v):
                return v
        raise PydanticCustomError("enum", "must be one of {expected}", {"expected": _show(self.values)})


class Pattern:
    """`pattern`: an ECMA-262 pattern, translated by the generator into a Python `re` pattern with
    the same meaning (`$` never matches before a trailing newline), searched unanchored."""

    def __init__(self, regex: str, source: str) -> None:
        self.source = source
        if regex.startswith("(?V0)"):
            # Unicode property escapes (`\\p{...}`): the `regex` module knows ECMA-262's names.
            try:
                engine = importlib.import_module("regex")
            except ImportError:
                raise ImportError(
                    f"the schema pattern {source!r} uses Unicode properties, which need the `regex`"
                    " package: pip install 'openagents[unicode-patterns]'"
                ) from None
            self._search: Callable[[str], object] = engine.compile(regex).search
        else:
            self._search = re.compile(regex).search

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def _check(self, value: str) -> str:
        if self._search(value) is None:
            raise PydanticCustomError(
                "string_pattern_mismatch", "String should match pattern '{pattern}'", {"pattern": self.source}
            )
        return value


Evaluated: TypeAlias = tuple[Sequence[str], bool] | tuple[Sequence[str], bool, Sequence[Pattern]]
"""What a place `unevaluatedProperties` sees through evaluates: property names, whether every
property, and `patternProperties`' patterns (a name one matches is evaluated) when there are any."""


@dataclass(frozen=True)
class Present:
    """A guard of what `unevaluatedProperties` sees: the object has this member (a
    `dependentSchemas` entry then applies)."""

    name: str


@dataclass(frozen=True)
class Fails:
    """A guard of what `unevaluatedProperties` sees: the value does not match this schema (an
    `if` whose `else` then applies)."""

    schema: Any


class WireEnum(str, enum.Enum):
    """The base of generated string enums: members compare and hash as their wire strings."""

    def __str__(self) -> str:
        return str(self.value)


class EnumOf:
    """A string enum where it is used: a member, or (when `extensible` and read leniently, or
    always when `open`: the schema allows any other string) the unknown value as a plain `str`.

    A JSON string first, then a member, both in pydantic-core; only a string no member has goes
    back to Python, to keep it (lenient or `open`) or refuse it (strict)."""

    def __init__(self, cls: type[WireEnum], *, extensible: bool = False, open: bool = False) -> None:
        self.cls = cls
        self.extensible = extensible or open
        self.open = open
        self.allowed = ", ".join(_show(m.value) for m in cls)

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        members = list(self.cls)
        if not members or not all(_plain_str(m.value) for m in members):
            # A value pydantic-core cannot hold as a literal (a lone surrogate): checked in Python.
            return core_schema.with_info_plain_validator_function(self._check)
        fast = core_schema.enum_schema(self.cls, members, sub_type="str")
        member: core_schema.CoreSchema = fast
        if self.open:
            check: core_schema.CoreSchema = core_schema.union_schema([member, _STR], mode="left_to_right")
        else:
            if self.extensible:
                member = core_schema.union_schema(
                    [member, core_schema.with_info_plain_validator_function(self._unknown)], mode="left_to_right"
                )
            check = core_schema.custom_error_schema(
                member, custom_error_type="enum", custom_error_context={"expected": "one of " + self.allowed}
            )
        exact = core_schema.chain_schema([_STR, check])
        # JSON text: a member straight from the text (pydantic-core's enum takes only a JSON
        # string there), then, only when that fails, the exact check, under the labels
        # `violations` reads. A decoded value needs the string check first (the enum alone would
        # take `bytes`).
        return core_schema.json_or_python_schema(
            json_schema=core_schema.union_schema([(fast, FAST), (exact, EXACT)], mode="left_to_right"),
            python_schema=exact,
        )

    def _check(self, value: object, info: core_schema.ValidationInfo) -> object:
        if isinstance(value, self.cls):
            return value
        if not isinstance(value, str):
            raise PydanticCustomError("string_type", "Input should be a valid string")
        try:
            return self.cls(value)
        except ValueError:
            return self._unknown(value, info)

    def _unknown(self, value: object, info: core_schema.ValidationInfo) -> object:
        if not self.open and (not self.extensible or is_strict(info)):
            raise PydanticCustomError("enum", "must be one of {expected}", {"expected": self.allowed})
        return value


FAST: Final = "\x00openagents.fast"
"""The label of an error from a union's fast check: `violations` leaves it out."""

EXACT: Final = "\x00openagents.exact"
"""The label of an error from a union's exact check: `violations` leaves the label out."""

_DEFER: Final = "\x00openagents.defer"


# What an exact check raises where the fast check's errors are the exact ones (the value failed
# inside what both checks read alike), so that nothing is checked twice: `_exact_errors` then
# keeps the fast check's errors, without the label and the `skip` places after it (the tag that
# pydantic-core's tagged union puts in the location). Checking again instead would check a
# document nested n unions deep 2^n times.
def _defer(skip: int) -> PydanticCustomError:
    return PydanticCustomError(_DEFER, "the fast check's errors stand", {"skip": skip})


def _at(key: str | int, error: PydanticCustomError | str, value: object) -> ValidationError:
    return ValidationError.from_exception_data("value", [InitErrorDetails(type=error, loc=(key,), input=value)])


class Tagged:
    """A union of objects told apart by a constant string property (the tag).

    The tag is required. A tag naming no branch is refused at the tag, unless the union is
    `x-extensible` and the document is read leniently: then it becomes the `unknown` model.

    An object goes straight to its branch's model, by its tag, in pydantic-core (a tagged union);
    anything else, or an object that fails there, is checked again in Python, which keeps an
    unknown kind (lenient) or says where the document is wrong, at the tag or inside the branch
    (pydantic-core would name the tag in the location). Both checks' errors are reported, under
    the labels `FAST` and `EXACT` (see the module's documentation)."""

    def __init__(self, tag: str, branches: Mapping[str, type[Model]], unknown: type[Model] | None = None) -> None:
        self.tag = tag
        self.branches = dict(branches)
        self.unknown = unknown
        self.classes: tuple[type[Model], ...] = tuple(self.branches.values()) + ((unknown,) if unknown else ())

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        choices = {kind: handler.generate_schema(cls) for kind, cls in self.branches.items()}
        union = core_schema.tagged_union_schema(choices, self.tag, from_attributes=False)
        # The tagged union in pydantic-core (on JSON text, on the parsed text itself); only when
        # that fails, the exact check in Python. pydantic then reports both, under the labels
        # `violations` reads. No Python runs for a valid document.
        return core_schema.union_schema(
            [(union, FAST), (core_schema.with_info_plain_validator_function(self._slow), EXACT)],
            mode="left_to_right",
            serialization=core_schema.simple_ser_schema("any"),
        )

    def _slow(self, value: object, info: core_schema.ValidationInfo) -> object:
        if isinstance(value, self.classes):
            return value
        if not isinstance(value, Mapping):
            # Any mapping is an object here, as the fast check and the models read one.
            raise PydanticCustomError("dict_type", "Input should be a valid dictionary")
        if self.tag not in value:
            raise _at(self.tag, "missing", value)
        kind = value[self.tag]
        if not isinstance(kind, str):
            raise _at(self.tag, PydanticCustomError("string_type", "Input should be a valid string"), kind)
        cls = self.branches.get(kind)
        if cls is not None and value.__class__ is dict and kind.__class__ is str:
            # The fast check took this branch by its tag and failed inside it: its errors stand.
            raise _defer(1)
        if cls is None:
            if self.unknown is None or is_strict(info):
                known = ", ".join(_show(k) for k in self.branches)
                raise _at(
                    self.tag,
                    PydanticCustomError(
                        "oneOf", "{kind} names no known kind (known: {known})", {"kind": _show(kind), "known": known}
                    ),
                    kind,
                )
            cls = self.unknown
        # The model's own validator: its errors as they are (the fast check's labelled), to be
        # left out, with the labels, where the whole document's errors are read.
        return cls.__pydantic_validator__.validate_python(value, context=info.context)


# --- the dynamic check ----------------------------------------------------------------------------


def json_type(value: object) -> str | None:
    """The JSON type of a decoded value (`integer` for a whole number, `1.0` included)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return None


# The JSON types as pydantic-core checks them, each exactly as `json_type` tells them apart: a
# whole float is an integer (and becomes an `int`), a boolean is never a number. An integer's type
# knows no range: that is only where a value is read as a typed integer (`IntCheck`).
# (`_INT`, `_FLOAT` and `_WHOLE_FLOAT` are with the scalars.)
_DICT: Final = core_schema.dict_schema(strict=True)
_JSON_TYPES: Final[dict[str, core_schema.CoreSchema]] = {
    "null": core_schema.none_schema(),
    "boolean": core_schema.bool_schema(strict=True),
    "integer": core_schema.union_schema([_INT, _WHOLE_FLOAT], mode="left_to_right"),
    "number": core_schema.union_schema([_INT, _FLOAT], mode="left_to_right"),
    "string": _STR,
    "array": core_schema.list_schema(strict=True),
    "object": core_schema.union_schema([_DICT, core_schema.is_instance_schema(BaseModel)], mode="left_to_right"),
}

# The branch of `_JSON_TYPES` that takes a value of exactly that Python type, by type.
_JSON_TYPES_BY_CLASS: Final[dict[str, dict[type, core_schema.CoreSchema]]] = {
    "null": {type(None): _JSON_TYPES["null"]},
    "boolean": {bool: _JSON_TYPES["boolean"]},
    "integer": {int: _INT, float: _WHOLE_FLOAT},
    "number": {int: _INT, float: _JSON_TYPES["number"]},
    "string": {str: _STR},
    "array": {list: _JSON_TYPES["array"]},
    "object": {dict: _DICT},
}

# The same checks on JSON text, as single steps: what each type takes straight from the text, in
# this order; an integer written `1.0` is tried last (`_WHOLE_FLOAT`). On the text nothing tells
# the type before a check, and a step that fails costs less than a union of steps that fails.
_JSON_TEXT_STEPS: Final[dict[str, core_schema.CoreSchema]] = {
    "string": _STR,
    "integer": _INT,
    "number": _JSON_TYPES["number"],
    "boolean": _JSON_TYPES["boolean"],
    "null": _JSON_TYPES["null"],
    "object": _DICT,
    "array": _JSON_TYPES["array"],
}


_Conditional: TypeAlias = tuple[TypeAdapter[Any], TypeAdapter[Any] | None, TypeAdapter[Any] | None]
"""The checks of `if`, `then` and `else`."""


class Json:
    """A schema that allows several JSON types (or rules only a dynamic check expresses): the
    JSON type first, then the rules for that type."""

    def __init__(
        self,
        types: str,
        *,
        min_length: int | None = None,
        max_length: int | None = None,
        pattern: Pattern | None = None,
        minimum: float | None = None,
        maximum: float | None = None,
        exclusive_minimum: float | None = None,
        exclusive_maximum: float | None = None,
        multiple_of: float | None = None,
        min_items: int | None = None,
        max_items: int | None = None,
        unique_items: bool = False,
        contains: tuple[int, Callable[[], Any], int | None] | None = None,
        items: Callable[[], Any] | None = None,
        prefix_items: Callable[[], Sequence[Any]] | None = None,
        model: Callable[[], type[Model]] | None = None,
        min_properties: int | None = None,
        max_properties: int | None = None,
        property_names: Callable[[], Any] | None = None,
        patterns: Sequence[tuple[Pattern, Callable[[], Any]]] = (),
        rest: tuple[Sequence[str], Callable[[], Any] | None] | None = None,
        dependent_required: Sequence[tuple[str, Sequence[str]]] = (),
        dependent_schemas: Sequence[tuple[str, Callable[[], Any]]] = (),
        const: object = ...,
        values: Sequence[object] | None = None,
        all_of: Callable[[], Sequence[Any]] | None = None,
        any_of: Callable[[], Sequence[Any]] | None = None,
        one_of: Callable[[], Sequence[Any]] | None = None,
        not_: Callable[[], Any] | None = None,
        if_: Callable[[], Any] | None = None,
        then: Callable[[], Any] | None = None,
        else_: Callable[[], Any] | None = None,
        unevaluated: Callable[[], Any] | None = None,
        unevaluated_false: bool = False,
        evaluated: Evaluated = ((), False),
        any_of_evaluated: Sequence[Evaluated] = (),
        one_of_evaluated: Sequence[Evaluated] = (),
        guards: Callable[[], Sequence[Any]] | None = None,
        nested_evaluated: Sequence[tuple[Sequence[int], Evaluated]] = (),
    ) -> None:
        self.types = frozenset(types.split())
        self.min_length, self.max_length, self.pattern = min_length, max_length, pattern
        self.minimum, self.maximum = minimum, maximum
        self.exclusive_minimum, self.exclusive_maximum = exclusive_minimum, exclusive_maximum
        self.multiple_of = multiple_of
        self.min_items, self.max_items, self.unique_items = min_items, max_items, unique_items
        self._items = items
        # `prefixItems`: the first elements' schemas, by position (`items` then applies after them).
        self._prefix = prefix_items
        self._prefix_adapters: list[TypeAdapter[Any]] | None = None
        # `contains`: at least `min` and at most `max` elements match its schema.
        self._contains = contains
        self._contains_adapter: TypeAdapter[Any] | None = None
        self._items_adapter: TypeAdapter[Any] | None = None
        self._model = model
        # Rules on an object's members as a whole: their count, their names, `patternProperties`
        # and, beside it, what members no property or pattern names must match (`None`: none
        # may appear).
        self.min_properties, self.max_properties = min_properties, max_properties
        self._members = (property_names, patterns, rest)
        self._member_adapters: (
            tuple[TypeAdapter[Any] | None, list[tuple[Pattern, TypeAdapter[Any]]], TypeAdapter[Any] | None] | None
        ) = None
        self._dependent_required = dependent_required
        self._dependent_schemas = dependent_schemas
        self._dependent_adapters: list[tuple[str, TypeAdapter[Any]]] | None = None
        self._has_members = (
            min_properties is not None
            or max_properties is not None
            or property_names is not None
            or bool(patterns)
            or bool(dependent_required)
            or bool(dependent_schemas)
        )
        self.const = const
        self.values = values
        self._applied = (all_of, any_of, one_of, not_)
        # `if` with `then`, `else` or both (the generator leaves out an `if` that has neither).
        self._conditional = (if_, then, else_)
        self._conditional_adapters: _Conditional | None = None
        # `unevaluatedProperties`: its schema (or `unevaluated_false`: nothing else allowed), and
        # what the other keywords evaluate (always, per `anyOf`/`oneOf` branch that matches, and
        # per nested branch that matches with every branch it sits in).
        self._unevaluated = unevaluated
        self._unevaluated_false = unevaluated_false
        self._unevaluated_adapter: TypeAdapter[Any] | None = None
        self._evaluated = evaluated
        self._branch_evaluated = (any_of_evaluated, one_of_evaluated)
        # The nested branches tested (an annotation, or a tagged union's tag name and value),
        # each once per value, and per way of reaching one the positions of its guards there.
        self._guards = guards
        self._guard_checks: list[TypeAdapter[Any] | tuple[str, str] | Present | Fails] | None = None
        self._nested = nested_evaluated
        # Whether rules apply beside the value's own: the value is then only tested by them.
        self._composed = (
            any(f is not None for f in self._applied) or if_ is not None or unevaluated is not None or unevaluated_false
        )
        self._types_only = (
            all(v is None for v in (min_length, max_length, pattern, minimum, maximum, exclusive_minimum))
            and all(v is None for v in (exclusive_maximum, multiple_of, min_items, max_items, items, model, values))
            and not unique_items
            and contains is None
            and prefix_items is None
            and not self._has_members
            and all(v is None for v in (all_of, any_of, one_of, not_, if_, unevaluated))
            and const is ...
            and not unevaluated_false
            and bool(self.types)
            and self.types <= _JSON_TYPES.keys()
            and not ("integer" in self.types and "number" in self.types)
        )
        self._adapters: (
            tuple[list[TypeAdapter[Any]], list[TypeAdapter[Any]], list[TypeAdapter[Any]], list[TypeAdapter[Any]]] | None
        ) = None

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        if self._types_only:
            # Only the JSON type to check: one branch per type, in pydantic-core. A decoded value
            # goes straight to the branch of its exact Python type (no branch tried and failed
            # first); a subclass, or a value no branch takes, tries every branch in turn.
            types = sorted(self.types)
            each = core_schema.union_schema([_JSON_TYPES[t] for t in types], mode="left_to_right")
            by_type = {c: s for t in types for c, s in _JSON_TYPES_BY_CLASS[t].items()}
            python = core_schema.union_schema(
                [core_schema.tagged_union_schema(by_type, type), each], mode="left_to_right"
            )
            in_order: list[core_schema.CoreSchema | tuple[core_schema.CoreSchema, str]] = [
                s for t, s in _JSON_TEXT_STEPS.items() if t in self.types
            ]
            in_order += [_WHOLE_FLOAT] if "integer" in self.types else []
            text = core_schema.union_schema(in_order, mode="left_to_right")
            return core_schema.custom_error_schema(
                core_schema.json_or_python_schema(json_schema=text, python_schema=python),
                custom_error_type="type",
                custom_error_message="must be {types}",
                custom_error_context={"types": " or ".join(types) or "nothing"},
            )
        return core_schema.with_info_plain_validator_function(self._check)

    def _allows(self, t: str) -> bool:
        return t in self.types or (t == "integer" and "number" in self.types)

    def _check(self, value: object, info: core_schema.ValidationInfo) -> object:
        if self._composed:
            # The value is kept as it is: what the model or the items' check makes of it is not,
            # so they only test it (an integer of any size is an integer there: `_TESTED_KEY`).
            self._own(value, info, _tested(info.context))
            self._check_applied(value, info)
            return value
        return self._own(value, info, info.context)

    def _check_applied(self, value: object, info: core_schema.ValidationInfo) -> None:
        """`allOf`, `anyOf`, `oneOf`, `not` and `if`: each branch validates the value as it is."""
        if self._adapters is None:
            all_of, any_of, one_of, not_ = self._applied
            self._adapters = (
                [TypeAdapter(a) for a in (all_of() if all_of else [])],
                [TypeAdapter(a) for a in (any_of() if any_of else [])],
                [TypeAdapter(a) for a in (one_of() if one_of else [])],
                [TypeAdapter(not_())] if not_ else [],
            )
        all_of_a, any_of_a, one_of_a, not_a = self._adapters
        # Each branch only tests the value (what it makes of it is not kept), so a whole number is
        # an integer there whatever its size: `not` and `oneOf` decide on the JSON type alone.
        tested = _tested(info.context)
        for a in all_of_a:
            a.validate_python(value, context=tested)

        def failures(adapters: list[TypeAdapter[Any]]) -> list[list[Any] | None]:
            out: list[list[Any] | None] = []
            for a in adapters:
                try:
                    a.validate_python(value, context=tested)
                    out.append(None)
                except ValidationError as e:
                    out.append(_exact_errors(e))
            return out

        def closest(results: list[list[Any] | None]) -> str:
            failed = [(len(r), i, r) for i, r in enumerate(results) if r is not None]
            if not failed:
                return ""
            _, i, errors = min(failed, key=lambda f: (f[0], f[1]))
            shown = "; ".join(f"{json_pointer(tuple(e['loc'])) or '(root)'}: {e['msg']}" for e in errors[:3])
            more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
            return f"; the closest, branch {i}, fails at {shown}{more}"

        any_results: list[list[Any] | None] = []
        one_results: list[list[Any] | None] = []
        if any_of_a:
            results = any_results = failures(any_of_a)
            if all(r is not None for r in results):
                raise PydanticCustomError(
                    "anyOf",
                    "must match at least one of {n} schemas, matches none{why}",
                    {"n": len(results), "why": closest(results)},
                )
        if one_of_a:
            results = one_results = failures(one_of_a)
            matched = [i for i, r in enumerate(results) if r is None]
            if not matched:
                raise PydanticCustomError(
                    "oneOf",
                    "must match exactly one of {n} schemas, matches none{why}",
                    {"n": len(results), "why": closest(results)},
                )
            if len(matched) > 1:
                raise PydanticCustomError(
                    "oneOf",
                    "must match exactly one of {n} schemas, matches {m} (branches {a} and {b})",
                    {"n": len(results), "m": len(matched), "a": matched[0], "b": matched[1]},
                )
        if not_a and failures(not_a)[0] is None:
            raise PydanticCustomError("not", "must not match the schema under `not`, and does", {})
        if_, then, else_ = self._conditional
        if if_ is not None:
            # `if` only decides which of `then` and `else` applies; its own errors are not the
            # value's.
            if self._conditional_adapters is None:
                self._conditional_adapters = (
                    TypeAdapter(if_()),
                    TypeAdapter(then()) if then else None,
                    TypeAdapter(else_()) if else_ else None,
                )
            if_a, then_a, else_a = self._conditional_adapters
            chosen = then_a if failures([if_a])[0] is None else else_a
            if chosen is not None:
                chosen.validate_python(value, context=tested)
        if (self._unevaluated is not None or self._unevaluated_false) and isinstance(value, dict):
            self._check_unevaluated(value, info, any_results, one_results)

    def _check_unevaluated(
        self,
        value: dict[str, object],
        info: core_schema.ValidationInfo,
        any_results: list[list[Any] | None],
        one_results: list[list[Any] | None],
    ) -> None:
        """`unevaluatedProperties`: every property no other keyword evaluated."""
        names = set(self._evaluated[0])
        every = self._evaluated[1]
        patterns: list[Pattern] = list(self._evaluated[2]) if len(self._evaluated) > 2 else []

        def add(evaluated: Evaluated) -> None:
            nonlocal every
            names.update(evaluated[0])
            every = every or evaluated[1]
            if len(evaluated) > 2:
                patterns.extend(evaluated[2])

        for sets, results in zip(self._branch_evaluated, (any_results, one_results), strict=True):
            for evaluated, result in zip(sets, results, strict=True):
                if result is None:
                    add(evaluated)
        if self._nested:
            if self._guard_checks is None:
                assert self._guards is not None
                self._guard_checks = [
                    g
                    if isinstance(g, (tuple, Present))
                    else Fails(TypeAdapter(g.schema))
                    if isinstance(g, Fails)
                    else TypeAdapter(g)
                    for g in self._guards()
                ]
            checks = self._guard_checks
            held: dict[int, bool] = {}

            def holds(i: int) -> bool:
                if i not in held:
                    g = checks[i]
                    if isinstance(g, tuple):
                        tag = value.get(g[0])
                        held[i] = type(tag) is str and tag == g[1]
                    elif isinstance(g, Present):
                        held[i] = g.name in value
                    elif isinstance(g, Fails):
                        held[i] = not _matches(g.schema, value, info)
                    else:
                        held[i] = _matches(g, value, info)
                return held[i]

            for when, evaluated in self._nested:
                if all(holds(i) for i in when):
                    add(evaluated)
        if every:
            return
        errors: list[InitErrorDetails] = []
        for key, item in value.items():
            if key in names or any(p._search(key) is not None for p in patterns):
                continue
            if self._unevaluated_false:
                error = PydanticCustomError(
                    "unevaluatedProperties",
                    "property `{key}` is not allowed here: no keyword of the schema evaluates it",
                    {"key": key},
                )
                errors.append(InitErrorDetails(type=error, loc=(key,), input=item))
                continue
            if self._unevaluated_adapter is None:
                assert self._unevaluated is not None
                self._unevaluated_adapter = TypeAdapter(self._unevaluated())
            try:
                self._unevaluated_adapter.validate_python(item, context=_tested(info.context))
            except ValidationError as e:
                errors.extend(_reraise(d, (key,)) for d in _exact_errors(e))
        if errors:
            raise ValidationError.from_exception_data("value", errors)

    def _own(self, value: object, info: core_schema.ValidationInfo, context: object) -> object:
        """The JSON type and the rules for that type; the items and the model are checked under
        `context`."""
        t = json_type(value)
        if isinstance(value, BaseModel) and "object" in self.types:
            return value
        if t is None or not self._allows(t):
            raise PydanticCustomError(
                "type", "must be {types}", {"types": " or ".join(sorted(self.types)) or "nothing"}
            )
        if self.const is not ... and not json_equal(value, self.const):
            raise PydanticCustomError("const", "must be {expected}", {"expected": _show(self.const)})
        if self.values is not None and not any(json_equal(value, v) for v in self.values):
            raise PydanticCustomError("enum", "must be one of {expected}", {"expected": _show(list(self.values))})
        if isinstance(value, str):
            n = len(value)
            if self.min_length is not None and n < self.min_length:
                raise PydanticCustomError("minLength", "must be at least {n} characters long", {"n": self.min_length})
            if self.max_length is not None and n > self.max_length:
                raise PydanticCustomError("maxLength", "must be at most {n} characters long", {"n": self.max_length})
            if self.pattern is not None:
                self.pattern._check(value)
            return value
        if t in ("integer", "number"):
            assert isinstance(value, (int, float))
            if self.minimum is not None and value < self.minimum:
                raise PydanticCustomError("minimum", "must be at least {n}", {"n": self.minimum})
            if self.maximum is not None and value > self.maximum:
                raise PydanticCustomError("maximum", "must be at most {n}", {"n": self.maximum})
            if self.exclusive_minimum is not None and value <= self.exclusive_minimum:
                raise PydanticCustomError("exclusiveMinimum", "must be more than {n}", {"n": self.exclusive_minimum})
            if self.exclusive_maximum is not None and value >= self.exclusive_maximum:
                raise PydanticCustomError("exclusiveMaximum", "must be less than {n}", {"n": self.exclusive_maximum})
            if self.multiple_of is not None and not multiple_of(value, self.multiple_of):
                raise PydanticCustomError("multipleOf", "must be a multiple of {n}", {"n": self.multiple_of})
            if t == "integer" and isinstance(value, float) and "number" not in self.types:
                return int(value)
            return value
        if isinstance(value, list):
            if self.min_items is not None and len(value) < self.min_items:
                raise PydanticCustomError("minItems", "must have at least {n} items", {"n": self.min_items})
            if self.max_items is not None and len(value) > self.max_items:
                raise PydanticCustomError("maxItems", "must have at most {n} items", {"n": self.max_items})
            if self.unique_items:
                _unique(value)
            if self._contains is not None:
                least, schema, most = self._contains
                if self._contains_adapter is None:
                    self._contains_adapter = TypeAdapter(schema())
                tested = _tested(context)
                count = sum(1 for item in value if _passes(self._contains_adapter, item, tested))
                if count < least:
                    keyword = "contains" if least == 1 else "minContains"
                    raise PydanticCustomError(
                        keyword,
                        "must have at least {n} items matching the schema under `contains`, has {m}",
                        {"n": least, "m": count},
                    )
                if most is not None and count > most:
                    raise PydanticCustomError(
                        "maxContains",
                        "must have at most {n} items matching the schema under `contains`, has {m}",
                        {"n": most, "m": count},
                    )
            if self._items is not None or self._prefix is not None:
                if self._items_adapter is None and self._items is not None:
                    self._items_adapter = TypeAdapter(self._items())
                if self._prefix_adapters is None and self._prefix is not None:
                    self._prefix_adapters = [TypeAdapter(a) for a in self._prefix()]
                prefix = self._prefix_adapters or []
                out, errors = [], []
                for i, item in enumerate(value):
                    adapter = prefix[i] if i < len(prefix) else self._items_adapter
                    if adapter is None:
                        out.append(item)
                        continue
                    try:
                        out.append(adapter.validate_python(item, context=context))
                    except ValidationError as e:
                        for d in _exact_errors(e):
                            errors.append(_reraise(d, (i,)))
                if errors:
                    raise ValidationError.from_exception_data("value", errors)
                return out
            return value
        if isinstance(value, dict) and self._has_members:
            errors = self._member_errors(value, context)
            result: object = value
            if self._model is not None:
                try:
                    result = self._model().__pydantic_validator__.validate_python(value, context=context)
                except ValidationError as e:
                    errors += [_reraise(d, ()) for d in _exact_errors(e)]
            if errors:
                raise ValidationError.from_exception_data("value", errors)
            return result
        if isinstance(value, dict) and self._model is not None:
            return self._model().__pydantic_validator__.validate_python(value, context=context)
        return value

    def _member_errors(self, value: dict[Any, object], context: object) -> list[InitErrorDetails]:
        """`minProperties`, `maxProperties`, `propertyNames` and `patternProperties` (with what
        `additionalProperties` says beside it): every violation, each member's under its name."""
        if self._member_adapters is None:
            names, patterns, rest = self._members
            self._member_adapters = (
                TypeAdapter(names()) if names else None,
                [(p, TypeAdapter(a())) for p, a in patterns],
                TypeAdapter(rest[1]()) if rest is not None and rest[1] is not None else None,
            )
        names_a, patterns_a, rest_a = self._member_adapters
        rest = self._members[2]
        tested = _tested(context)
        errors: list[InitErrorDetails] = []
        n = len(value)
        least, most = self.min_properties, self.max_properties
        for bound, keyword, word, beyond in (
            (least, "minProperties", "at least", least is not None and n < least),
            (most, "maxProperties", "at most", most is not None and n > most),
        ):
            if bound is not None and beyond:
                message = f"must have {word} {bound} properties, has {n}"
                errors.append(InitErrorDetails(type=PydanticCustomError(keyword, message), loc=(), input=value))

        def test(adapter: TypeAdapter[Any], item: object, *loc: str) -> None:
            try:
                adapter.validate_python(item, context=tested)
            except ValidationError as e:
                errors.extend(_reraise(d, loc) for d in _exact_errors(e))

        for key, required in self._dependent_required:
            if key in value:
                for name in required:
                    if name not in value:
                        message = f"missing property `{name}`, required when `{key}` is present"
                        error = PydanticCustomError("dependentRequired", message)
                        errors.append(InitErrorDetails(type=error, loc=(), input=value))
        if self._dependent_schemas:
            if self._dependent_adapters is None:
                self._dependent_adapters = [(k, TypeAdapter(a())) for k, a in self._dependent_schemas]
            for key, adapter in self._dependent_adapters:
                if key in value:
                    test(adapter, value)

        for key, item in value.items():
            if not isinstance(key, str):
                continue
            if names_a is not None:
                test(names_a, key, key)
            matched = False
            for pattern, adapter in patterns_a:
                if pattern._search(key) is not None:
                    matched = True
                    test(adapter, item, key)
            if rest is not None and not matched and key not in rest[0]:
                if rest_a is not None:
                    test(rest_a, item, key)
                else:
                    message = f"property `{key}` is not allowed here: no property or pattern declares it"
                    errors.append(
                        InitErrorDetails(
                            type=PydanticCustomError("additionalProperties", message), loc=(key,), input=item
                        )
                    )
        return errors


def _passes(adapter: TypeAdapter[Any], value: object, context: Mapping[str, Any]) -> bool:
    try:
        adapter.validate_python(value, context=context)
    except ValidationError:
        return False
    return True


def _matches(adapter: TypeAdapter[Any], value: object, info: core_schema.ValidationInfo) -> bool:
    return _passes(adapter, value, _tested(info.context))


def _reraise(d: Any, prefix: tuple[str | int, ...]) -> InitErrorDetails:
    t = d["type"]
    err: PydanticCustomError | str = t if t == "missing" else PydanticCustomError(t, d["msg"])
    return InitErrorDetails(type=err, loc=prefix + tuple(d["loc"]), input=d.get("input"))


# --- methods --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MethodSpec(Generic[_T]):
    """One method of the method union: its name, how its params are built, and its result type."""

    name: str
    """The method's name on the wire."""
    attr: str
    """The name of its method on the clients (`rpc.discover` is `rpc_discover`)."""
    params: type[Model] | None
    """The params model, when the params are an object with declared properties."""
    params_adapter: TypeAdapter[Any] | None
    """The params' validator otherwise."""
    params_required: bool
    """Whether the request must carry params."""
    result: TypeAdapter[_T]
    """The validator of the result."""


# --- validation by type name ------------------------------------------------------------------

# pydantic's error types, as the JSON Schema keyword each one breaks.
KEYWORDS: Final[dict[str, str]] = {
    "missing": "required",
    "extra_forbidden": "additionalProperties",
    "string_type": "type",
    "int_type": "type",
    "int_from_float": "type",
    "float_type": "type",
    "finite_number": "type",
    "bool_type": "type",
    "dict_type": "type",
    "list_type": "type",
    "model_type": "type",
    "model_attributes_type": "type",
    "none_required": "type",
    "null_type": "type",
    "string_too_short": "minLength",
    "string_too_long": "maxLength",
    "string_pattern_mismatch": "pattern",
    "greater_than_equal": "minimum",
    "less_than_equal": "maximum",
    "greater_than": "exclusiveMinimum",
    "less_than": "exclusiveMaximum",
    "too_short": "minItems",
    "too_long": "maxItems",
    "int_range": "type",
    "literal_error": "enum",
    "recursion_depth_exceeded": "json",
    "json_invalid": "json",
}

_TOO_DEEP: Final = "the document is nested too deeply to check (recursion limit exceeded)"


def _too_deep(title: str, value: object) -> ValidationError:
    """A document nested deeper than Python's recursion limit lets a check go, as a validation
    error (keyword `json`, as the Rust validator reports its nesting limit) rather than a
    `RecursionError`."""
    return ValidationError.from_exception_data(
        title, [InitErrorDetails(type="recursion_depth_exceeded", loc=(), input=value)]
    )


@dataclass(frozen=True)
class Violation:
    """One way a document breaks its schema: where (a JSON pointer), which keyword, and what."""

    pointer: str
    keyword: str
    message: str


class UnknownTypeName(KeyError):
    """`validate` was given a name no type of the schema has."""

    def __init__(self, type_name: str, known: Sequence[str]) -> None:
        super().__init__(f"unknown type `{type_name}`; the known types are {', '.join(sorted(known))}")
        self.type_name = type_name


def json_pointer(loc: Sequence[str | int]) -> str:
    """A pydantic location as a JSON pointer (RFC 6901)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in loc)


def _exact_errors(error: ValidationError) -> list[ErrorDetails]:
    """The errors of a document, as the exact checks found them. A union checked fast and then
    exactly (`Tagged`, `NotNull`, `EnumOf` on JSON text) reports the errors of both, under the
    labels `FAST` and `EXACT`: the exact check's are kept, or, where it deferred (`_DEFER`), the
    fast check's; the labels go. Never empty for an error that has errors."""
    return _exact(error.errors(include_url=False))


def _labelled(errors: list[ErrorDetails]) -> bool:
    return any(FAST in d["loc"] or EXACT in d["loc"] for d in errors)


def _exact(errors: list[ErrorDetails]) -> list[ErrorDetails]:
    """`_exact_errors` of a list of errors."""
    if not _labelled(errors):
        return errors
    exact = _resolve(errors, 0)
    if not exact:
        # Only where a document's own keys look like the labels: every error, unlabelled.
        exact = errors
        for d in exact:
            d["loc"] = tuple(p for p in d["loc"] if p != FAST and p != EXACT)
    return exact


def _resolve(errors: list[ErrorDetails], start: int) -> list[ErrorDetails]:
    """`_exact_errors` for errors whose locations hold no label before `start`: each union's
    errors (those sharing the location before their first label) resolved in turn, in order."""
    # In order: an error without a label, or the place (location) of a union's errors.
    slots: list[ErrorDetails | tuple[Any, ...]] = []
    unions: dict[tuple[Any, ...], _Union] = {}
    for d in errors:
        loc = d["loc"]
        at = next((i for i in range(start, len(loc)) if loc[i] == FAST or loc[i] == EXACT), None)
        if at is None:
            slots.append(d)
            continue
        place = tuple(loc[:at])
        if place not in unions:
            unions[place] = _Union()
            slots.append(place)
        union = unions[place]
        if loc[at] == FAST:
            union.fast.append((at, d))
        elif d["type"] == _DEFER and len(loc) == at + 1:
            # This union's own exact check deferred (a union inside it has its own place).
            union.skip = int((d.get("ctx") or {}).get("skip", 0))
        else:
            union.exact.append((at, d))
    out: list[ErrorDetails] = []
    for slot in slots:
        if not isinstance(slot, tuple):
            out.append(slot)
            continue
        union = unions[slot]
        if union.skip is not None:
            kept, skip = union.fast, union.skip
        else:
            kept, skip = union.exact or union.fast, 0
        for at, d in kept:
            d["loc"] = slot + tuple(d["loc"][at + 1 + skip :])
        out.extend(_resolve([d for _, d in kept], len(slot)))
    return out


@dataclass
class _Union:
    """One union's errors in `_resolve`: each with where its label is."""

    fast: list[tuple[int, ErrorDetails]] = field(default_factory=list)
    exact: list[tuple[int, ErrorDetails]] = field(default_factory=list)
    skip: int | None = None


def _without_labels(error: ValidationError) -> ValidationError:
    """The error with only its exact errors (`_exact_errors`), as pydantic would raise them: each
    with its own type, message and context as they were (never written again for another input)."""
    errors = error.errors(include_url=False)
    if not _labelled(errors):
        return error
    details = [
        InitErrorDetails(type=PydanticCustomError(d["type"], d["msg"], d.get("ctx")), loc=d["loc"], input=d["input"])
        for d in _exact(errors)
    ]
    return ValidationError.from_exception_data(error.title, details)


@contextmanager
def unlabelled() -> Iterator[None]:
    """Raises a `ValidationError` from within without the labels of the fast check
    (`_without_labels`): for a validation whose errors a user reads."""
    try:
        yield
    except ValidationError as e:
        raise _without_labels(e) from None
    except RecursionError:
        raise _too_deep("document", None) from None


def violations(error: ValidationError) -> list[Violation]:
    """Every error pydantic found, as a violation: pointer, keyword and message."""
    out = []
    for d in _exact_errors(error):
        kind = d["type"]
        keyword = KEYWORDS.get(kind, kind)
        loc = tuple(d["loc"])
        message = d["msg"]
        if keyword == "required" and loc:
            message = f"the required property `{loc[-1]}` is missing"
            loc = loc[:-1]
        elif kind == "recursion_depth_exceeded":
            message = _TOO_DEEP
        elif keyword == "additionalProperties" and loc:
            message = f"property `{loc[-1]}` is not allowed here"
        elif kind in _BOUNDS and isinstance(bound := d.get("ctx", {}).get(_BOUNDS[kind][0]), (int, float)):
            message = f"Input should be {_BOUNDS[kind][1]} {_number(bound)}"
        out.append(Violation(pointer=json_pointer(loc), keyword=keyword, message=message))
    return out


# pydantic's number bound errors: the bound's key in the error's context, and the relation.
_BOUNDS: Final[dict[str, tuple[str, str]]] = {
    "greater_than": ("gt", "greater than"),
    "greater_than_equal": ("ge", "greater than or equal to"),
    "less_than": ("lt", "less than"),
    "less_than_equal": ("le", "less than or equal to"),
}


def _number(n: float) -> str:
    """A bound for a message: a whole number as an integer, others as Python writes them (with an
    exponent when very small or very large: `1e-300`, not three hundred digits)."""
    if isinstance(n, float) and n.is_integer() and abs(n) < 1e16:
        return str(int(n))
    return repr(n)


# Made once per mapping and name. Each entry holds its mapping, so that no other mapping can take
# its `id` while the entry lasts.
_ADAPTERS: dict[tuple[int, str], tuple[Mapping[str, object], TypeAdapter[Any]]] = {}
_CHECKERS: dict[tuple[int, str], tuple[Mapping[str, object], SchemaValidator]] = {}


def adapter(types: Mapping[str, object], type_name: str) -> TypeAdapter[Any]:
    """The validator of the named type in `types` (a generated module's `TYPES`), made once."""
    key = (id(types), type_name)
    found = _ADAPTERS.get(key)
    if found is None:
        if type_name not in types:
            raise UnknownTypeName(type_name, list(types))
        found = _ADAPTERS[key] = (types, TypeAdapter(cast(Any, types[type_name])))
    return found[1]


def checker(types: Mapping[str, object], type_name: str) -> SchemaValidator:
    """The check of the named type in `types`, made once: what `adapter` checks, with the same
    errors, but without building what a check throws away. Each generated model checks its
    fields as the model does, and no model object is made; an open object's unknown members are
    not kept (they are not checked either way; an `additionalProperties` schema still checks
    them). It is for decoded JSON documents and JSON text: a model object inside a document is
    not what it checks (in place of a generated model, it is refused)."""
    key = (id(types), type_name)
    found = _CHECKERS.get(key)
    if found is None:
        models = adapter(types, type_name)
        models.rebuild()
        # The schema and configuration the adapter's validator was built from (its pickle form),
        # under the wrapper pydantic puts around it when plugins are installed.
        validator = getattr(models.validator, "__pydantic_schema_validator__", models.validator)
        built = cast(tuple[Any, tuple[Any, ...]], validator.__reduce__())[1]
        found = _CHECKERS[key] = (types, SchemaValidator(_fields_only(built[0]), built[1]))
    return found[1]


# The configuration of a generated model (`OPEN`, `CLOSED`) as pydantic-core gets it. Its one
# setting that checks anything, `allow_inf_nan`, is also on every number check itself (`Float`,
# the integer and free-form checks), so a model's fields check the same without it.
_MODEL_CONFIG: Final = frozenset({"extra_fields_behavior", "serialize_by_alias", "allow_inf_nan", "title"})


def _fields_only(schema: Any, model_wanted: bool = False) -> Any:
    """A core schema in which each generated model is the check of its fields alone (pydantic's
    `model-fields`, which the model itself runs), ignoring unknown members where the model keeps
    them. Anything else, any model of another kind, and a model a function is given (a model
    validator's), stays as it is."""
    if isinstance(schema, (list, tuple)):
        return type(schema)(_fields_only(s) for s in schema)
    if not isinstance(schema, dict):
        return schema
    function = str(schema.get("type", "")).startswith("function-")
    out = {k: _fields_only(v, function and k == "schema") for k, v in schema.items()}
    config = out.get("config")
    if (
        model_wanted
        or out.get("type") != "model"
        or not isinstance(config, dict)
        or not set(config) <= _MODEL_CONFIG
        or config.get("allow_inf_nan") is not False
        or out.get("root_model")
        or out.get("custom_init")
        or "post_init" in out
        or not isinstance(out.get("schema"), dict)
        or out["schema"].get("type") != "model-fields"
    ):
        return out
    fields = dict(out["schema"])
    extra = config.get("extra_fields_behavior", "ignore")
    fields["extra_behavior"] = "ignore" if extra == "allow" and "extras_schema" not in fields else extra
    if "ref" in out:
        fields["ref"] = out["ref"]
    return fields


def validate(types: Mapping[str, object], type_name: str, document: object) -> list[Violation]:
    """Every violation of a decoded JSON document as the named type, checked strictly (an unknown
    kind or enum value is refused); `[]` when it is valid. Raises `UnknownTypeName` for a name
    `types` does not have."""
    try:
        checker(types, type_name).validate_python(document, context=STRICT)
    except ValidationError as e:
        return violations(e)
    except RecursionError:
        return [Violation(pointer="", keyword="json", message=_TOO_DEEP)]
    return []


def validate_json(types: Mapping[str, object], type_name: str, text: str | bytes) -> list[Violation]:
    """`validate` for JSON text, read by pydantic's own parser (nothing after the value; see
    CONFORMANCE.md on `NaN`)."""
    try:
        checker(types, type_name).validate_json(text, context=STRICT)
    except ValidationError as e:
        return violations(e)
    except RecursionError:
        return [Violation(pointer="", keyword="json", message=_TOO_DEEP)]
    return []
