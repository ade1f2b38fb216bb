"""The validation entry points: every schema name, the check that makes no model, numbers."""

from __future__ import annotations

import math
from typing import Annotated, Any

import pytest
from pydantic import Field, TypeAdapter, ValidationError

from openagents import _rt
from openagents._generated import models as gm

from .test_models import PAUSED_STATUS


def test_the_generated_validate_takes_any_schema_name_and_refuses_an_unknown_one() -> None:
    found = gm.validate("Turn", {})
    assert found and all(isinstance(v, _rt.Violation) for v in found)
    assert any(v.keyword == "required" for v in found)
    for name in gm.TYPES:
        gm.validate(name, {})  # every schema name is known
    try:
        gm.validate("NoSuchType", {})
    except _rt.UnknownTypeName as e:
        assert "NoSuchType" in str(e) and "Turn" in str(e)
    else:
        raise AssertionError("an unknown type name must be an error, not valid")


def _node_types(schema: object) -> set[str]:
    """Every `type` of a core schema's nodes."""
    found: set[str] = set()
    if isinstance(schema, dict):
        if isinstance(schema.get("type"), str):
            found.add(schema["type"])
        for value in schema.values():
            found |= _node_types(value)
    elif isinstance(schema, (list, tuple)):
        for value in schema:
            found |= _node_types(value)
    return found


def test_a_check_makes_no_model_and_keeps_the_verdicts_of_the_models() -> None:
    for name in gm.TYPES:
        schema = _rt.checker(gm.TYPES, name).__reduce__()[1][0]
        assert "model" not in _node_types(schema), f"{name}: a model is left in its check"
    # An open object's unknown member is accepted; a closed one's is refused, with the models'
    # own error, from a decoded document and from JSON text.
    status = {**PAUSED_STATUS, "state": "idle"}
    assert gm.validate("RuntimeStatus", status) == []
    assert gm.RuntimeStatus.from_wire(status).model_extra == {"uptime_ms": 5}  # the models keep it
    closed = {"type": "text", "text": "hi", "extra": 1}
    found = [(v.pointer, v.keyword, v.message) for v in gm.validate("Event", closed)]
    assert [(p, k) for p, k, _ in found] == [("/extra", "additionalProperties")]
    assert [
        (v.pointer, v.keyword, v.message) for v in gm.validate_json("Event", '{"type":"text","text":"hi","extra":1}')
    ] == found
    with pytest.raises(ValidationError) as info:
        TypeAdapter(gm.Event).validate_python(closed, context=_rt.STRICT)
    assert [(v.pointer, v.keyword, v.message) for v in _rt.violations(info.value)] == found


class _Point(_rt.Model):
    model_config = _rt.OPEN

    x: _rt.Float
    y: Annotated[_rt.Float, Field(ge=0)] | None = None


def test_nan_and_the_infinities_are_refused_at_every_depth() -> None:
    types: dict[str, Any] = {"Point": _Point, "Number": _rt.Float, "Numbers": list[_rt.Float]}
    refused = [
        ("Point", {"x": math.nan}),
        ("Point", {"x": 1.0, "y": math.inf}),
        ("Number", math.nan),
        ("Numbers", [1.0, -math.inf]),
    ]
    for name, document in refused:
        assert _rt.validate(types, name, document), f"{name} {document}: the check takes it"
        with pytest.raises(ValidationError):
            TypeAdapter(types[name]).validate_python(document, context=_rt.STRICT)
    assert _rt.validate(types, "Point", {"x": 1.5, "y": 2, "z": "kept by the models"}) == []
    assert _rt.validate(types, "Numbers", [1.5, -2]) == []
