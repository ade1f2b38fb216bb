"""The compiled `ServerEvent` decoder (`openagents.transport.events`) decides every document as the
generated model does: the shared vectors and edge cases, each decoded both ways."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from openagents.models import ServerEvent
from openagents.transport.events import _compiled, decode_event

from .conftest import REPO

_VECTORS = json.loads((REPO / "tests" / "vectors" / "ServerEvent.json").read_text(encoding="utf-8"))
DOCS: list[Any] = [c["document"] for kind in ("valid", "invalid") for c in _VECTORS.get(kind, []) if "fill" not in c]
DOCS += [
    {"seq": 1, "time_ms": 5, "event": {"type": "text", "text": "x"}},
    {"seq": 1, "event": {"type": "text", "text": "x", "more": [1, 2]}, "later": True},
    {"seq": 1.0, "event": {"type": "text", "text": "x"}},
    {"seq": 1.5, "event": {"type": "text", "text": "x"}},
    {"seq": True, "event": {"type": "text", "text": "x"}},
    {"seq": -1, "event": {"type": "text", "text": "x"}},
    {"seq": 2**53, "event": {"type": "text", "text": "x"}},
    {"seq": 1, "time_ms": None, "event": {"type": "text", "text": "x"}},
    {"seq": 1, "time_ms": 2**63, "event": {"type": "text", "text": "x"}},
    {"seq": 1, "event": {"type": "a_newer_kind", "field": 1}},
    {"seq": 1, "event": {"type": 7}},
    {"seq": 1, "event": {"text": "no type"}},
    {"seq": 1, "event": {"type": "text"}},
    {"seq": 1},
    {"seq": 3, "event": {"type": "gap", "since": 2, "resumed_at": 3}},
    {"seq": 3, "event": {"type": "lagged", "missed": 4}},
    {"seq": 3, "event": {"type": "shutting_down"}},
    [1, 2],
]


def _slow(payload: bytes) -> ServerEvent | None:
    try:
        return ServerEvent.from_json(payload)
    except ValidationError:
        return None


@pytest.mark.parametrize("doc", DOCS, ids=[f"doc-{i}" for i in range(len(DOCS))])
def test_the_compiled_decoder_decides_as_the_generated_model(doc: Any) -> None:
    payload = json.dumps(doc).encode()
    got, want = decode_event(payload), _slow(payload)
    if want is None:
        assert got is None
        return
    assert got is not None
    assert type(got.event) is type(want.event)
    assert got.to_wire() == want.to_wire()
    assert got.model_fields_set == want.model_fields_set and got.model_extra == want.model_extra
    assert got.event.model_fields_set == want.event.model_fields_set


def test_the_common_events_take_the_compiled_path() -> None:
    fast = _compiled()
    assert fast is not None
    for doc in ({"seq": 2, "time_ms": 9, "event": {"type": "text", "text": "w"}}, {"seq": 2, "event": _VECTORS_EVENT}):
        event = fast.validate_json(json.dumps(doc))
        assert isinstance(event, ServerEvent) and event.to_wire() == doc


_VECTORS_EVENT = {"type": "turn_completed", "result": "done"}
