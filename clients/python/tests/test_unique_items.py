"""`uniqueItems: true`: no two elements of an array are equal as JSON values (`1` and `1.0` are
equal, `true` and `1` are not, objects with the same members in any order are equal), on typed
arrays, a nullable one, a free-form one and a value that may be an array or a string; through
`validate`, `validate_json` and the models."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import ModuleType

import pytest
from pydantic import ValidationError

from .conftest import REPO, generated_models

SCHEMA = REPO / "codegen" / "tests" / "fixtures" / "unique_items.json"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    with generated_models(SCHEMA, tmp_path_factory.mktemp("unique_items"), "unique_items_gen") as models:
        yield models


VALID = [
    ("Unique", {"tags": ["a", "b"], "scores": [1, 1.5], "points": [{"x": 1}, {"x": 1, "y": 2}], "kinds": ["a", "b"]}),
    ("Unique", {"anything": [1, True, "1", [1], [True], {"a": 1}, {"a": True}, None, 0, False]}),
    ("Unique", {"points": None, "loose": ["a", "a"]}),
    ("Unique", {"points": [{"x": 1, "z": 1}, {"x": 1}]}),
    ("Unique", {"scores": [9007199254740993, 9007199254740992]}),
    ("Unique", {"anything": [9007199254740993, 9007199254740992.0]}),
    ("Mixed", "aa"),
    ("Mixed", ["a", "b"]),
]

REPEATED = [
    ("Unique", {"tags": ["a", "b", "a"]}, "/tags"),
    ("Unique", {"scores": [1, 1.0]}, "/scores"),
    ("Unique", {"points": [{"x": 1, "y": 2}, {"y": 2, "x": 1}]}, "/points"),
    ("Unique", {"points": [{"x": 1, "z": [1]}, {"x": 1, "z": [1.0]}]}, "/points"),
    ("Unique", {"kinds": ["b", "b"]}, "/kinds"),
    ("Unique", {"anything": [{"a": [1, {"b": None}]}, {"a": [1.0, {"b": None}]}]}, "/anything"),
    ("Unique", {"anything": [9007199254740992, 9007199254740992.0]}, "/anything"),
    ("Mixed", ["a", 1, "a"], ""),
]


@pytest.mark.parametrize(("type_name", "document"), VALID)
def test_different_elements_are_valid(models: ModuleType, type_name: str, document: object) -> None:
    assert models.validate(type_name, document) == []
    assert models.validate_json(type_name, json.dumps(document)) == []


@pytest.mark.parametrize(("type_name", "document", "pointer"), REPEATED)
def test_a_repeated_element_is_a_violation(models: ModuleType, type_name: str, document: object, pointer: str) -> None:
    for found in (models.validate(type_name, document), models.validate_json(type_name, json.dumps(document))):
        assert [(v.pointer, v.keyword) for v in found] == [(pointer, "uniqueItems")]
    first = models.validate(type_name, document)[0]
    assert "are equal" in first.message


def test_the_models_refuse_a_repeat_and_keep_the_elements(models: ModuleType) -> None:
    with pytest.raises(ValidationError) as caught:
        models.Unique.model_validate({"tags": ["x", "y", "x"]})
    assert caught.value.errors()[0]["type"] == "uniqueItems"
    with pytest.raises(ValidationError):
        models.Unique(points=[models.Point(x=1), models.Point(x=1)])
    made = models.Unique.model_validate_json('{"scores": [1, 2.5], "points": [{"x": 1}, {"x": 1, "y": 2}]}')
    assert made.scores == [1, 2.5]
    assert made.to_wire()["points"] == [{"x": 1}, {"x": 1, "y": 2}]
