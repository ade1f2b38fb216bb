"""`AsyncClient` and `Client` over the WebSocket `/frontend/v2` of the real `openagents serve --http`:
typed calls, events after `subscribe`, approval requests answered by a callback (and denied when it
fails or is absent), typed refusals, close codes, and interrupt on cancel."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

import pytest

from openagents import (
    AsyncClient,
    Client,
    RunnerFailedError,
    RunnerNotFoundError,
    TransportError,
    UnauthorizedError,
    WebSocketClosed,
)
from openagents.models import (
    ApprovalPrompt,
    ApprovalReply,
    RuntimeEventApprovalResolved,
    RuntimeEventShuttingDown,
    RuntimeState,
    ServerEvent,
)
from openagents.transport import WebSocketTransport
from openagents.transport.websocket import websocket_url

from .conftest import TERMINAL, HttpServer


async def turn(client: AsyncClient, task: str) -> tuple[list[ServerEvent], BaseException | str]:
    """Submits `task` while subscribed; the turn's events, and its result (or the error)."""
    async with client.events() as events:
        submit = asyncio.create_task(client.submit(task))
        seen = []
        async for ev in events:
            seen.append(ev)
            if isinstance(ev.event, TERMINAL):
                break
    try:
        return seen, (await submit).result
    except Exception as e:
        return seen, e


def test_the_url_is_the_runtime_url_or_a_websocket_one() -> None:
    cases = [
        ("http://127.0.0.1:8787/", "ws://127.0.0.1:8787/frontend/v2"),
        ("http://127.0.0.1:8787", "ws://127.0.0.1:8787/frontend/v2"),
        ("https://example.test/", "wss://example.test/frontend/v2"),
        ("ws://127.0.0.1:1/frontend/v2", "ws://127.0.0.1:1/frontend/v2"),
        ("wss://proxy.test/agents/frontend/v2", "wss://proxy.test/agents/frontend/v2"),
    ]
    for given, want in cases:
        assert websocket_url(given) == want, given
    for bad in ("ftp://x/", "127.0.0.1:8787", "/frontend/v2"):
        with pytest.raises(TransportError, match="is not an http"):
            websocket_url(bad)


def test_a_turn_over_the_websocket(http_server: HttpServer) -> None:
    async def main() -> None:
        async with AsyncClient.websocket(http_server.url, token_file=http_server.token_file) as client:
            assert isinstance(client.transport, WebSocketTransport)
            assert client.transport.subprotocol == "openagents.v2"
            status = await client.status()
            assert status.state is RuntimeState.IDLE and status.last_seq == 0
            seen, result = await turn(client, "hello websocket world")
            assert result == "hello websocket world"
            assert [e.event.type for e in seen] == ["turn_started", "text", "text", "text", "turn_completed"]
            assert [e.seq for e in seen] == [1, 2, 3, 4, 5]
            with pytest.raises(RunnerNotFoundError):
                await client.submit("x", runner="nope")
            assert (await client.status()).counters.completed == 1
            raw = await client.call("status")
            assert isinstance(raw, dict) and raw["state"] == "idle"

    asyncio.run(main())


def sync_approve(prompt: ApprovalPrompt) -> bool:
    return True


async def async_approve(prompt: ApprovalPrompt) -> ApprovalReply:
    await asyncio.sleep(0)
    return ApprovalReply(approved=True, answer=f"yes to {prompt.request_id}")


@pytest.mark.parametrize("callback", [sync_approve, async_approve], ids=["sync", "async"])
def test_an_approval_is_answered_by_the_callback(
    ask_http_server: HttpServer, callback: Callable[[ApprovalPrompt], bool | Awaitable[ApprovalReply]]
) -> None:
    asked: list[ApprovalPrompt] = []

    def recording(prompt: ApprovalPrompt) -> bool | Awaitable[ApprovalReply]:
        asked.append(prompt)
        return callback(prompt)

    async def main() -> None:
        server = ask_http_server
        async with AsyncClient.websocket(server.url, token_file=server.token_file, on_approval=recording) as client:
            seen, result = await turn(client, "deploy the site")
        assert result == "approved: deploy the site"
        kinds = [e.event.type for e in seen]
        assert kinds == ["turn_started", "text", "approval_requested", "approval_resolved", "turn_completed"]
        resolved = seen[3].event
        assert isinstance(resolved, RuntimeEventApprovalResolved) and resolved.approved and resolved.by == "admin"
        assert [p.prompt for p in asked] == ["May I do this: deploy the site?"]
        assert asked[0].request_id == resolved.request_id and asked[0].timeout_ms is not None

    asyncio.run(main())


def raises(prompt: ApprovalPrompt) -> bool:
    raise RuntimeError("the approval UI crashed")


async def answers_nonsense(prompt: ApprovalPrompt) -> ApprovalReply:
    return "yes"  # type: ignore[return-value]


@pytest.mark.parametrize("callback", [None, raises, answers_nonsense], ids=["absent", "raises", "nonsense"])
def test_an_approval_is_denied_when_the_callback_fails_or_is_absent(
    ask_http_server: HttpServer, callback: Callable[[ApprovalPrompt], object] | None
) -> None:
    async def main() -> None:
        server = ask_http_server
        async with AsyncClient.websocket(
            server.url,
            token_file=server.token_file,
            on_approval=callback,  # type: ignore[arg-type]
        ) as client:
            seen, outcome = await turn(client, "drop the database")
        assert isinstance(outcome, RunnerFailedError) and "denied: drop the database" in outcome.message
        kinds = [e.event.type for e in seen]
        assert kinds == ["turn_started", "text", "approval_requested", "approval_resolved", "turn_failed"]
        resolved = seen[3].event
        assert isinstance(resolved, RuntimeEventApprovalResolved) and resolved.approved is False

    asyncio.run(main())


def test_a_wrong_token_is_a_typed_error_over_the_websocket(http_server: HttpServer) -> None:
    async def main() -> None:
        client = AsyncClient.websocket(http_server.url, token="0" * 64)
        with pytest.raises(UnauthorizedError) as info:
            async with client:
                pass
        assert info.value.rpc_code == -32001
        assert "0" * 64 not in str(info.value)
        # Without the context manager, the first call connects and is refused the same way.
        with pytest.raises(UnauthorizedError):
            await AsyncClient.websocket(http_server.url, token="0" * 64).status()
        # A path the runtime does not serve.
        with pytest.raises(TransportError, match="404"):
            bad = AsyncClient.websocket(http_server.url + "frontend/v1", token_file=http_server.token_file)
            await bad.status()

    asyncio.run(main())


def test_a_closed_socket_is_a_transport_error_with_its_close_code(http_server: HttpServer) -> None:
    async def main() -> None:
        async with AsyncClient.websocket(http_server.url, token_file=http_server.token_file) as client:
            async with client.events() as events:
                assert (await client.shutdown()).shutting_down is True
                kinds = [type(ev.event) async for ev in events]
                assert kinds[-1] is RuntimeEventShuttingDown  # the stream ends with the last event
            with pytest.raises(WebSocketClosed) as info:
                for _ in range(50):  # the close frame follows the final event
                    await client.status()
                    await asyncio.sleep(0.05)
            assert info.value.code == 1001
            assert "shutting down" in info.value.reason and "1001" in str(info.value)

    asyncio.run(main())


def test_the_blocking_client_over_the_websocket(ask_http_server: HttpServer) -> None:
    threads: list[str] = []

    def approve(prompt: ApprovalPrompt) -> bool:
        threads.append(threading.current_thread().name)
        return prompt.prompt == "May I do this: ship it?"

    with Client.websocket(ask_http_server.url, token_file=ask_http_server.token_file, on_approval=approve) as client:
        assert client.status().state is RuntimeState.IDLE
        assert client.submit("ship it").result == "approved: ship it"
        with pytest.raises(RunnerFailedError):
            client.submit("ship something else")
        with client.events(since=0) as events:
            kinds = []
            for ev in events:
                kinds.append(ev.event.type)
                if ev.seq == 5:
                    break
        assert kinds == ["turn_started", "text", "approval_requested", "approval_resolved", "turn_completed"]
        assert client.status().counters.failed == 1
    # A plain callback runs in a worker thread, never on the caller's thread or the client's loop.
    assert len(threads) == 2 and threading.current_thread().name not in threads
    assert "openagents-client" not in threads
