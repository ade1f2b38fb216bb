"""`openagents serve --http` as standard infrastructure sees it: `GET /events` read the way an
`EventSource` reads it (the WHATWG event-stream format: comments, `retry:`, `id:`, `data:`),
with the headers buffering proxies need and explicit answers to bad `Last-Event-ID` values; and
the probes `GET /healthz` and `GET /readyz`, the latter during a shutdown held open by a turn
whose runner ignores SIGTERM; and the operator's `allowed_origins` as a browser meets them
(CORS preflight, the WebSocket `Origin` check)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from standards_serve import (
    BOUND,
    Server,
    server,
    start_server,
    stop_server,
    strict_response,
)

__all__ = ["server"]  # the fixture


@dataclass
class SseMessage:
    """What an `EventSource` dispatches (or, for `comments` and `retry`, what it reads)."""

    data: str | None = None
    id: str | None = None
    event: str | None = None
    retry: int | None = None
    comments: list[str] = field(default_factory=list)


def sse_blocks(lines: Iterator[str]) -> Iterator[SseMessage]:
    """The event stream as blocks ending at a blank line, parsed as the WHATWG specification
    says (a line starting with `:` is a comment; `field: value` with one optional space)."""
    block = SseMessage()
    for line in lines:
        if line == "":
            yield block
            block = SseMessage()
            continue
        if line.startswith(":"):
            block.comments.append(line[1:].removeprefix(" "))
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            block.data = value if block.data is None else f"{block.data}\n{value}"
        elif name == "id":
            block.id = value
        elif name == "event":
            block.event = value
        elif name == "retry" and value.isdigit():
            block.retry = int(value)


def events(server: Server, **headers: str) -> Any:
    return httpx.stream("GET", f"{server.url}/events", headers={"Authorization": f"Bearer {server.token}", **headers}, timeout=BOUND)


def test_the_event_stream_starts_with_a_comment_and_a_retry_and_proxy_headers(server: Server) -> None:
    with events(server) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["cache-control"] == "no-cache"
        assert r.headers["x-accel-buffering"] == "no"
        # The first block arrives at once, before any event is published.
        first = next(sse_blocks(r.iter_lines()))
        assert first.comments, f"a first comment right after connecting: {first}"
        assert first.retry is not None and first.retry > 0, first
        assert first.data is None, first


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", "", "9" * 40])
def test_a_last_event_id_that_is_not_a_sequence_number_is_400(server: Server, value: str) -> None:
    with events(server, **{"Last-Event-ID": value}) as r:
        r.read()
        assert r.status_code == 400, (value, r.text)
        body = strict_response(r.json())
        assert body["error"]["code"] == -32600 and body["id"] is None, body


def test_a_last_event_id_ahead_of_the_newest_event_gets_a_gap_first(server: Server) -> None:
    status = httpx.post(
        f"{server.url}/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "status"}, headers={"Authorization": f"Bearer {server.token}"}, timeout=BOUND
    ).json()
    newest = status["result"]["last_seq"]
    ahead = newest + 1000
    with events(server, **{"Last-Event-ID": str(ahead)}) as r:
        assert r.status_code == 200
        data = next(b for b in sse_blocks(r.iter_lines()) if b.data is not None)
        event = json.loads(data.data or "")
        assert event["event"]["type"] == "gap", event
        assert event["event"]["since"] == ahead, event


def test_healthz_needs_no_token_and_readyz_is_ready(server: Server) -> None:
    for path in ["/healthz", "/readyz"]:
        r = httpx.get(f"{server.url}{path}", timeout=BOUND)
        assert r.status_code == 200, (path, r.text)
        assert "authorization" not in r.request.headers


def test_readyz_is_503_once_shutdown_has_begun(tmp_path: Path) -> None:
    s = start_server(tmp_path, runner="stubborn")
    auth = {"Authorization": f"Bearer {s.token}"}
    try:
        with httpx.Client(base_url=s.url, headers=auth, timeout=BOUND) as client:
            assert client.get("/readyz").status_code == 200
            # A turn whose runner ignores SIGTERM: the shutdown's interrupt waits out the kill grace.
            with events(s) as stream:
                submit = threading.Thread(
                    target=lambda: httpx.post(
                        f"{s.url}/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "submit", "params": {"task": "hold"}}, headers=auth, timeout=BOUND
                    ),
                    daemon=True,
                )
                submit.start()
                started = next(b for b in sse_blocks(stream.iter_lines()) if b.data and json.loads(b.data)["event"]["type"] == "text")
                assert "holding" in (started.data or "")
            answer: list[Any] = []
            shutdown = threading.Thread(
                target=lambda: answer.append(httpx.post(f"{s.url}/rpc", json={"jsonrpc": "2.0", "id": 2, "method": "shutdown"}, headers=auth, timeout=BOUND)),
                daemon=True,
            )
            shutdown.start()
            # Until the shutdown has answered, /readyz must turn 503 (on the connection the
            # client keeps open); once it has answered, the listener may be gone.
            seen = []
            while not answer:
                try:
                    seen.append(client.get("/readyz").status_code)
                except httpx.TransportError:
                    break
                if seen[-1] == 503:
                    break
            assert 503 in seen, f"/readyz answered {seen} while the shutdown was in progress"
            shutdown.join(BOUND)
            assert answer and answer[0].json()["result"] == {"shutting_down": True}, answer
    finally:
        stop_server(s)


def test_allowed_origins_from_the_operator_configuration(tmp_path: Path) -> None:
    s = start_server(tmp_path, settings='allowed_origins = ["https://app.example"]\n')
    try:
        preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"}
        r = httpx.options(f"{s.url}/rpc", headers={"Origin": "https://app.example", **preflight}, timeout=BOUND)
        assert r.headers.get("access-control-allow-origin") == "https://app.example", r.headers
        assert "POST" in r.headers.get("access-control-allow-methods", "")
        assert {"authorization", "content-type"} <= {h.strip().lower() for h in r.headers.get("access-control-allow-headers", "").split(",")}
        assert int(r.headers.get("access-control-max-age", "0")) > 0
        r = httpx.options(f"{s.url}/rpc", headers={"Origin": "https://other.example", **preflight}, timeout=BOUND)
        assert not [h for h in r.headers if h.lower().startswith("access-control-")], r.headers
        upgrade = {
            "Connection": "Upgrade",
            "Upgrade": "websocket",
            "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
            "Sec-WebSocket-Protocol": f"openagents.v2, openagents.bearer.{s.token}",
        }
        r = httpx.get(f"{s.url}/frontend/v2", headers={"Origin": "https://other.example", **upgrade}, timeout=BOUND)
        assert r.status_code == 403, (r.status_code, r.text)
        assert strict_response(r.json())["error"]["data"]["code"] == "forbidden"
        assert s.token not in r.text
    finally:
        stop_server(s)
