"""A member an object closed by `additionalProperties: false` lists in `required` without
declaring it: no value can stand there. Given, it is an undeclared member (keyword
`additionalProperties`, as JSON Schema reports it and as the Rust and TypeScript validators do);
left out, a missing one (keyword `required`); never keyword `type`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import ModuleType

import pytest
from pydantic import ValidationError

from .conftest import REPO, generated_models

SCHEMA = REPO / "codegen" / "tests" / "fixtures" / "closed_required.json"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    with generated_models(SCHEMA, tmp_path_factory.mktemp("closed_required"), "closed_required_gen") as models:
        yield models


@pytest.mark.parametrize(
    ("type_name", "document", "expected"),
    [
        ("Closed", {"id": "x", "ghost": 1}, [("/ghost", "additionalProperties")]),
        ("Closed", {"id": "x", "ghost": None}, [("/ghost", "additionalProperties")]),
        ("Closed", {"id": "x"}, [("", "required")]),
        ("Kinds", {"kind": "a", "ghost": 1}, [("/ghost", "additionalProperties")]),
        ("Kinds", {"kind": "a"}, [("", "required")]),
        ("Kinds", {"kind": "b", "ghost": 1}, []),
    ],
)
def test_the_member_is_undeclared_when_given_and_missing_when_not(
    models: ModuleType, type_name: str, document: object, expected: list[tuple[str, str]]
) -> None:
    for found in (models.validate(type_name, document), models.validate_json(type_name, json.dumps(document))):
        assert [(v.pointer, v.keyword) for v in found] == expected


def test_the_model_refuses_it_as_pydantic_refuses_an_extra_member(models: ModuleType) -> None:
    with pytest.raises(ValidationError) as caught:
        models.Closed.from_wire({"id": "x", "ghost": 1})
    assert [e["type"] for e in caught.value.errors()] == ["extra_forbidden"]
