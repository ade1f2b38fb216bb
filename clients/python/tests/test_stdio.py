"""`AsyncClient` and `Client` over stdio, against the real `openagents serve --stdio` and real
runners (Rust echo, Python echo, and a slow Python runner)."""

from __future__ import annotations

import asyncio
import os

import pytest
from pydantic import JsonValue

from openagents import (
    AsyncClient,
    BusyError,
    Client,
    InterruptedError,
    InvalidParamsError,
    RunnerNotFoundError,
    TransportError,
    UnknownMethodError,
)
from openagents.models import (
    RuntimeEventShuttingDown,
    RuntimeEventText,
    RuntimeEventTurnFailed,
    RuntimeEventTurnStarted,
    RuntimeState,
    ServerEvent,
)
from openagents.transport import StdioTransport
from openagents.transport.base import _Omit

from .conftest import TERMINAL, Setup


async def turn_events(client: AsyncClient, task: str, **kw: str) -> tuple[list[ServerEvent], str]:
    async with client.events() as events:
        submit = asyncio.create_task(client.submit(task, **kw))
        seen = []
        async for ev in events:
            seen.append(ev)
            if isinstance(ev.event, TERMINAL):
                break
        return seen, (await submit).result


@pytest.mark.parametrize("runner", ["echo", "py-echo"])
def test_a_turn_streams_its_events_in_order(runner: str) -> None:
    async def main() -> None:
        async with AsyncClient.stdio(runner) as client:
            status = await client.status()
            assert status.state is RuntimeState.IDLE and status.last_seq == 0
            seen, result = await turn_events(client, "hello stdio world")
            assert result == "hello stdio world"
            assert isinstance(seen[0].event, RuntimeEventTurnStarted) and seen[0].event.runner == runner
            assert [e.event.text for e in seen if isinstance(e.event, RuntimeEventText)] == ["hello", "stdio", "world"]
            assert [e.seq for e in seen] == list(range(1, len(seen) + 1))
            status = await client.status()
            assert status.counters.completed == 1 and status.last_seq == len(seen)

    asyncio.run(main())


def test_typed_errors() -> None:
    async def main() -> None:
        async with AsyncClient.stdio("echo") as client:
            with pytest.raises(RunnerNotFoundError) as nf:
                await client.submit("x", runner="nope")
            # It says only that: neither the registry's runners nor its path.
            assert nf.value.message == "unknown runner" and nf.value.details is None
            assert nf.value.retryable is False and nf.value.rpc_code == -32005
            # Invalid params are refused here, before anything is sent...
            with pytest.raises(InvalidParamsError) as ip:
                await client.submit("")
            assert ip.value.details is not None and ip.value.details.violations
            assert [(v.pointer, v.keyword) for v in ip.value.details.violations] == [("/task", "minLength")]
            # ...and by the server, when they get there anyway.
            with pytest.raises(InvalidParamsError) as server_side:
                await client.transport.request("submit", {"task": "x", "cwd": "relative"}, 10)
            violations = server_side.value.details.violations if server_side.value.details else None
            assert violations and violations[0].pointer == "/params/cwd"
            with pytest.raises(UnknownMethodError):
                await client.call("no.such.method")

    asyncio.run(main())


def test_busy_then_interrupt() -> None:
    async def main() -> None:
        async with AsyncClient.stdio("py-slow") as client, client.events() as events:
            first = asyncio.create_task(client.submit("forever"))
            async for ev in events:
                if isinstance(ev.event, RuntimeEventText):
                    break
            with pytest.raises(BusyError) as busy:
                await client.submit("1")
            assert busy.value.retryable is True
            assert (await client.interrupt()).interrupted is True
            with pytest.raises(InterruptedError):
                await first
            status = await client.status()
            assert status.counters.interrupted == 1 and status.state is RuntimeState.IDLE

    asyncio.run(main())


class _Recording(StdioTransport):
    """A stdio transport that keeps every request it sends."""

    def __init__(self, runner: str) -> None:
        super().__init__(runner)
        self.sent: list[tuple[str, object]] = []

    async def request(self, method: str, params: JsonValue | _Omit, timeout: float | None) -> JsonValue:
        self.sent.append((method, params))
        return await super().request(method, params, timeout)


@pytest.mark.parametrize("given", [None, "mine-1"], ids=["generated", "given"])
def test_a_cancelled_submit_interrupts_only_its_own_turn(given: str | None) -> None:
    async def main() -> tuple[str, list[tuple[str, object]]]:
        transport = _Recording("py-slow")
        async with AsyncClient(transport) as client, client.events() as events:
            submit = asyncio.create_task(client.submit("forever", assignment=given))
            started = ""
            async for ev in events:
                if isinstance(ev.event, RuntimeEventTurnStarted):
                    started = ev.event.assignment
                if isinstance(ev.event, RuntimeEventText):
                    break
            submit.cancel()
            with pytest.raises(asyncio.CancelledError):
                await submit
            async for ev in events:
                if isinstance(ev.event, TERMINAL):
                    assert isinstance(ev.event, RuntimeEventTurnFailed)
                    assert ev.event.error.code == "interrupted"
                    break
            assert (await client.status()).counters.interrupted == 1
        return started, transport.sent

    started, sent = asyncio.run(main())
    if given is not None:
        assert started == given
    submits = [p for m, p in sent if m == "submit"]
    interrupts = [p for m, p in sent if m == "interrupt"]
    # The submit named its turn, and the interrupt names the same one.
    assert isinstance(submits[0], dict) and submits[0]["assignment"] == started, submits
    assert interrupts == [{"assignment": started}], sent


def test_shutdown_ends_the_event_stream_and_the_process() -> None:
    async def main() -> None:
        transport = StdioTransport("echo")
        client = AsyncClient(transport)
        async with client, client.events() as events:
            assert (await client.shutdown()).shutting_down is True
            kinds = [type(ev.event) async for ev in events]
            assert kinds[-1] is RuntimeEventShuttingDown
        assert transport.pid is not None
        with pytest.raises(ProcessLookupError):
            os.kill(transport.pid, 0)

    asyncio.run(main())


def test_the_context_manager_stops_the_server() -> None:
    async def main() -> None:
        transport = StdioTransport("echo")
        async with AsyncClient(transport) as client:
            await client.status()
            pid = transport.pid
        assert pid is not None
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        with pytest.raises(TransportError):
            await client.status()

    asyncio.run(main())


def test_the_server_is_off_until_the_operator_enables_it(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    off = setup.dir / "off.toml"
    off.write_text("[capabilities.server]\nenabled = false\n")
    monkeypatch.setenv("OPENAGENTS_CONFIG", str(off))

    async def main() -> None:
        async with AsyncClient.stdio("echo") as client:
            with pytest.raises(TransportError, match="the server is off"):
                await client.status()

    asyncio.run(main())


def test_the_binary_is_configurable(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAGENTS_BIN")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(TransportError, match="cannot find the `openagents` binary"):
        AsyncClient.stdio("echo")

    async def main() -> None:
        async with AsyncClient.stdio("echo", binary=setup.binary) as client:
            assert (await client.status()).state is RuntimeState.IDLE

    asyncio.run(main())


def test_the_blocking_client() -> None:
    with Client.stdio("echo") as client:
        assert client.status().state is RuntimeState.IDLE
        with client.events() as events:
            assert client.submit("a b").result == "a b"
            kinds = []
            for ev in events:
                kinds.append(ev.event.type)
                if isinstance(ev.event, TERMINAL):
                    break
        assert kinds == ["turn_started", "text", "text", "turn_completed"]
        with pytest.raises(RunnerNotFoundError):
            client.submit("x", runner="nope")


def test_closing_during_a_turn_stops_the_server_and_its_runner() -> None:
    async def main() -> None:
        transport = StdioTransport("py-slow", close_timeout=0.5)
        client = AsyncClient(transport)
        async with client, client.events() as events:
            submit = asyncio.create_task(client.submit("forever"))
            async for ev in events:
                if isinstance(ev.event, RuntimeEventText):
                    break
            await client.aclose()
            with pytest.raises((TransportError, InterruptedError)):
                await submit
        assert transport.pid is not None
        with pytest.raises(ProcessLookupError):
            os.kill(transport.pid, 0)

    asyncio.run(main())
    # No runner is left behind.
    import subprocess

    left = subprocess.run(["pgrep", "-f", "slow_runner.py"], capture_output=True, text=True).stdout.split()
    assert left == [], f"runner processes left: {left}"
