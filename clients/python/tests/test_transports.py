"""What every transport does alike, each test run over stdio, HTTP and the WebSocket: events from a
sequence number (a real runtime, and a scripted stream that restarts under the subscriber),
resuming ahead of the runtime, and a cancelled or timed-out `submit` sending `interrupt`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from pydantic import JsonValue

from openagents import AsyncClient, Client
from openagents.models import (
    RuntimeEventGap,
    RuntimeEventText,
    RuntimeEventTurnFailed,
    RuntimeState,
    RuntimeStatus,
    ServerEvent,
)
from openagents.transport import HttpTransport, StdioTransport, Transport, WebSocketTransport
from openagents.transport.base import EventSource, _Omit

from .conftest import TERMINAL, Setup, _serve_http

KINDS = ["stdio", "http", "websocket"]

Connect = Callable[..., Any]


@pytest.fixture(params=KINDS)
def connect(request: pytest.FixtureRequest, setup: Setup) -> Iterator[Connect]:
    """`connect(runner, blocking=False, **options)`: an `AsyncClient` (a blocking `Client`) of the
    test's transport, for a runtime serving `runner` (over HTTP and the WebSocket, one
    `serve --http` per runner, started here)."""
    kind: str = request.param
    with contextlib.ExitStack() as stack:
        servers: dict[str, Any] = {}

        def make(runner: str, blocking: bool = False, **options: Any) -> Any:
            cls: Any = Client if blocking else AsyncClient
            if kind == "stdio":
                return cls.stdio(runner, **options)
            if runner not in servers:
                servers[runner] = stack.enter_context(contextlib.contextmanager(_serve_http)(setup, runner))
            server = servers[runner]
            build = cls.http if kind == "http" else cls.websocket
            return build(server.url, token_file=server.token_file, **options)

        yield make


async def until_terminal(events: Any) -> list[ServerEvent]:
    seen = []
    async for ev in events:
        seen.append(ev)
        if isinstance(ev.event, TERMINAL):
            break
    return seen


def test_events_replay_from_a_sequence_number(connect: Connect) -> None:
    async def main() -> None:
        async with connect("echo") as client:
            assert (await client.submit("one two")).result == "one two"
            # Two subscribers: one replays from 1, the other only sees what is new.
            async with client.events(since=1) as replay, client.events() as live:
                assert [ev.seq for ev in await until_terminal(replay)] == [2, 3, 4]
                result = asyncio.create_task(client.submit("three"))
                assert [ev.seq for ev in await until_terminal(live)] == [5, 6, 7]
                assert (await result).result == "three"

    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_resume_point_ahead_of_the_runtime_gets_a_gap_then_every_event_held(connect: Connect) -> None:
    # A client of an earlier run of a restarted runtime resumes from a point this one never
    # reached: the runtime says so with a `gap`, then replays from its oldest event.
    async def main() -> list[ServerEvent]:
        async with connect("echo") as client:
            assert (await client.submit("one two")).result == "one two"
            async with client.events(since=100) as events:
                return await until_terminal(events)

    seen = asyncio.run(asyncio.wait_for(main(), 30))
    gap = seen[0].event
    assert isinstance(gap, RuntimeEventGap) and (gap.since, gap.resumed_at) == (100, 0), seen[0]
    assert [ev.seq for ev in seen[1:]] == [1, 2, 3, 4]


def test_cancelling_an_awaited_submit_sends_interrupt(connect: Connect) -> None:
    async def main() -> None:
        async with connect("py-slow") as client, client.events() as events:
            submit = asyncio.create_task(client.submit("forever"))
            async for ev in events:
                if isinstance(ev.event, RuntimeEventText):
                    break
            submit.cancel()
            with pytest.raises(asyncio.CancelledError):
                await submit
            last = (await until_terminal(events))[-1].event
            assert isinstance(last, RuntimeEventTurnFailed) and last.error.code == "interrupted"
            assert (await client.status()).counters.interrupted == 1

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_timeout_gives_up_and_interrupts(connect: Connect) -> None:
    async def attempt(timeout: float) -> bool:
        """One `submit` that times out after `timeout` s. False when the runtime answered the
        client's interrupt with `interrupted: false` because the submit had not reached it yet
        (a machine too loaded for this timeout): the client did its part, the runtime had no turn
        to stop yet."""
        async with connect("py-slow", method_timeouts={"submit": timeout}) as client:
            # Also opens the connection, so the timeout is not spent on connecting.
            interrupted_before = (await client.status()).counters.interrupted
            # What the client sends, and the runtime's answer to its interrupt.
            sent: list[tuple[str, JsonValue | _Omit]] = []
            answers: list[JsonValue] = []
            request = client.transport.request

            async def recording(method: str, params: JsonValue | _Omit, t: float | None) -> JsonValue:
                sent.append((method, params))
                result: JsonValue = await request(method, params, t)
                if method == "interrupt":
                    answers.append(result)
                return result

            with pytest.MonkeyPatch.context() as mp, pytest.raises(TimeoutError):
                mp.setattr(client.transport, "request", recording)
                await client.submit("forever")
            submitted = next(p for m, p in sent if m == "submit")
            assert isinstance(submitted, dict)
            assert [p for m, p in sent if m == "interrupt"] == [{"assignment": submitted.get("assignment")}], sent
            if answers == [{"interrupted": False}]:
                # The turn may still start: stop it, so the next attempt finds the runtime idle.
                for _ in range(100):
                    if (await client.status()).active_turn is not None:
                        await client.interrupt()
                        break
                    await asyncio.sleep(0.02)
                await wait_idle(client)
                return False
            assert answers == [{"interrupted": True}], answers
            status = await wait_idle(client)
            assert status.counters.interrupted == interrupted_before + 1
            return True

    async def main() -> None:
        # The timeout always fires (the turn runs forever); a longer one only if the machine was
        # too slow for the short one.
        for timeout in (0.3, 1.5, 5.0):
            if await attempt(timeout):
                return
        pytest.fail("the submit never reached the runtime before its timeout")

    asyncio.run(asyncio.wait_for(main(), 60))


async def wait_idle(client: AsyncClient) -> RuntimeStatus:
    """The runtime's status once it is idle (or after 5 s of polling, for the caller to check)."""
    for _ in range(100):
        status = await client.status()
        if status.state is RuntimeState.IDLE:
            break
        await asyncio.sleep(0.05)
    return status


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """Ctrl-C raises `KeyboardInterrupt` in this process, as in a terminal, even when the test
    run inherited SIGINT ignored (a background job's children do)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("ctrl_c_raises")
def test_ctrl_c_during_a_blocking_submit_sends_interrupt(connect: Connect) -> None:
    with connect("py-slow", blocking=True) as client:
        with client.events() as events:
            main_thread = threading.get_ident()
            problems: list[str] = []

            def interrupt_main_after_first_tick() -> None:
                # Ctrl-C comes whatever happens here, so the test fails rather than hangs.
                try:
                    for ev in events:
                        if isinstance(ev.event, RuntimeEventText):
                            break
                    else:
                        problems.append("the event stream ended before the first tick")
                    if threading.get_ident() == main_thread:
                        problems.append("the watcher ran on the main thread")
                except Exception as e:  # reported below, with the test's failure
                    problems.append(f"the event stream failed: {e!r}")
                finally:
                    os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C does

            watcher = threading.Thread(target=interrupt_main_after_first_tick)
            watcher.start()
            with pytest.raises(KeyboardInterrupt):
                client.submit("forever")
            watcher.join()
            assert not problems, problems
        # The interrupt was answered; the runner is stopped within its kill grace.
        deadline = time.monotonic() + 10
        while (status := client.status()).state is RuntimeState.RUNNING and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status.counters.interrupted == 1


# --- the ordering rule, over a scripted stream -----------------------------------------------------


def text(seq: int) -> dict[str, JsonValue]:
    return {"seq": seq, "event": {"type": "text", "text": f"t{seq}"}}


def notice(seq: int, **event: JsonValue) -> dict[str, JsonValue]:
    return {"seq": seq, "event": event}


class Script:
    """A runtime's side of one connection: `subscribe` with `since` is answered with `feed` (what
    the wire carries then: the previous stream's queued events, the replay, notices), then the
    runtime's last event; `subscribe` without `since` with `last_seq` only."""

    def __init__(self, feed: list[dict[str, JsonValue]], last_seq: int, wrap: Callable[[JsonValue], JsonValue]):
        self.feed = feed
        self.last_seq = last_seq
        self.wrap = wrap
        self.queue: asyncio.Queue[object | None] = asyncio.Queue()
        self.asked_since: list[object] = []

    def end(self) -> dict[str, JsonValue]:
        return notice(max(int(str(e["seq"])) for e in self.feed) + 1, type="shutting_down")

    async def send(self, message: bytes) -> None:
        doc = json.loads(message)
        since = doc.get("params", {}).get("since") if doc["method"] == "subscribe" else None
        self.asked_since.append(since)
        if since is not None:
            for event in [*self.feed, self.end()]:
                self.queue.put_nowait(self.wrap(event))
        self.queue.put_nowait({"jsonrpc": "2.0", "id": doc["id"], "result": {"last_seq": self.last_seq}})
        if since is not None:
            self.queue.put_nowait(None)  # the runtime has shut down

    async def receive(self) -> object | None:
        return await self.queue.get()


class _Scripted:
    """A transport's channel replaced by a `Script` (the transport's own core does the rest)."""

    script: Script

    async def _open(self) -> None:
        return None

    async def _send(self, message: bytes) -> None:
        await self.script.send(message)

    async def _receive(self) -> object | None:
        return await self.script.receive()


class ScriptedStdio(_Scripted, StdioTransport):
    def __init__(self, script: Script) -> None:
        super().__init__("echo")
        self.script = script


class ScriptedWebSocket(_Scripted, WebSocketTransport):
    def __init__(self, script: Script) -> None:
        super().__init__("http://127.0.0.1:9/", token="t")
        self.script = script


def scripted(kind: str, feed: list[dict[str, JsonValue]], last_seq: int) -> tuple[Transport, Script]:
    """A transport of `kind` whose runtime is `feed` (HTTP: the `GET /events` stream)."""
    if kind == "stdio":
        script = Script(feed, last_seq, lambda e: {"event": e})
        return ScriptedStdio(script), script
    if kind == "websocket":
        script = Script(feed, last_seq, lambda e: {"jsonrpc": "2.0", "method": "frontend.v2.event", "params": e})
        return ScriptedWebSocket(script), script
    script = Script(feed, last_seq, lambda e: e)

    def handler(request: httpx.Request) -> httpx.Response:
        script.asked_since.append(request.headers.get("last-event-id"))
        events = [*feed, script.end()]
        body = "".join(f"id: {e['seq']}\ndata: {json.dumps(e)}\n\n" for e in events)
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=httpx.ByteStream(body.encode())
        )

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return HttpTransport("http://127.0.0.1:9/", token="t", client=client), script


async def subscribed(transport: Transport, since: int | None) -> EventSource:
    """An open event source, subscribed as `AsyncClient.events` does it."""
    source = transport.events(since)
    await source.open()
    if since is not None and not transport.resumes:
        await transport.request("subscribe", {"since": since}, 5)
    return source


async def drain(source: EventSource) -> list[tuple[int, str]]:
    seen = []
    while (ev := await asyncio.wait_for(source.next(), 5)) is not None:
        seen.append((ev.seq, ev.event.type))
    return seen


@pytest.mark.parametrize("kind", KINDS)
def test_a_restarted_stream_is_delivered_in_order_once_each(kind: str) -> None:
    # The connection's old stream still carries 50 and 51 when the replay for `since=10` begins:
    # every subscriber gets 11..52 in order, once each, then the runtime's last event.
    feed = [text(50), text(51), *(text(s) for s in range(11, 53))]

    async def main() -> tuple[list[tuple[int, str]], list[tuple[int, str]] | None, list[object]]:
        transport, script = scripted(kind, feed, last_seq=49)
        live = None if kind == "http" else await subscribed(transport, None)
        replay = await subscribed(transport, 10)
        got = await drain(replay)
        got_live = await drain(live) if live is not None else None
        await transport.aclose()
        return got, got_live, script.asked_since

    got, got_live, asked = asyncio.run(main())
    assert got == [*((s, "text") for s in range(11, 53)), (53, "shutting_down")]
    if got_live is not None:
        # A subscriber that was already reading (it had seen up to 49) takes only what is new.
        assert got_live == [(50, "text"), (51, "text"), (52, "text"), (53, "shutting_down")]
    assert asked[-1] in (10, "10")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("since", "feed", "expected"),
    [
        # The previous subscription's queued event 5 arrives before the replay of 3, 4, 5.
        (2, [text(5), text(3), text(4), text(5), text(6)], [(3, "text"), (4, "text"), (5, "text"), (6, "text")]),
        (2, [text(3), text(4), text(5)], [(3, "text"), (4, "text"), (5, "text")]),
        # Already-delivered and older events are dropped.
        (2, [text(1), text(2), text(3), text(3), text(4)], [(3, "text"), (4, "text")]),
        # The runtime's last event releases what is still held, in order.
        (2, [text(6), text(5)], [(5, "text"), (6, "text")]),
        # The old stream's 9, then the runtime's answer to `since` 2: 3..6 are no longer held
        # (`resumed_at` is the last one lost), the replay goes on from 7; nothing waits for a lost
        # event.
        (
            2,
            [text(9), notice(6, type="gap", since=2, resumed_at=6), text(7), text(8), text(9), text(10)],
            [(6, "gap"), (7, "text"), (8, "text"), (9, "text"), (10, "text")],
        ),
        # A `lagged` notice: the events before the held one will not come.
        (2, [text(9), notice(9, type="lagged", missed=5), text(10)], [(9, "lagged"), (9, "text"), (10, "text")]),
    ],
    ids=["old-event-first", "in-order", "duplicates", "held-at-end", "gap", "lagged"],
)
def test_a_stream_from_a_sequence_number_stays_in_order(
    kind: str, since: int, feed: list[dict[str, JsonValue]], expected: list[tuple[int, str]]
) -> None:
    async def main() -> list[tuple[int, str]]:
        transport, _ = scripted(kind, feed, last_seq=0)
        got = await drain(await subscribed(transport, since))
        await transport.aclose()
        return got

    got = asyncio.run(main())
    assert got[:-1] == expected and got[-1][1] == "shutting_down"
