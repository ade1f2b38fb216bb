"""A third-party JSON-RPC 2.0 client (`jsonrpcclient` 4.0.3, with httpx as its transport)
against `openagents serve --http`: single calls, errors, a notification, a batch, and the
transport refusals (401, 413, 415), whose bodies such a client must be able to parse as JSON-RPC
error responses rather than wait forever for a reply that never comes. Every response is also
held to the specification's response object exactly (`strict_response`)."""

from __future__ import annotations

from typing import Any

import httpx
from jsonrpcclient import Error, Ok, notification, parse, request
from standards_serve import BOUND, Server, server, strict_response

__all__ = ["server"]  # the fixture


def post(server: Server, body: Any, token: str | None = None, **headers: str) -> httpx.Response:
    auth = {"Authorization": f"Bearer {server.token if token is None else token}"} if token != "" else {}
    return httpx.post(f"{server.url}/rpc", json=body, headers={**auth, **headers}, timeout=BOUND)


def call(server: Server, body: Any) -> Any:
    """A call whose reply must be a 200 with JSON-RPC; the parsed reply (strictly checked)."""
    r = post(server, body)
    assert r.status_code == 200, (r.status_code, r.text)
    reply = r.json()
    for item in reply if isinstance(reply, list) else [reply]:
        strict_response(item)
    return reply


def test_a_call_and_its_result(server: Server) -> None:
    req = request("status")
    got = parse(call(server, req))
    assert isinstance(got, Ok), got
    assert got.id == req["id"]
    assert got.result["state"] == "idle"
    assert got.result["protocol_version"].count(".") == 2


def test_a_turn_through_the_echo_runner(server: Server) -> None:
    req = request("submit", params={"task": "hello standards"})
    got = parse(call(server, req))
    assert isinstance(got, Ok), got
    assert got.result["result"] == "hello standards"


def test_errors_carry_the_specification_code_and_title(server: Server) -> None:
    for req, code, title in [
        (request("no.such.method"), -32601, "Method not found"),
        (request("status", params={"x": 1}), -32602, "Invalid params"),
        (request("release", params=[1, 2]), -32602, "Invalid params"),
    ]:
        got = parse(call(server, req))
        assert isinstance(got, Error), got
        assert (got.code, got.message, got.id) == (code, title, req["id"])


def test_a_notification_gets_no_reply(server: Server) -> None:
    r = post(server, notification("interrupt"))
    assert (r.status_code, r.content) == (204, b"")


def test_a_batch(server: Server) -> None:
    batch = [request("status"), request("release"), notification("interrupt"), request("nope"), {"foo": "boo"}]
    replies = call(server, batch)
    assert isinstance(replies, list) and len(replies) == 4, replies
    by_id = {r.id: r for r in parse(replies) if r.id is not None}
    assert isinstance(by_id[batch[0]["id"]], Ok)
    released = by_id[batch[1]["id"]]
    # Whether the lease was held depends on the earlier tests' submit; the shape does not.
    assert isinstance(released, Ok) and set(released.result) == {"released"}, released
    nope = by_id[batch[3]["id"]]
    assert isinstance(nope, Error) and nope.code == -32601
    invalid = [r for r in parse(replies) if r.id is None]
    assert len(invalid) == 1 and isinstance(invalid[0], Error) and invalid[0].code == -32600
    # An all-notification batch gets nothing.
    r = post(server, [notification("interrupt"), notification("release")])
    assert (r.status_code, r.content) == (204, b"")


def refusal(r: httpx.Response, status: int) -> Error:
    """A transport refusal: `status`, and a body a JSON-RPC client parses as an error."""
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"] == "application/json"
    got = parse(strict_response(r.json()))
    assert isinstance(got, Error), got
    assert got.id is None
    return got


def test_401_is_a_json_rpc_error_a_client_can_read(server: Server) -> None:
    for token in ["", "0" * 64]:
        r = post(server, request("status"), token=token)
        got = refusal(r, 401)
        assert (got.code, got.message, got.data["code"]) == (-32001, "Unauthorized", "unauthorized")
        assert r.headers["www-authenticate"] == "Bearer"
        assert server.token not in r.text


def test_415_and_413_are_json_rpc_errors(server: Server) -> None:
    r = httpx.post(
        f"{server.url}/rpc",
        content=b'{"jsonrpc":"2.0","method":"status","id":1}',
        headers={"Authorization": f"Bearer {server.token}", "Content-Type": "text/plain"},
        timeout=BOUND,
    )
    got = refusal(r, 415)
    assert (got.code, got.message) == (-32600, "Invalid Request")
    big = b'{"jsonrpc":"2.0","method":"status","id":1,"params":{"pad":"' + b"x" * (16 * 1024 * 1024) + b'"}}'
    r = httpx.post(
        f"{server.url}/rpc",
        content=big,
        headers={"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"},
        timeout=BOUND,
    )
    got = refusal(r, 413)
    assert (got.code, got.message, got.data["code"]) == (-32008, "Frame too large", "frame_too_large")
