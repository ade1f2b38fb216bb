"""`AsyncClient` and `Client` over HTTP against the real `openagents serve --http`: typed calls,
bearer tokens, and an event stream that resumes with `Last-Event-ID` after its connection is cut,
without losing or repeating an event."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from openagents import AsyncClient, Client, RunnerNotFoundError, UnauthorizedError, UnknownMethodError
from openagents.models import (
    RuntimeEventGap,
    RuntimeEventLagged,
    RuntimeEventText,
    RuntimeState,
    ServerEvent,
)
from openagents.transport import HttpTransport, Reconnect

from .conftest import TERMINAL, HttpServer, Setup


def test_a_turn_over_http(http_server: HttpServer) -> None:
    async def main() -> None:
        async with AsyncClient.http(http_server.url, token_file=http_server.token_file) as client:
            async with client.events() as events:
                submit = asyncio.create_task(client.submit("hello http world"))
                seen = []
                async for ev in events:
                    seen.append(ev)
                    if isinstance(ev.event, TERMINAL):
                        break
            assert (await submit).result == "hello http world"
            assert [e.event.type for e in seen] == ["turn_started", "text", "text", "text", "turn_completed"]
            assert [e.seq for e in seen] == [1, 2, 3, 4, 5]
            with pytest.raises(RunnerNotFoundError):
                await client.submit("x", runner="nope")
            status = await client.status()
            assert status.state is RuntimeState.IDLE and status.counters.completed == 1

    asyncio.run(main())


def test_a_wrong_token_is_a_typed_error(http_server: HttpServer, tmp_path: Path) -> None:
    async def main() -> None:
        async with AsyncClient.http(http_server.url, token="0" * 64) as client:
            with pytest.raises(UnauthorizedError) as info:
                await client.status()
            assert info.value.rpc_code == -32001
            with pytest.raises(UnauthorizedError):
                async with client.events():
                    pass

    asyncio.run(main())


def test_events_replay_from_a_sequence_number(http_server: HttpServer) -> None:
    with Client.http(http_server.url, token_file=http_server.token_file) as client:
        assert client.submit("one two").result == "one two"
        with client.events(since=1) as events:
            seqs = []
            for ev in events:
                seqs.append(ev.seq)
                if isinstance(ev.event, TERMINAL):
                    break
        assert seqs == [2, 3, 4]


def test_the_blocking_client_calls_on_the_callers_thread(http_server: HttpServer) -> None:
    with Client.http(http_server.url, token_file=http_server.token_file) as client:

        def no_hop(coro: Any) -> Any:
            coro.close()
            raise AssertionError("a blocking call over HTTP went through the background loop")

        client._run = no_hop  # type: ignore[method-assign]
        assert client.status().state is RuntimeState.IDLE
        assert client.submit("a b").result == "a b"
        raw = client.call("status")
        counters = raw["counters"] if isinstance(raw, dict) else None
        assert isinstance(counters, dict) and counters["completed"] == 1
        with pytest.raises(UnknownMethodError):
            client.call("no.such.method")
        with pytest.raises(RunnerNotFoundError):
            client.submit("x", runner="nope")
        del client._run  # closing stops the loop (event streams still run there)


class CuttingProxy:
    """A TCP proxy on loopback whose connections can be cut, to drop an event stream."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None
        self.connections = 0

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self.writers += [writer, up_writer]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(Exception):
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def cut(self) -> None:
        for w in self.writers:
            w.transport.abort()
        self.writers.clear()

    async def aclose(self) -> None:
        self.cut()
        if self.server is not None:
            self.server.close()


def test_the_event_stream_resumes_after_a_dropped_connection(slow_http_server: HttpServer) -> None:
    async def main() -> None:
        port = int(slow_http_server.url.rstrip("/").rsplit(":", 1)[1])
        proxy = CuttingProxy(port)
        proxy_port = await proxy.start()
        reconnect = Reconnect(attempts=20, initial=0.01, maximum=0.2)
        watcher = AsyncClient(
            HttpTransport(
                f"http://127.0.0.1:{proxy_port}/", token_file=slow_http_server.token_file, reconnect=reconnect
            )
        )
        driver = AsyncClient.http(slow_http_server.url, token_file=slow_http_server.token_file)
        async with watcher, driver, watcher.events() as events:
            submit = asyncio.create_task(driver.submit("30"))
            seen: list[ServerEvent] = []
            cuts = 0
            async for ev in events:
                assert not isinstance(ev.event, (RuntimeEventLagged, RuntimeEventGap)), ev
                seen.append(ev)
                if isinstance(ev.event, RuntimeEventText) and len(seen) % 5 == 0 and cuts < 4:
                    proxy.cut()  # events keep being published while the stream is down
                    cuts += 1
                if isinstance(ev.event, TERMINAL):
                    break
            assert (await submit).result == "ticked 30"
        await proxy.aclose()
        assert cuts == 4 and proxy.connections >= 5
        seqs = [e.seq for e in seen]
        assert seqs == list(range(1, len(seqs) + 1)), "no event lost or repeated"
        texts = [e.event.text for e in seen if isinstance(e.event, RuntimeEventText)]
        assert texts == [f"tick {n}" for n in range(1, 31)]

    asyncio.run(main())


def test_the_stream_gives_up_when_the_runtime_is_gone(setup: Setup, http_server: HttpServer) -> None:
    async def main() -> None:
        reconnect = Reconnect(attempts=2, initial=0.01, maximum=0.02)
        transport = HttpTransport(http_server.url, token_file=http_server.token_file, reconnect=reconnect)
        async with AsyncClient(transport) as client, client.events() as events:
            http_server.process.kill()
            http_server.process.wait()
            from openagents import TransportError

            with pytest.raises(TransportError, match="did not come back"):
                async for _ in events:
                    pass

    asyncio.run(main())
