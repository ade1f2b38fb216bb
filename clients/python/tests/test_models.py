"""The generated models as a client uses them: open and closed objects, explicit unknown values,
`null` versus missing, wire round trips, constants, and the exception of every error code."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal, TypeAlias, Union

import pytest
from pydantic import Field, TypeAdapter, ValidationError

import openagents
from openagents import _rt, constants, errors, models
from openagents._generated import methods


def test_constants_are_generated() -> None:
    assert constants.VERSION == "openagents.agent.runner.v1"
    assert constants.MAX_FRAME == 98304
    assert constants.MAX_OUTPUT == 1048576
    assert constants.SERVER_MAX_LINE_BYTES == 16 * 1024 * 1024
    assert constants.SERVER_EVENT_CHANNEL_CAPACITY == 1024
    assert openagents.MAX_FRAME == constants.MAX_FRAME


def test_an_unknown_event_kind_is_an_explicit_unknown_value() -> None:
    ev = models.ServerEvent.from_wire({"seq": 3, "event": {"type": "turn_paused", "reason": "x"}})
    assert isinstance(ev.event, models.UnknownRuntimeEvent)
    assert ev.event.type == "turn_paused"
    assert ev.event.model_extra == {"reason": "x"}
    # It goes back on the wire as it came.
    assert ev.to_wire() == {"seq": 3, "event": {"type": "turn_paused", "reason": "x"}}
    # The strict check (the Rust validator's) refuses it, at the tag.
    with pytest.raises(ValidationError) as info:
        models.ServerEvent.from_wire({"seq": 3, "event": {"type": "turn_paused"}}, strict=True)
    assert info.value.errors()[0]["loc"] == ("event", "type")


def test_a_closed_union_refuses_an_unknown_kind() -> None:
    with pytest.raises(ValidationError) as info:
        TypeAdapter(models.Event).validate_python({"type": "paused"})
    # A TypeAdapter shows the fast check's errors and the exact check's, each under its label;
    # `violations` (what `validate` returns) keeps the exact ones, unlabelled.
    assert [(e["type"], e["loc"]) for e in info.value.errors() if _rt.EXACT in e["loc"]] == [
        ("oneOf", (_rt.EXACT, "type"))
    ]
    [v] = _rt.violations(info.value)
    assert (v.pointer, v.keyword) == ("/type", "oneOf")
    # A model's own entry points give the exact errors alone, unlabelled.
    with pytest.raises(ValidationError) as info:
        models.ServerEvent.model_validate({"seq": 3, "event": {"type": "paused"}}, context=_rt.STRICT)
    assert [(e["type"], e["loc"]) for e in info.value.errors()] == [("oneOf", ("event", "type"))]


def test_a_model_built_in_python_reports_the_exact_errors_alone() -> None:
    with pytest.raises(ValidationError) as info:
        models.ApprovalPrompt(request_id="r", prompt="p", timeout_ms=None)
    assert [(e["type"], e["loc"]) for e in info.value.errors()] == [("null_type", ("timeout_ms",))]
    with pytest.raises(ValidationError) as info:
        models.ApprovalPrompt(request_id="r", prompt="p", timeout_ms="5")
    assert [(e["type"], e["loc"]) for e in info.value.errors()] == [("int_type", ("timeout_ms",))]
    assert models.ApprovalPrompt(request_id="r", prompt="p", timeout_ms=5).timeout_ms == 5


# A `RuntimeStatus` with a state this version does not know and a member it does not declare.
PAUSED_STATUS: Final[dict[str, Any]] = {
    "state": "paused",
    "active_turn": None,
    "counters": {"submitted": 0, "completed": 0, "failed": 0, "interrupted": 0},
    "last_seq": 0,
    "subscribers": 0,
    "lease": None,
    "schema_version": "openagents.agent.runner.v1",
    "limits": {"max_frame": 1, "max_output": 1, "max_line_bytes": 1, "event_channel_capacity": 1},
    "uptime_ms": 5,
}


def test_an_unknown_enum_value_is_kept_as_a_string() -> None:
    status = PAUSED_STATUS
    s = models.RuntimeStatus.from_wire(status)
    assert s.state == "paused" and not isinstance(s.state, models.RuntimeState)
    assert s.model_extra is not None and s.model_extra["uptime_ms"] == 5
    known = models.RuntimeStatus.from_wire({**status, "state": "idle"})
    assert known.state is models.RuntimeState.IDLE


def test_closed_objects_refuse_unknown_fields_and_open_ones_keep_them() -> None:
    with pytest.raises(ValidationError) as info:
        models.AgentSpec.from_wire({"runner": "echo", "command": "/bin/sh"})
    assert info.value.errors()[0]["type"] == "extra_forbidden"
    r = models.SubmitResult.from_wire({"assignment": "a", "conversation": "c", "result": "r", "cost": 1})
    assert r.to_wire()["cost"] == 1


def test_null_is_not_missing() -> None:
    ok = models.ServerEvent.from_wire({"seq": 1, "event": {"type": "shutting_down"}})
    assert ok.time_ms is None and "time_ms" not in ok.to_wire()
    with pytest.raises(ValidationError):
        models.ServerEvent.from_wire({"seq": 1, "time_ms": None, "event": {"type": "shutting_down"}})
    # A required nullable property keeps its null on the wire.
    st = models.RuntimeStatus.model_fields["active_turn"]
    assert st.is_required()


def test_integers_accept_whole_floats_only() -> None:
    assert (
        models.TurnCounters.from_wire({"submitted": 1.0, "completed": 0, "failed": 0, "interrupted": 0}).submitted == 1
    )
    for bad in (1.5, "1", True):
        with pytest.raises(ValidationError):
            models.TurnCounters.from_wire({"submitted": bad, "completed": 0, "failed": 0, "interrupted": 0})


def test_the_turn_round_trips_with_its_json_names() -> None:
    line = (
        '{"schema":"openagents.agent.runner.v1","assignment":"a1","conversation":"c1",'
        '"agent":{"runner":"echo"},"task":"hi","cwd":"/tmp"}'
    )
    turn = models.Turn.from_json(line)
    assert turn.schema_ == constants.VERSION
    assert turn.to_json() == line
    built = models.Turn(
        schema=constants.VERSION,
        assignment="a1",
        conversation="c1",
        agent=models.AgentSpec(runner="echo"),
        task="hi",
        cwd="/tmp",
    )
    assert built == turn
    # The Python name is not a wire name.
    with pytest.raises(ValidationError):
        models.Turn.from_wire({**turn.to_wire(), "schema_": constants.VERSION})


def test_patterns_follow_ecma_262() -> None:
    assert openagents.validate("Id", "abc") == []
    assert [v.keyword for v in openagents.validate("Id", "abc\n")] == ["pattern"]
    assert openagents.validate("Turn", {**_turn(), "cwd": "/tmp\n"}) == []
    assert [v.pointer for v in openagents.validate("Turn", {**_turn(), "cwd": "/a\u0000b"})] == ["/cwd"]


def _turn() -> dict[str, object]:
    return {
        "schema": "openagents.agent.runner.v1",
        "assignment": "a1",
        "conversation": "c1",
        "agent": {"runner": "echo"},
        "task": "hi",
        "cwd": "/tmp",
    }


@pytest.mark.parametrize("code", list(models.ErrorCode))
def test_every_error_code_has_its_exception(code: models.ErrorCode) -> None:
    err = models.RuntimeSubmitError(code=code, message="m", retryable=True)
    exc = errors.exception_for(err, None)
    assert type(exc) is errors.BY_CODE[code.value]
    assert isinstance(exc, errors.RuntimeSubmitException) and isinstance(exc, openagents.OpenAgentsError)
    assert exc.code is code and exc.message == "m"
    assert exc.rpc_code == type(exc).RPC_CODE and exc.rpc_code != -32000
    assert exc.retryable == type(exc).RETRYABLE


def test_an_unknown_error_code_is_the_base_class_and_not_retryable() -> None:
    err = models.RuntimeSubmitError.from_wire({"code": "teapot", "message": "short and stout", "retryable": True})
    exc = errors.exception_for(err, -32099)
    assert type(exc) is errors.RuntimeSubmitException
    assert exc.code == "teapot" and exc.retryable is False and exc.rpc_code == -32099


def test_documented_retry_hints() -> None:
    assert errors.BusyError.RETRYABLE is True and errors.BusyError.RPC_CODE == -32003
    assert errors.InvalidParamsError.RETRYABLE is False and errors.InvalidParamsError.RPC_CODE == -32602


def test_one_method_per_schema_branch() -> None:
    names = list(methods.METHODS)
    assert names[:4] == ["submit", "interrupt", "status", "shutdown"]
    for name, spec in methods.METHODS.items():
        assert spec.name == name
        assert callable(getattr(methods.AsyncMethods, spec.attr))
        assert callable(getattr(methods.Methods, spec.attr))


def test_generated_methods_do_not_collide_with_client_members() -> None:
    from openagents.client import AsyncClient, Client

    own = {"call", "events", "aclose", "close", "stdio", "http", "transport"}
    for spec in methods.METHODS.values():
        assert spec.attr not in own
        assert getattr(AsyncClient, spec.attr) is getattr(methods.AsyncMethods, spec.attr)
        assert getattr(Client, spec.attr) is getattr(methods.Methods, spec.attr)


# Models as the generator writes them, for what our own schema has no example of: a property that
# may be left out but not be null, nested in itself, and a union nested in itself.
class _Node(_rt.Model):
    model_config = _rt.OPEN

    child: Annotated[_Node | None, _rt.NOT_NULL] = None

    n: Annotated[_rt.Int | None, _rt.NOT_NULL] = None


class _Leaf(_rt.Model):
    model_config = _rt.OPEN

    kind: Annotated[Literal["leaf"], _rt.Const("leaf")]

    n: _rt.Int

    note: Annotated[_rt.Str | None, _rt.NOT_NULL] = None


class _Branch(_rt.Model):
    model_config = _rt.OPEN

    kind: Annotated[Literal["branch"], _rt.Const("branch")]

    inner: _Tree


_Tree: TypeAlias = Annotated[Union[_Leaf, _Branch], _rt.Tagged("kind", {"leaf": _Leaf, "branch": _Branch})]
_Branch.model_rebuild()


class _Tags(_rt.Model):
    model_config = _rt.OPEN

    tags: Annotated[
        Annotated[str | list[int], _rt.Json("string array", items=lambda: Annotated[int, Field(ge=0), _rt.INT])] | None,
        _rt.NOT_NULL,
    ] = None

    kind: Annotated[Annotated[str | int, _rt.Json("integer string", values=[1, 2, "x"])] | None, _rt.NOT_NULL] = None


def test_a_failure_deep_in_nested_checks_is_checked_once() -> None:
    # Checked fast and then exactly, each level would check what is below it twice: 2^depth.
    depth = 14
    node: dict[str, object] = {"n": "bad"}
    tree: dict[str, object] = {"kind": "leaf", "n": "bad"}
    for _ in range(depth):
        node = {"child": node}
        tree = {"kind": "branch", "inner": tree}
    cases: list[tuple[Any, dict[str, object], str]] = [
        (_Node, node, "/child" * depth + "/n"),
        (_Tree, tree, "/inner" * depth + "/n"),
    ]
    for annotation, document, pointer in cases:
        adapter: TypeAdapter[Any] = TypeAdapter(annotation)
        with pytest.raises(ValidationError) as info:
            adapter.validate_python(document, context=_rt.STRICT)
        assert len(info.value.errors()) <= 2 * depth + 2
        assert [(v.pointer, v.keyword) for v in _rt.violations(info.value)] == [(pointer, "type")]
        types = {"T": annotation}
        assert [(v.pointer, v.keyword) for v in _rt.validate(types, "T", document)] == [(pointer, "type")]


def test_the_models_entry_points_keep_every_error_as_it_was_raised() -> None:
    # Errors of the exact check, rebuilt without the labels, keep their type and message (a bound's
    # message needs its context; `enum` here is ours, not pydantic's).
    for document, expected in (
        ({"tags": [1, -1]}, [(("tags", 1), "greater_than_equal", "Input should be greater than or equal to 0")]),
        ({"kind": 3}, [(("kind",), "enum", 'must be one of [1, 2, "x"]')]),
    ):
        reads: list[Callable[[dict[str, Any]], _Tags]] = [
            lambda d: _Tags.from_wire(d, strict=True),
            lambda d: _Tags.model_validate(d),
            lambda d: _Tags(**d),
            lambda d: _Tags.from_json(json.dumps(d), strict=True),
        ]
        for read in reads:
            with pytest.raises(ValidationError) as info:
                read(document)
            assert [(e["loc"], e["type"], e["msg"]) for e in info.value.errors()] == expected


def test_a_mapping_that_is_not_a_dict_is_an_object_and_its_errors_are_where_they_are() -> None:
    # An `OrderedDict` (json.loads with `object_pairs_hook`) or a read-only mapping takes the
    # exact check's slow path: its errors, and those of the checks inside it, keep their place.
    adapter: TypeAdapter[Any] = TypeAdapter(_Tree)
    for make in (OrderedDict, MappingProxyType, dict):
        leaf = make({"kind": "leaf", "n": 1, "note": 5})
        tree = make({"kind": "branch", "inner": leaf})
        with pytest.raises(ValidationError) as info:
            adapter.validate_python(tree, context=_rt.STRICT)
        assert [(v.pointer, v.keyword) for v in _rt.violations(info.value)] == [("/inner/note", "type")], make
        assert adapter.validate_python(make({"kind": "leaf", "n": 1}), context=_rt.STRICT).n == 1
