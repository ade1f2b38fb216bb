"""Violations a person reads. Documents nested deeper than Python's recursion limit lets a check
go: `validate`, `validate_json` and the models' readers report a violation with keyword `json` (as
the Rust validator reports its nesting limit, and as both report text that is not JSON) and never
raise `RecursionError`, whether the recursion is pydantic's (a recursive model, its JSON parser) or
the runtime's own (a recursive `anyOf`, checked in Python). The closest failing branch and number
bounds are written as Rust and TypeScript write them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import ModuleType
from typing import Annotated, Any

import pytest
from pydantic import Field, ValidationError

from openagents import _rt

from .conftest import generated_models

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Doc",
    "type": "object",
    "properties": {"v": {"$ref": "#/$defs/JsonV"}, "tree": {"$ref": "#/$defs/Tree"}},
    "$defs": {
        "JsonV": {
            "anyOf": [
                {"type": "null"},
                {"type": "boolean"},
                {"type": "number"},
                {"type": "string"},
                {"type": "array", "items": {"$ref": "#/$defs/JsonV"}},
                {"type": "object", "additionalProperties": {"$ref": "#/$defs/JsonV"}},
            ]
        },
        "Tree": {"type": "object", "properties": {"c": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}}},
    },
}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    root = tmp_path_factory.mktemp("deep")
    path = root / "deep.schema.json"
    path.write_text(json.dumps(SCHEMA))
    with generated_models(path, root, "deep_docs") as models:
        yield models


def nested_arrays(depth: int) -> Any:
    value: Any = None
    for _ in range(depth):
        value = [value]
    return value


def nested_trees(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth):
        value = {"c": [value]}
    return value


def text(type_name: str, depth: int) -> str:
    """The JSON text of `nested_arrays` or `nested_trees` (`json.dumps` has a recursion limit too)."""
    if type_name == "JsonV":
        return "[" * depth + "null" + "]" * depth
    return '{"c":[' * depth + "{}" + "]}" * depth


@pytest.mark.parametrize("depth", [1000, 5000])
@pytest.mark.parametrize("type_name", ["JsonV", "Tree"])
def test_a_document_too_deep_is_a_json_violation(models: ModuleType, type_name: str, depth: int) -> None:
    document = nested_arrays(depth) if type_name == "JsonV" else nested_trees(depth)
    for found in (models.validate(type_name, document), models.validate_json(type_name, text(type_name, depth))):
        assert [v.keyword for v in found] == ["json"], found
        assert "recursion limit exceeded" in found[0].message


@pytest.mark.parametrize("type_name", ["JsonV", "Tree"])
def test_a_shallow_document_is_checked_as_usual(models: ModuleType, type_name: str) -> None:
    document = nested_arrays(20) if type_name == "JsonV" else nested_trees(20)
    assert models.validate(type_name, document) == []
    assert models.validate_json(type_name, json.dumps(document)) == []
    bad = [nested_arrays(19), {"x": {1}}] if type_name == "JsonV" else {"c": [nested_trees(19), 5]}
    assert [v.keyword for v in models.validate(type_name, bad)] != []


@pytest.mark.parametrize("field", ["v", "tree"])
def test_the_models_raise_a_validation_error_not_a_recursion_error(models: ModuleType, field: str) -> None:
    inner = nested_arrays(5000) if field == "v" else nested_trees(5000)
    with pytest.raises(ValidationError) as caught:
        models.Doc.from_wire({field: inner})
    assert any(e["type"] == "recursion_depth_exceeded" for e in caught.value.errors())
    with pytest.raises(ValidationError):
        models.Doc.from_json(f'{{"{field}": {text("JsonV" if field == "v" else "Tree", 5000)}}}')
    assert models.Doc.from_wire({field: nested_arrays(20) if field == "v" else nested_trees(20)}).to_wire()[field]


def test_text_that_is_not_json_is_a_json_violation(models: ModuleType) -> None:
    for bad in ("[1,", "{]", "nul", "[1] 2"):
        assert [v.keyword for v in models.validate_json("JsonV", bad)] == ["json"], bad


def test_the_closest_branch_names_the_root_as_rust_and_typescript_do() -> None:
    # Both branches refuse `1.5` at the root: the closest (the first) is named there.
    free = "null boolean number string array object"
    either = Annotated[_rt.JsonValue, _rt.Json(free, any_of=lambda: [_rt.Int, _rt.Str])]
    (found,) = _rt.validate({"Either": either}, "Either", 1.5)
    assert found.keyword == "anyOf"
    assert "the closest, branch 0, fails at (root): " in found.message, found.message


def test_a_bound_is_written_short_in_the_message() -> None:
    # pydantic writes 1e-300 with three hundred digits; the violation says it as Python does.
    small = Annotated[_rt.Float, Field(lt=1e-300)]
    (found,) = _rt.validate({"Small": small}, "Small", 1e-299)
    assert (found.keyword, found.message) == ("exclusiveMaximum", "Input should be less than 1e-300")
    whole = Annotated[_rt.Float, Field(ge=5.0)]
    (found,) = _rt.validate({"Whole": whole}, "Whole", 1)
    assert (found.keyword, found.message) == ("minimum", "Input should be greater than or equal to 5")
