"""`ServerEvent`s decoded straight from JSON bytes by one compiled pydantic validator.

The generated `ServerEvent` checks its integers and picks its `event` branch in Python (the
`Tagged` union, the integer range checks), which costs more than the parse. `decode_event` first
tries a validator built once from the same models in which both are pydantic-core's own: integer
bounds in Rust, and a tagged union of the generated branch models on `type`. It accepts only what
the generated model accepts, with the same result; anything else (an unknown kind, a float such as
`1.0` where an integer goes, an error) goes to `ServerEvent.from_json`, which decides it exactly as
before.
"""

from __future__ import annotations

import copy
import typing
from functools import cache
from typing import Any

from annotated_types import Ge, Le, Lt
from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import SchemaValidator, core_schema

from .. import _rt
from .._generated import models
from .._generated.models import ServerEvent

__all__ = ["decode_event"]

_I64_MAX = 2**63


def _constraints(name: str) -> list[object]:
    """The field's annotations, also those inside `Optional[Annotated[...]]` and `Field(...)`."""
    info = ServerEvent.model_fields[name]
    found: list[object] = []
    todo: list[object] = [*info.metadata, *typing.get_args(info.annotation)]
    while todo:
        m = todo.pop()
        found.append(m)
        todo.extend(getattr(m, "__metadata__", ()))
        todo.extend(getattr(m, "metadata", ()) if isinstance(m, FieldInfo) else ())
    return found


def _int_field(name: str) -> core_schema.CoreSchema | None:
    """A JSON integer within the field's documented bounds (and 64 bits), strict: no float; None
    when the field has no lower bound (not the shape this decoder was written for)."""
    bounds: dict[str, int] = {"lt": _I64_MAX}
    for m in _constraints(name):
        if isinstance(m, Ge):
            bounds["ge"] = int(m.ge)  # type: ignore[call-overload]
        elif isinstance(m, Le):
            bounds["le"] = int(m.le)  # type: ignore[call-overload]
        elif isinstance(m, Lt):
            bounds["lt"] = min(bounds["lt"], int(m.lt))  # type: ignore[call-overload]
    if "ge" not in bounds:
        return None
    return core_schema.int_schema(strict=True, **bounds)  # type: ignore[arg-type]


def _branch(kind: str, cls: type[_rt.Model]) -> core_schema.CoreSchema:
    """A branch model's own schema, its tag's `Const` check (a Python call) made a literal: the
    union has picked the branch by that very value."""
    cls.model_rebuild()
    schema: Any = copy.deepcopy(cls.__pydantic_core_schema__)
    fields = schema.get("schema", {}).get("fields", {}) if schema.get("type") == "model" else {}
    tag = fields.get("type", {}).get("schema", {})
    check = tag.get("function", {}).get("function") if tag.get("type") == "function-plain" else None
    const = getattr(check, "__self__", None)
    if isinstance(const, _rt.Const) and const.value == kind:
        fields["type"]["schema"] = core_schema.literal_schema([kind])
    result: core_schema.CoreSchema = schema
    return result


@cache
def _compiled() -> SchemaValidator | None:
    """The fast validator, or None when `ServerEvent` is not the shape it was written for."""
    fields = ServerEvent.model_fields
    tagged = [a for a in typing.get_args(models.RuntimeEvent) if isinstance(a, _rt.Tagged)]
    if set(fields) != {"seq", "time_ms", "event"} or len(tagged) != 1 or tagged[0].tag != "type":
        return None
    seq, time_ms = _int_field("seq"), _int_field("time_ms")
    if seq is None or time_ms is None:
        return None
    choices = {kind: _branch(kind, cls) for kind, cls in tagged[0].branches.items()}
    schema = core_schema.model_schema(
        ServerEvent,
        core_schema.model_fields_schema(
            {
                "seq": core_schema.model_field(seq),
                "time_ms": core_schema.model_field(core_schema.with_default_schema(time_ms, default=None)),
                "event": core_schema.model_field(core_schema.tagged_union_schema(choices, discriminator="type")),
            },
            model_name="ServerEvent",
            extra_behavior="allow",
        ),
        config=core_schema.CoreConfig(extra_fields_behavior="allow"),
    )
    return SchemaValidator(schema)


def decode_event(payload: bytes) -> ServerEvent | None:
    """The event a JSON document holds; None when it is not a valid event (a newer runtime's
    malformed kind: skipped)."""
    fast = _compiled()
    if fast is not None:
        try:
            event: ServerEvent = fast.validate_json(payload)
            return event
        except ValidationError:
            pass  # decided by the generated model
    try:
        return ServerEvent.from_json(payload)
    except ValidationError:
        return None
