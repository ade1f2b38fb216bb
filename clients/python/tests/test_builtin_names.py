"""Properties named as a builtin the generated annotations use (`str`, `int`, `float`, `bool`,
`list`, `dict`) or as an attribute the model class already has (`register`): the field takes a
trailing underscore, keeps its JSON name, and no annotation of the model reads the field instead
of the builtin (a field `str` beside `additionalProperties` of strings made every other member
"None"; a field `int` dropped an integer's bound; an optional `list` broke the import)."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from .conftest import generated_models

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "names.json",
    "title": "Names",
    "type": "object",
    "properties": {
        "str": {"type": "string"},
        "int": {"type": "string"},
        "float": {"type": "boolean"},
        "bool": {"type": "integer"},
        "list": {"type": "array", "items": {"type": "string"}},
        "dict": {"type": "object", "additionalProperties": {"type": "integer"}},
        "register": {"type": "string"},
        "n": {"type": "integer", "minimum": 0},
        "ratio": {"type": "number", "maximum": 1},
        "flags": {"type": "array", "items": {"type": "boolean"}},
    },
    "additionalProperties": {"type": "string"},
}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    root = tmp_path_factory.mktemp("builtin_names")
    schema = root / "schema" / "names.json"
    schema.parent.mkdir()
    schema.write_text(json.dumps(SCHEMA))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with generated_models(Path(schema.parent), root / "out", "builtin_names_gen") as models:
            yield models


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({"x": "y"}, []),
        ({"str": "s", "int": "i", "float": True, "bool": 3, "list": ["a"], "dict": {"k": 1}, "register": "r"}, []),
        ({"n": -1}, [("/n", "minimum")]),
        ({"ratio": 2}, [("/ratio", "maximum")]),
        ({"flags": [True, 1]}, [("/flags/1", "type")]),
        ({"list": [1]}, [("/list/0", "type")]),
        ({"x": 1}, [("/x", "type")]),
    ],
)
def test_the_annotations_read_the_builtins(
    models: ModuleType, document: object, expected: list[tuple[str, str]]
) -> None:
    for found in (models.validate("Names", document), models.validate_json("Names", json.dumps(document))):
        assert [(v.pointer, v.keyword) for v in found] == expected


def test_the_fields_keep_their_json_names(models: ModuleType) -> None:
    made = models.Names.model_validate({"str": "s", "list": ["a"], "register": "r", "int": "i"})
    assert (made.str_, made.list_, made.register_, made.int_) == ("s", ["a"], "r", "i")
    assert made.to_wire() == {"str": "s", "list": ["a"], "register": "r", "int": "i"}
