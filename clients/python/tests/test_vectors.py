"""The shared golden vectors (`tests/vectors/`, `tests/vectors/large/`) through the generated
models: every valid case accepted, every invalid case refused with a violation at the expected
pointer for the expected keyword, the same verdicts as the Rust validator. Each case runs twice:
as a decoded document and as JSON text (pydantic's own parser)."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

import pytest

from openagents import validation

from .conftest import REPO

VECTORS = REPO / "tests" / "vectors"


@dataclass(frozen=True)
class Case:
    type_name: str
    valid: bool
    description: str
    document: Any
    pointer: str | None
    keyword: str | None


def _fill(document: Any, fill: dict[str, Any]) -> Any:
    """The README's `fill` rule: build a value and put it at the pointer `at`."""
    repeat = fill["repeat"]
    if isinstance(repeat, str):
        value: Any = fill.get("prefix", "") + repeat * fill["times"] + fill.get("suffix", "")
    else:
        value = [copy.deepcopy(repeat) for _ in range(fill["times"])]
    parts = [p.replace("~1", "/").replace("~0", "~") for p in fill["at"].split("/")[1:]]
    if not parts:
        return value
    doc = copy.deepcopy(document)
    node = doc
    for p in parts[:-1]:
        node = node[int(p)] if isinstance(node, list) else node[p]
    if isinstance(node, list):
        node[int(parts[-1])] = value
    else:
        node[parts[-1]] = value
    return doc


def _cases() -> list[Any]:
    out = []
    for path in sorted(VECTORS.glob("*.json")) + sorted((VECTORS / "large").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for kind in ("valid", "invalid"):
            for i, c in enumerate(data.get(kind, [])):
                doc = _fill(c["document"], c["fill"]) if "fill" in c else c["document"]
                case = Case(data["type"], kind == "valid", c["description"], doc, c.get("pointer"), c.get("keyword"))
                where = "large/" if path.parent.name == "large" else ""
                out.append(pytest.param(case, id=f"{where}{data['type']}-{kind}-{i}"))
    return out


CASES = _cases()


def test_there_are_vectors() -> None:
    assert len(CASES) > 400


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("mode", ["document", "json"])
def test_vector(case: Case, mode: str) -> None:
    if mode == "document":
        found = validation.validate(case.type_name, case.document)
    else:
        found = validation.validate_json(case.type_name, json.dumps(case.document, ensure_ascii=False))
    got = [(v.pointer, v.keyword) for v in found]
    if case.valid:
        assert found == [], f"{case.description}: refused with {got}"
    else:
        assert found, f"{case.description}: accepted"
        assert (case.pointer, case.keyword) in got, (
            f"{case.description}: expected {(case.pointer, case.keyword)}, got {got}"
        )


def test_every_vector_type_is_a_generated_type() -> None:
    names = {json.loads(p.read_text(encoding="utf-8"))["type"] for p in VECTORS.glob("*.json")}
    assert names <= set(validation.type_names())


def test_unknown_type_is_named() -> None:
    with pytest.raises(KeyError, match="unknown type `Nope`"):
        validation.validate("Nope", {})
