"""`openagents.rpc` over stdio (a child process, or streams given), and the WebSocket, blocking and
asynchronous, against the scripted server of `rpc_fake.py`: replies matched by id in any order, a
reply for nobody logged and dropped, notifications delivered, error answers as `RpcError`, a
message over the size bound refused (at the bound taken), a connection closed mid-call, server
requests answered by a handler or -32601, timeouts, the bearer token, and the child stopped on
close. The kv example's test (examples/kv/tests/python_client.rs) runs the real server."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import JsonValue, TypeAdapter

from openagents import _rt
from openagents.errors import ProtocolError, TransportError, WebSocketClosed
from openagents.rpc import AsyncRpcClient, Notification, RpcClient, RpcError, Stdio, _Lines

from .rpc_fake import serve_lines, serve_websocket

FAKE = Path(__file__).with_name("rpc_fake.py")
KINDS = ["stdio", "streams", "websocket"]
LIMIT = 200
"""The bound the size tests set (`max_message_bytes`)."""
ENVELOPE = len('{"jsonrpc": "2.0", "id": 1, "result": ""}')
"""The bytes of a `sized` answer besides its result's characters (an id of one digit)."""


def spec(name: str) -> _rt.MethodSpec[Any]:
    """A method of the fake server: params as given, any result."""
    return _rt.MethodSpec(
        name, attr=name, params=None, params_adapter=None, params_required=False, result=TypeAdapter(Any)
    )


ECHO, PAIR, NOTIFY, FAIL, SIZED, HANGUP, NEVER, ASK = map(
    spec, ["echo", "pair", "notify", "fail", "sized", "hangup", "never", "ask"]
)

CLOSED = {
    "stdio": "closed its output and exited with code 0",
    "streams": "the server's streams closed its output",
    "websocket": r"closed \(1000\)",
}
"""What a call says when the server hangs up, by transport."""


BOOM = "'boom'"


def fail_with(code: int) -> Any:
    def handler(params: JsonValue) -> JsonValue:
        if code == -32603:
            raise KeyError("boom")  # str(): 'boom', quoted
        raise RpcError(code, "refused", {"why": params})

    return handler


HANDLERS: dict[str, Callable[[JsonValue], JsonValue]] = {
    "fs/read": lambda params: {"got": params},
    "fs/refuse": fail_with(-32000),
    "fs/boom": fail_with(-32603),
}

# (method the server asks, what the client answers): by a handler, or -32601 without one.
ASKED: list[tuple[str, dict[str, JsonValue]]] = [
    ("fs/read", {"result": {"got": {"q": 1}}}),
    ("fs/refuse", {"error": {"code": -32000, "message": "refused", "data": {"why": {"q": 1}}}}),
    (
        "fs/boom",
        {"error": {"code": -32603, "message": f"Internal error: the client's `fs/boom` handler failed: {BOOM}"}},
    ),
    ("fs/unknown", {"error": {"code": -32601, "message": "Method not found: this client handles no `fs/unknown`"}}),
]


def asked(answer: Any) -> dict[str, JsonValue]:
    """The client's response to the fake's request, without its envelope."""
    assert answer["jsonrpc"] == "2.0" and answer["id"] == "s-1", answer
    return {k: v for k, v in answer.items() if k not in ("jsonrpc", "id")}


# --- the line splitter ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        ([b"abcd\n"], [b"abcd"]),  # at the bound
        ([b"abcde\n"], ["too long"]),  # one byte past
        ([b"ab", b"cd", b"\n"], [b"abcd"]),
        ([b"ab", b"cde"], ["too long"]),  # refused before its newline arrives
        ([b"ok\nabcde\n"], [b"ok", "too long"]),  # the line before it is still taken
        ([b"a\n\nb"], [b"a", b"", b"b"]),  # the end of input ends the last line
    ],
)
def test_lines_are_split_under_the_bound(chunks: list[bytes], expected: list[bytes | str]) -> None:
    lines = _Lines(4, "the test")
    for chunk in chunks:
        lines.feed(chunk)
    got: list[bytes | str] = []
    try:
        while (line := lines.next()) is not None:
            got.append(line)
    except ProtocolError as e:
        assert "longer than 4 bytes" in str(e)
        got.append("too long")
    else:
        if (rest := lines.end()) is not None:
            got.append(rest)
    assert got == expected


# --- blocking -------------------------------------------------------------------------------------


@contextlib.contextmanager
def sync_client(kind: str, **options: Any) -> Iterator[RpcClient]:
    """A blocking client of the fake over `kind`."""
    server = None
    if kind == "stdio":
        client = RpcClient(Stdio([sys.executable, str(FAKE)]), **options)
    elif kind == "streams":
        to_server, from_client = os.pipe()
        to_client, from_server = os.pipe()
        args = (open(to_server, "rb"), open(from_server, "wb"))
        threading.Thread(target=serve_lines, args=args, daemon=True).start()
        client = RpcClient((open(to_client, "rb"), open(from_client, "wb")), **options)
    else:
        server, url = serve_websocket()
        client = RpcClient(url, **options)
    try:
        with client:
            yield client
    finally:
        if server is not None:
            server.shutdown()


@pytest.mark.parametrize("kind", KINDS)
def test_replies_are_matched_by_id_in_any_order(kind: str, caplog: pytest.LogCaptureFixture) -> None:
    with sync_client(kind) as client, concurrent.futures.ThreadPoolExecutor(2) as pool:
        a = pool.submit(client._call, PAIR, {"who": "a"})
        b = pool.submit(client._call, PAIR, {"who": "b"})
        assert (a.result(10), b.result(10)) == ({"who": "a"}, {"who": "b"})
        assert client._call(ECHO, [1, "two"]) == [1, "two"]
    assert "with id 999999, which no call is waiting for" in caplog.text


@pytest.mark.parametrize("kind", KINDS)
def test_notifications_reach_the_callback_which_may_call(kind: str) -> None:
    got: list[Notification] = []
    echoed: list[Any] = []
    done = threading.Event()

    def on_notification(n: Notification) -> None:
        got.append(n)
        echoed.append(client._call(ECHO, n.params))  # a call from the callback thread
        if len(got) == 3:
            done.set()

    with sync_client(kind, on_notification=on_notification) as client:
        assert client._call(NOTIFY, {"count": 3}) == "done"
        assert done.wait(10)
    assert got == [Notification("changed", {"n": i}) for i in range(3)]
    assert echoed == [{"n": i} for i in range(3)]


@pytest.mark.parametrize("kind", KINDS)
def test_an_error_answer_is_an_rpc_error(kind: str) -> None:
    with sync_client(kind) as client, pytest.raises(RpcError) as e:
        client._call(FAIL, None)
    assert (e.value.code, e.value.message, e.value.data) == (-32040, "no entry", {"code": "not_found"})


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("size", "refused"), [(LIMIT, False), (LIMIT + 1, True)])
def test_a_message_over_the_bound_is_refused(kind: str, size: int, refused: bool) -> None:
    with sync_client(kind, max_message_bytes=LIMIT) as client:
        with pytest.raises(ProtocolError, match=f"request is {LIMIT + 40} bytes, longer than max_message_bytes"):
            client._call(ECHO, "x" * (LIMIT + 40 - len('{"jsonrpc":"2.0","id":1,"method":"echo","params":""}')))
        if not refused:
            assert client._call(SIZED, {"bytes": size}) == "x" * (size - ENVELOPE)
            return
        with pytest.raises(ProtocolError, match=f"longer than {LIMIT} bytes"):
            client._call(SIZED, {"bytes": size})
        with pytest.raises(TransportError, match="is closed"):
            client._call(ECHO, 1)


@pytest.mark.parametrize("kind", KINDS)
def test_a_connection_closed_mid_call_fails_the_call(kind: str) -> None:
    with sync_client(kind) as client, concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(client._call, NEVER, None)
        with pytest.raises(TransportError, match=CLOSED[kind]) as e:
            client._call(HANGUP, None)
        with pytest.raises(TransportError):
            waiting.result(10)
        with pytest.raises(TransportError, match="is closed"):
            client._call(ECHO, 1)
    if kind == "websocket":
        assert isinstance(e.value, WebSocketClosed) and e.value.code == 1000


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("method", "answer"), ASKED)
def test_a_server_request_is_answered(kind: str, method: str, answer: dict[str, JsonValue]) -> None:
    with sync_client(kind, handlers=HANDLERS) as client:
        assert asked(client._call(ASK, {"method": method})) == answer


@pytest.mark.parametrize("kind", KINDS)
def test_a_call_times_out_and_the_connection_stays(kind: str) -> None:
    with sync_client(kind, timeout=0.2) as client:
        with pytest.raises(TransportError, match=r"`never` had no answer from .* within 0\.2 s"):
            client._call(NEVER, None)
        assert client._call(ECHO, "still here") == "still here"


def test_the_websocket_sends_the_bearer_token() -> None:
    server, url = serve_websocket(token="s3cret")
    try:
        with RpcClient(url, token="s3cret") as client:
            assert client._call(ECHO, 1) == 1
        with pytest.raises(TransportError, match="HTTP 401"):
            RpcClient(url)
    finally:
        server.shutdown()


def test_close_stops_a_child_that_ignores_the_end_of_its_input(tmp_path: Path) -> None:
    ready = tmp_path / "pid"
    script = f"import os, time; open({str(ready)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    client = RpcClient(Stdio([sys.executable, "-c", script], close_timeout=0.2))
    deadline = time.monotonic() + 10
    while not ready.exists() or not ready.read_text():
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.01)
    started = time.monotonic()
    client.close()
    assert time.monotonic() - started < 3
    with pytest.raises(ProcessLookupError):
        os.kill(int(ready.read_text()), 0)


@pytest.mark.parametrize(
    ("target", "token", "error"),
    [
        ("ftp://example.org/rpc", None, "not an http"),
        (Stdio(["true"]), "t", "token goes in the `Authorization` header"),
        ("nothing", None, "not an http"),
    ],
)
def test_a_target_that_is_not_one_is_refused(target: Any, token: str | None, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        RpcClient(target, token=token)


# --- asynchronous ---------------------------------------------------------------------------------


def serve_socket(sock: socket.socket) -> None:
    with sock:
        serve_lines(sock.makefile("rb"), sock.makefile("wb"))


@contextlib.asynccontextmanager
async def async_client(kind: str, **options: Any) -> AsyncIterator[AsyncRpcClient]:
    """An asynchronous client of the fake over `kind`, connected."""
    server = None
    if kind == "stdio":
        client = AsyncRpcClient(Stdio([sys.executable, str(FAKE)]), **options)
    elif kind == "streams":
        mine, theirs = socket.socketpair()
        threading.Thread(target=serve_socket, args=(theirs,), daemon=True).start()
        client = AsyncRpcClient(await asyncio.open_connection(sock=mine), **options)
    else:
        server, url = serve_websocket()
        client = AsyncRpcClient(url, **options)
    try:
        async with client:
            yield client
    finally:
        if server is not None:
            server.shutdown()


@pytest.mark.parametrize("kind", KINDS)
def test_async_replies_are_matched_by_id_in_any_order(kind: str, caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        async with async_client(kind) as client:
            a, b = await asyncio.gather(client._call(PAIR, {"who": "a"}), client._call(PAIR, {"who": "b"}))
            assert (a, b) == ({"who": "a"}, {"who": "b"})

    asyncio.run(main())
    assert "with id 999999, which no call is waiting for" in caplog.text


@pytest.mark.parametrize("kind", KINDS)
def test_async_notifications_reach_the_iterator_and_the_callback(kind: str) -> None:
    seen: list[Notification] = []

    async def main() -> list[Notification]:
        async with async_client(kind, on_notification=seen.append) as client:
            notes = client.notifications()
            assert await client._call(NOTIFY, {"count": 3}) == "done"
            got = [await asyncio.wait_for(notes.__anext__(), 10) for _ in range(3)]
        assert [n async for n in notes] == []  # it ends with the connection
        return got

    expected = [Notification("changed", {"n": i}) for i in range(3)]
    assert asyncio.run(main()) == expected
    assert seen == expected


@pytest.mark.parametrize("kind", KINDS)
def test_async_error_answers_and_server_requests(kind: str) -> None:
    async def read_async(params: JsonValue) -> JsonValue:
        await asyncio.sleep(0)
        return {"got": params}

    async def main() -> None:
        async with async_client(kind, handlers={**HANDLERS, "fs/read": read_async}) as client:
            with pytest.raises(RpcError) as e:
                await client._call(FAIL, None)
            assert (e.value.code, e.value.message, e.value.data) == (-32040, "no entry", {"code": "not_found"})
            for method, answer in ASKED:
                assert asked(await client._call(ASK, {"method": method})) == answer

    asyncio.run(main())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("size", "refused"), [(LIMIT, False), (LIMIT + 1, True)])
def test_async_a_message_over_the_bound_is_refused(kind: str, size: int, refused: bool) -> None:
    async def main() -> None:
        async with async_client(kind, max_message_bytes=LIMIT) as client:
            if not refused:
                assert await client._call(SIZED, {"bytes": size}) == "x" * (size - ENVELOPE)
                return
            with pytest.raises(ProtocolError, match=f"longer than {LIMIT} bytes"):
                await client._call(SIZED, {"bytes": size})
            with pytest.raises(TransportError, match="is closed"):
                await client._call(ECHO, 1)

    asyncio.run(main())


@pytest.mark.parametrize("kind", KINDS)
def test_async_a_connection_closed_mid_call_fails_the_call(kind: str) -> None:
    async def main() -> None:
        async with async_client(kind) as client:
            notes = client.notifications()
            waiting = asyncio.create_task(client._call(NEVER, None))
            await asyncio.sleep(0)
            with pytest.raises(TransportError, match=CLOSED[kind]):
                await client._call(HANGUP, None)
            with pytest.raises(TransportError):
                await waiting
            assert [n async for n in notes] == []

    asyncio.run(main())


@pytest.mark.parametrize("kind", KINDS)
def test_async_a_call_times_out_and_the_connection_stays(kind: str) -> None:
    async def main() -> None:
        async with async_client(kind, timeout=0.2) as client:
            with pytest.raises(TransportError, match=r"`never` had no answer from .* within 0\.2 s"):
                await client._call(NEVER, None)
            assert await client._call(ECHO, "still here") == "still here"

    asyncio.run(main())


def test_async_close_stops_the_child_and_fails_calls() -> None:
    async def main() -> None:
        client = AsyncRpcClient(Stdio([sys.executable, str(FAKE)]))
        waiting = asyncio.create_task(client._call(NEVER, None))
        assert await client._call(ECHO, 1) == 1
        await client.aclose()
        with pytest.raises(TransportError, match="was closed"):
            await waiting
        with pytest.raises(TransportError, match="closed"):
            await client._call(ECHO, 1)

    asyncio.run(main())


def test_a_connection_the_server_closes_says_so_with_a_reason() -> None:
    # A server that accepts and closes at once (as one past its connection caps did before it
    # answered 503): "failed", with the error's kind when httpx gives no text; a port nothing
    # listens on: "cannot reach".
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]

        def close_each() -> None:
            with contextlib.suppress(OSError):
                while True:
                    conn, _ = listener.accept()
                    conn.close()

        threading.Thread(target=close_each, daemon=True).start()
        with RpcClient(f"http://127.0.0.1:{port}/rpc", timeout=5) as client, pytest.raises(TransportError) as caught:
            client._call(ECHO, [1])
        message = str(caught.value)
        assert "failed" in message and not message.rstrip().endswith(":"), message
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with RpcClient(f"http://127.0.0.1:{port}/rpc", timeout=5) as client, pytest.raises(TransportError) as caught:
        client._call(ECHO, [1])
    assert str(caught.value).startswith(f"cannot reach http://127.0.0.1:{port}/rpc: "), str(caught.value)
