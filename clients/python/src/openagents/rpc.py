"""Clients of any JSON-RPC 2.0 service, for the methods `openagents-codegen python` generates from
that service's schema: the generated `Methods` (blocking) and `AsyncMethods` (asynchronous) declare
one typed call per method over an abstract `_call`, and `RpcClient` and `AsyncRpcClient` supply it
over HTTP `POST`, a child process's stdio (one JSON message per line) or a WebSocket (one message
per text frame), the three transports `openagents-rpc` serves. Nothing here knows a method of
ours::

    from openagents.rpc import RpcClient, Stdio
    from kv_client import methods

    class Kv(RpcClient, methods.Methods):
        pass

    with Kv("http://127.0.0.1:8080/rpc") as kv:            # or "ws://127.0.0.1:8080/rpc"
        entry = kv.get("notes/a")
    with Kv(Stdio(["kv-server", "--stdio"]), on_notification=print) as kv:
        kv.watch("notes/")

Params are checked against the schema before they are sent (an invalid one raises pydantic's
`ValidationError`), results are validated into the generated models (an answer that breaks the
schema raises `ProtocolError`), and an error answer raises `RpcError` with the service's code,
message and data.

Over stdio and the WebSocket one connection carries every call: each request has a fresh id and
its reply is matched by id (a reply no call waits for is logged on the `openagents.rpc` logger and
dropped), server notifications go to `on_notification` (and `AsyncRpcClient.notifications()`), a
server request is answered by the handler registered for its method in `handlers`, else with
-32601. A line or frame longer than `max_message_bytes` fails the connection instead of being held,
and when the connection ends every call waiting on it raises `TransportError` saying why.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import itertools
import json
import logging
import os
import queue
import shlex
import subprocess
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import IO, Any, Final, Protocol, TypeVar, Union
from urllib.parse import urlsplit

import httpx
from pydantic import JsonValue, ValidationError
from websockets.asyncio.client import ClientConnection as _AsyncWs
from websockets.asyncio.client import connect as _connect_async
from websockets.exceptions import ConnectionClosed, WebSocketException
from websockets.sync.client import ClientConnection as _SyncWs
from websockets.sync.client import connect as _connect_sync

from . import _rt
from .errors import ProtocolError, TransportError, WebSocketClosed, http_failure

__all__ = [
    "MAX_MESSAGE_BYTES",
    "NOTIFICATION_QUEUE",
    "AsyncRpcClient",
    "Notification",
    "RpcClient",
    "RpcError",
    "Stdio",
]

_T = TypeVar("_T")
_Self = TypeVar("_Self")
_AsyncSelf = TypeVar("_AsyncSelf", bound="AsyncRpcClient")

_log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
"""The longest line (stdio) or frame (WebSocket) taken from the server, and sent to it, by default:
`openagents-rpc`'s own default frame bound (`Limits::max_frame_bytes`), so every reply such a
server may send fits, and a longer one is refused without being held in memory."""

NOTIFICATION_QUEUE: Final = 1024
"""How many notifications may wait unread, so that a slow reader costs bounded memory: the
blocking client's callback thread takes this many (with the server's requests) before its reader
waits for it, and an `AsyncRpcClient.notifications()` iterator keeps this many, dropping the
oldest with a warning."""

METHOD_NOT_FOUND: Final = -32601
"""JSON-RPC 2.0's code for a method the receiver does not have: the answer to a server request
no handler is registered for."""

INTERNAL_ERROR: Final = -32603
"""JSON-RPC 2.0's code for a failure of the receiver: the answer when a handler raises something
other than `RpcError`."""

_READ_CHUNK: Final = 64 * 1024
"""How much one read of a stdio stream asks for."""


class RpcError(_rt.TypedError):
    """A JSON-RPC error answer: the service's `code`, `message` and `data` (None when absent).

    A server-request handler raises it to answer that error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message
        self.data = data


@dataclass(frozen=True)
class Notification:
    """A notification the server sent: its method and params (None when absent)."""

    method: str
    params: JsonValue = None


@dataclass(frozen=True)
class Stdio:
    """A server to start as a child process and talk to over its stdin and stdout, one JSON
    message per line: `command` is its argv (`["kv-server", "--stdio"]`), run without a shell.
    `stderr` is inherited unless given (`subprocess.DEVNULL`, a file). Closing the client closes
    the child's stdin, waits `close_timeout` seconds for it to exit, then terminates it (and kills
    it two seconds later)."""

    command: Sequence[str]
    env: Mapping[str, str] | None = None
    cwd: str | os.PathLike[str] | None = None
    stderr: int | IO[bytes] | None = None
    close_timeout: float = 2.0

    def __post_init__(self) -> None:
        if isinstance(self.command, str) or not self.command:
            raise ValueError("`command` is the argv of the server, a non-empty list such as ['kv-server', '--stdio']")
        object.__setattr__(self, "command", tuple(self.command))

    @property
    def where(self) -> str:
        """The command line, for messages."""
        return f"`{shlex.join(self.command)}`"

    def _spawn_options(self) -> dict[str, Any]:
        """What `subprocess.Popen` and `asyncio.create_subprocess_exec` take besides the argv."""
        env = dict(self.env) if self.env is not None else None
        return {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": self.stderr, "env": env, "cwd": self.cwd}

    def _ended(self, code: int | None) -> TransportError:
        """The error of calls left waiting when the child closed its output (exit `code` if known)."""
        exited = f" and exited with code {code}" if code is not None else ""
        return TransportError(f"{self.where} closed its output{exited}")


def wire_params(spec: _rt.MethodSpec[Any], params: object) -> tuple[bool, JsonValue]:
    """Whether the request carries params, and the params as they go on the wire, checked
    against the schema first (pydantic's `ValidationError` when they break it)."""
    if spec.params is not None:
        if isinstance(params, _rt.Model):
            return True, params.to_wire()
        if params is not None and not isinstance(params, dict):
            raise TypeError(f"`{spec.name}` params are an object")
        values = {} if params is None else {k: v for k, v in params.items() if v is not None}
        if not values and not spec.params_required:
            return False, None
        return True, spec.params.from_wire(values, strict=True).to_wire()
    if spec.params_adapter is not None:
        if params is None and not spec.params_required:
            return False, None
        with _rt.unlabelled():
            spec.params_adapter.validate_python(params, context=_rt.STRICT)
        return True, params  # type: ignore[return-value]
    return params is not None, params  # type: ignore[return-value]


def _dumps(doc: JsonValue) -> bytes:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _body(request_id: int, spec: _rt.MethodSpec[Any], params: object) -> bytes:
    has_params, wire = wire_params(spec, params)
    doc: dict[str, JsonValue] = {"jsonrpc": "2.0", "id": request_id, "method": spec.name}
    if has_params:
        doc["params"] = wire
    return _dumps(doc)


def _result(spec: _rt.MethodSpec[_T], answer: object) -> _T:
    """The result of a decoded JSON-RPC response, validated; `RpcError` for an error answer."""
    if not isinstance(answer, dict):
        raise ProtocolError(f"the answer to `{spec.name}` is not a JSON-RPC response object")
    if "error" in answer:
        e = answer["error"]
        if not isinstance(e, dict) or not isinstance(e.get("code"), int) or not isinstance(e.get("message"), str):
            raise ProtocolError(f"the error answering `{spec.name}` is not a JSON-RPC error object")
        raise RpcError(e["code"], e["message"], e.get("data"))
    if "result" not in answer:
        raise ProtocolError(f"the answer to `{spec.name}` has neither `result` nor `error`")
    try:
        with _rt.unlabelled():
            return spec.result.validate_python(answer["result"], context=_rt.STRICT)
    except ValidationError as e:
        raise ProtocolError(f"the `{spec.name}` result is not what the schema says: {e}") from None


def _http_result(spec: _rt.MethodSpec[_T], response: httpx.Response) -> _T:
    try:
        answer = json.loads(response.content)
    except ValueError:
        raise ProtocolError(
            f"`{spec.name}` was answered HTTP {response.status_code} with a body that is not JSON"
        ) from None
    return _result(spec, answer)


def _headers(token: str | None) -> dict[str, str]:
    headers = {"content-type": "application/json", "accept": "application/json"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return headers


def _ws_headers(token: str | None) -> dict[str, str]:
    return {} if token is None else {"Authorization": f"Bearer {token}"}


# --- the framing and decoding core both clients share ---------------------------------------------


class _Waiter(Protocol):
    """What a call waits on: `concurrent.futures.Future` (blocking) or `asyncio.Future`."""

    def done(self) -> bool: ...

    def set_result(self, result: Any, /) -> None: ...

    def set_exception(self, exception: BaseException, /) -> None: ...


@dataclass(frozen=True)
class _ServerRequest:
    """A request the server sent the client: answered by a handler or with -32601."""

    id: JsonValue
    method: str
    params: JsonValue


class _Lines:
    """Splits a byte stream into lines of at most `max_bytes` (the newline not counted), holding no
    more than that: a longer line is a `ProtocolError`, raised once the lines before it are taken."""

    def __init__(self, max_bytes: int, where: str) -> None:
        self._max = max_bytes
        self._where = where
        self._buf = bytearray()
        self._ready: deque[bytes] = deque()
        self._too_long = False

    def feed(self, chunk: bytes) -> None:
        if self._too_long:
            return
        start = 0
        while (i := chunk.find(b"\n", start)) >= 0:
            if len(self._buf) + i - start > self._max:
                self._refuse()
                return
            self._buf += chunk[start:i]
            self._ready.append(bytes(self._buf))
            self._buf.clear()
            start = i + 1
        if len(self._buf) + len(chunk) - start > self._max:
            self._refuse()
            return
        self._buf += chunk[start:]

    def _refuse(self) -> None:
        self._too_long = True
        self._buf = bytearray()

    def next(self) -> bytes | None:
        """The next whole line, None when none is ready; `ProtocolError` once the lines before an
        overlong one are taken."""
        if self._ready:
            return self._ready.popleft()
        if self._too_long:
            raise ProtocolError(
                f"{self._where} sent a line longer than {self._max} bytes (max_message_bytes); the connection is closed"
            )
        return None

    def end(self) -> bytes | None:
        """What is left when the stream ends without a final newline."""
        rest, self._buf = bytes(self._buf), bytearray()
        return rest if rest.strip() else None


class _Session:
    """One connection's protocol state, without I/O: the next request id, the calls waiting for
    their reply, and what each received message is."""

    def __init__(self, where: str, max_bytes: int) -> None:
        self.where = where
        self.max_bytes = max_bytes
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[str, _Waiter]] = {}
        self.closed: TransportError | None = None

    def request(self, spec: _rt.MethodSpec[Any], params: object, waiter: _Waiter) -> tuple[int, bytes]:
        """A new request's id and message (its params checked first), its waiter registered."""
        request_id = next(self._ids)
        body = _body(request_id, spec, params)
        if len(body) > self.max_bytes:
            raise ProtocolError(
                f"the `{spec.name}` request is {len(body)} bytes, longer than max_message_bytes ({self.max_bytes})"
            )
        with self._lock:
            if self.closed is not None:
                raise TransportError(f"the connection to {self.where} is closed: {self.closed}") from self.closed
            self._pending[request_id] = (spec.name, waiter)
        return request_id, body

    def forget(self, request_id: int) -> None:
        """A call that stopped waiting (answered, timed out, cancelled)."""
        with self._lock:
            self._pending.pop(request_id, None)

    def fail(self, error: TransportError) -> None:
        """The connection ended: every waiting call raises `error`, and so does every later one."""
        with self._lock:
            if self.closed is not None:
                return
            self.closed = error
            waiting = list(self._pending.values())
            self._pending.clear()
        for _, waiter in waiting:
            if not waiter.done():
                waiter.set_exception(error)

    def receive(self, raw: bytes | str) -> list[Notification | _ServerRequest]:
        """Takes one message: a reply goes to its waiting call; the notifications and server
        requests it holds are returned. What cannot be matched is logged and dropped."""
        if not raw.strip():
            return []
        try:
            doc = json.loads(raw)
        except ValueError:
            _log.warning("ignoring a message from %s that is not JSON: %.200r", self.where, raw)
            return []
        out: list[Notification | _ServerRequest] = []
        for d in doc if isinstance(doc, list) else [doc]:  # a batch of replies, as JSON-RPC allows
            if not isinstance(d, dict):
                _log.warning("ignoring a message from %s that is not a JSON-RPC object: %.200r", self.where, d)
                continue
            method = d.get("method")
            if isinstance(method, str):
                params = d.get("params")
                out.append(_ServerRequest(d["id"], method, params) if "id" in d else Notification(method, params))
                continue
            rid = d.get("id")
            entry = None
            if isinstance(rid, int) and not isinstance(rid, bool):
                with self._lock:
                    entry = self._pending.pop(rid, None)
            if entry is None:
                _log.warning(
                    "ignoring a reply from %s with id %r, which no call is waiting for: %.200s", self.where, rid, d
                )
                continue
            if not entry[1].done():
                entry[1].set_result(d)
        return out

    @staticmethod
    def answer(request: _ServerRequest, result: JsonValue = None, error: RpcError | None = None) -> bytes:
        doc: dict[str, JsonValue] = {"jsonrpc": "2.0", "id": request.id}
        if error is None:
            doc["result"] = result
        else:
            e: dict[str, JsonValue] = {"code": error.code, "message": error.message}
            if error.data is not None:
                e["data"] = error.data
            doc["error"] = e
        return _dumps(doc)

    @staticmethod
    def not_found(request: _ServerRequest) -> bytes:
        return _Session.answer(
            request, error=RpcError(METHOD_NOT_FOUND, f"Method not found: this client handles no `{request.method}`")
        )


def _handler_failed(request: _ServerRequest, e: Exception) -> RpcError:
    _log.exception("the handler of the server's `%s` request failed", request.method)
    return RpcError(INTERNAL_ERROR, f"Internal error: the client's `{request.method}` handler failed: {e}")


def _ws_closed(where: str, e: ConnectionClosed, max_bytes: int) -> TransportError:
    if e.sent is not None and e.sent.code == 1009 and not e.rcvd_then_sent:
        return ProtocolError(
            f"{where} sent a frame longer than {max_bytes} bytes (max_message_bytes); the connection is closed"
        )
    close = e.rcvd or e.sent
    code, reason = (close.code, close.reason) if close is not None else (None, "")
    said = f" ({code}{' ' + reason if reason else ''})" if code is not None else " without a close frame"
    return WebSocketClosed(f"the WebSocket {where} closed{said}", code, reason)


def _target(target: object, token: str | None) -> str:
    """`http`, `ws` or `stdio`: how `target` is reached."""
    if isinstance(target, str):
        scheme = urlsplit(target).scheme
        if scheme in ("http", "https"):
            return "http"
        if scheme in ("ws", "wss"):
            return "ws"
        raise ValueError(f"`{target}` is not an http(s):// or ws(s):// URL")
    if token is not None:
        raise ValueError("a token goes in the `Authorization` header: over HTTP and the WebSocket only")
    if isinstance(target, Stdio) or (isinstance(target, tuple) and len(target) == 2):
        return "stdio"
    raise TypeError("the target is an http(s):// or ws(s):// URL, a Stdio, or a (reader, writer) pair of streams")


# --- blocking ------------------------------------------------------------------------------------

SyncHandler = Callable[[JsonValue], JsonValue]
"""A handler of one server request method for `RpcClient`: its params to its result (raise
`RpcError` to answer an error). It runs on the client's callback thread."""


class _SyncChannel(Protocol):
    where: str

    def send(self, message: bytes) -> None: ...

    def recv(self) -> bytes | str:
        """The next message; `TransportError` saying why when there is none any more."""
        ...

    def close(self) -> None: ...


class _SyncLines:
    """JSON lines over a readable and a writable binary stream."""

    def __init__(self, reader: IO[bytes], writer: IO[bytes], max_bytes: int, where: str) -> None:
        self.where = where
        self._reader = reader
        self._read: Callable[[int], bytes] = getattr(reader, "read1", reader.read)
        self._writer = writer
        self._lines = _Lines(max_bytes, where)
        self._write_lock = threading.Lock()

    def send(self, message: bytes) -> None:
        try:
            with self._write_lock:
                self._writer.write(message + b"\n")
                self._writer.flush()
        except (OSError, ValueError) as e:
            raise TransportError(f"cannot write to {self.where}: {e}") from e

    def recv(self) -> bytes:
        try:
            while True:
                line = self._lines.next()
                if line is not None:
                    return line
                try:
                    chunk = self._read(_READ_CHUNK)
                except (OSError, ValueError) as e:
                    raise TransportError(f"cannot read from {self.where}: {e}") from e
                if not chunk:
                    last = self._lines.end()
                    if last is not None:
                        return last
                    raise self._ended()
                self._lines.feed(chunk)
        except TransportError:
            with contextlib.suppress(OSError, ValueError):
                self._reader.close()  # on the reader thread, the only one reading it: nothing more is read
            raise

    def _ended(self) -> TransportError:
        return TransportError(f"{self.where} closed its output")

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._writer.close()


class _SyncProcess(_SyncLines):
    def __init__(self, stdio: Stdio, max_bytes: int) -> None:
        try:
            proc = subprocess.Popen(list(stdio.command), **stdio._spawn_options())
        except OSError as e:
            raise TransportError(f"cannot start {stdio.where}: {e}") from e
        assert proc.stdin is not None and proc.stdout is not None
        super().__init__(proc.stdout, proc.stdin, max_bytes, stdio.where)
        self._proc = proc
        self._stdio = stdio
        self._close_timeout = stdio.close_timeout

    def _ended(self) -> TransportError:
        try:
            code: int | None = self._proc.wait(1.0)
        except subprocess.TimeoutExpired:
            code = None
        return self._stdio._ended(code)

    def close(self) -> None:
        super().close()  # the end of its input: a server answers what is in flight and exits
        try:
            self._proc.wait(self._close_timeout)
        except subprocess.TimeoutExpired:
            self._proc.terminate()
            try:
                self._proc.wait(2.0)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


class _SyncWebSocket:
    def __init__(self, url: str, token: str | None, max_bytes: int, timeout: float | None) -> None:
        self.where = url
        self._max = max_bytes
        try:
            self._ws: _SyncWs = _connect_sync(
                url, additional_headers=_ws_headers(token), max_size=max_bytes, open_timeout=timeout
            )
        except (OSError, TimeoutError, WebSocketException) as e:
            raise TransportError(f"cannot open the WebSocket {url}: {e}") from e

    def send(self, message: bytes) -> None:
        try:
            self._ws.send(message.decode("utf-8"))
        except ConnectionClosed as e:
            raise _ws_closed(self.where, e, self._max) from e

    def recv(self) -> bytes | str:
        try:
            return self._ws.recv()
        except ConnectionClosed as e:
            raise _ws_closed(self.where, e, self._max) from e

    def close(self) -> None:
        self._ws.close()


class _Worker:
    """The thread that runs the blocking client's callbacks and handlers, in order, so that they
    may make calls of their own (the reader thread has to be free to read the replies)."""

    def __init__(self) -> None:
        self._queue: queue.Queue[Callable[[], object] | None] = queue.Queue(NOTIFICATION_QUEUE)
        self._thread = threading.Thread(target=self._run, name="openagents-rpc-callbacks", daemon=True)
        self._thread.start()

    def put(self, job: Callable[[], object]) -> None:
        self._queue.put(job)

    def stop(self) -> None:
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(None)

    def _run(self) -> None:
        while (job := self._queue.get()) is not None:
            try:
                job()
            except Exception:
                _log.exception("a notification callback failed")


class _SyncLink:
    """A blocking connection: calls from any thread, one reader thread, callbacks on a worker."""

    def __init__(
        self,
        channel: _SyncChannel,
        max_bytes: int,
        on_notification: Callable[[Notification], object] | None,
        handlers: Mapping[str, SyncHandler],
    ) -> None:
        self._channel = channel
        self._session = _Session(channel.where, max_bytes)
        self._on_notification = on_notification
        self._handlers = dict(handlers)
        self._worker: _Worker | None = None
        self._closing = False
        self._reader = threading.Thread(target=self._read, name="openagents-rpc-reader", daemon=True)
        self._reader.start()

    def exchange(self, spec: _rt.MethodSpec[Any], params: object, timeout: float | None) -> object:
        waiter: concurrent.futures.Future[object] = concurrent.futures.Future()
        request_id, body = self._session.request(spec, params, waiter)
        try:
            self._channel.send(body)
            return waiter.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TransportError(f"`{spec.name}` had no answer from {self._channel.where} within {timeout} s") from None
        finally:
            self._session.forget(request_id)

    def _read(self) -> None:
        try:
            while True:
                for item in self._session.receive(self._channel.recv()):
                    self._dispatch(item)
        except TransportError as e:
            self._session.fail(e)
        except Exception as e:
            self._session.fail(TransportError(f"reading from {self._channel.where} failed: {e!r}"))
        finally:
            if self._worker is not None:
                self._worker.stop()

    def _dispatch(self, item: Notification | _ServerRequest) -> None:
        if isinstance(item, Notification):
            callback = self._on_notification
            if callback is None:
                _log.debug("no on_notification: dropping `%s` from %s", item.method, self._channel.where)
                return
            self._work(lambda: callback(item))
            return
        handler = self._handlers.get(item.method)
        if handler is None:
            self._send_quietly(_Session.not_found(item))
        else:
            self._work(lambda: self._serve(item, handler))

    def _work(self, job: Callable[[], object]) -> None:
        if self._worker is None:
            self._worker = _Worker()
        self._worker.put(job)

    def _serve(self, request: _ServerRequest, handler: SyncHandler) -> None:
        try:
            answer = _Session.answer(request, handler(request.params))
        except RpcError as e:
            answer = _Session.answer(request, error=e)
        except Exception as e:
            answer = _Session.answer(request, error=_handler_failed(request, e))
        self._send_quietly(answer)

    def _send_quietly(self, message: bytes) -> None:
        try:
            self._channel.send(message)
        except TransportError as e:
            _log.warning("cannot answer %s: %s", self._channel.where, e)

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._session.fail(TransportError(f"the client of {self._channel.where} was closed"))
        self._channel.close()
        if threading.current_thread() is not self._reader:
            self._reader.join(5.0)


class RpcClient:
    """A blocking JSON-RPC 2.0 client: mix it in before a generated `Methods`
    (`class Kv(RpcClient, methods.Methods)`).

    `target` is an `http://` or `https://` URL (each call a `POST`), a `ws://` or `wss://` URL (one
    WebSocket), a `Stdio` (a child process started now), or a `(reader, writer)` pair of binary
    streams already open to a server (its output and its input; closing the client closes
    `writer`, and `reader` once the server ends it). `token` is sent as `Authorization: Bearer`
    (HTTP and the WebSocket). `timeout` bounds each call (and the WebSocket handshake) in seconds;
    None waits for ever.

    Over stdio and the WebSocket, `on_notification` is called with each `Notification` the server
    sends, and `handlers` answers the server's requests by method (its params to its result; raise
    `RpcError` for an error answer), both on one callback thread, in the order they arrived, so they
    may make calls of their own. Without a handler a server request is answered -32601. A message
    longer than `max_message_bytes` either way is an error."""

    def __init__(
        self,
        target: str | Stdio | tuple[IO[bytes], IO[bytes]],
        *,
        token: str | None = None,
        timeout: float | None = 30.0,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        on_notification: Callable[[Notification], object] | None = None,
        handlers: Mapping[str, SyncHandler] | None = None,
    ) -> None:
        kind = _target(target, token)
        self.url = target if isinstance(target, str) else None
        self._timeout = timeout
        self._http: httpx.Client | None = None
        self._link: _SyncLink | None = None
        self._ids = itertools.count(1)
        if kind == "http":
            self._http = httpx.Client(headers=_headers(token), timeout=timeout)
            return
        channel: _SyncChannel
        if isinstance(target, str):
            channel = _SyncWebSocket(target, token, max_message_bytes, timeout)
        elif isinstance(target, Stdio):
            channel = _SyncProcess(target, max_message_bytes)
        else:
            channel = _SyncLines(target[0], target[1], max_message_bytes, "the server's streams")
        self._link = _SyncLink(channel, max_message_bytes, on_notification, handlers or {})

    def _call(self, spec: _rt.MethodSpec[_T], params: object) -> _T:
        if self._link is not None:
            return _result(spec, self._link.exchange(spec, params, self._timeout))
        assert self._http is not None and self.url is not None
        body = _body(next(self._ids), spec, params)
        try:
            response = self._http.post(self.url, content=body)
        except httpx.TransportError as e:
            raise http_failure(str(self.url), e) from e
        return _http_result(spec, response)

    def close(self) -> None:
        """Closes the connection (a `Stdio` child is stopped): calls still waiting raise
        `TransportError`."""
        if self._link is not None:
            self._link.close()
        if self._http is not None:
            self._http.close()

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


# --- asynchronous --------------------------------------------------------------------------------

AsyncHandler = Callable[[JsonValue], Union[JsonValue, Awaitable[JsonValue]]]
"""A handler of one server request method for `AsyncRpcClient`: its params to its result, a plain
function or a coroutine function (raise `RpcError` to answer an error). Each runs in a task."""


class _AsyncChannel(Protocol):
    where: str

    async def send(self, message: bytes) -> None: ...

    async def recv(self) -> bytes | str:
        """The next message; `TransportError` saying why when there is none any more."""
        ...

    async def close(self) -> None: ...


class _AsyncLines:
    """JSON lines over an asyncio stream pair."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_bytes: int, where: str) -> None:
        self.where = where
        self._reader = reader
        self._writer = writer
        self._lines = _Lines(max_bytes, where)
        self._write_lock = asyncio.Lock()

    async def send(self, message: bytes) -> None:
        try:
            async with self._write_lock:
                self._writer.write(message + b"\n")
                await self._writer.drain()
        except (OSError, RuntimeError) as e:
            raise TransportError(f"cannot write to {self.where}: {e}") from e

    async def recv(self) -> bytes:
        while True:
            line = self._lines.next()
            if line is not None:
                return line
            try:
                chunk = await self._reader.read(_READ_CHUNK)
            except OSError as e:
                raise TransportError(f"cannot read from {self.where}: {e}") from e
            if not chunk:
                last = self._lines.end()
                if last is not None:
                    return last
                raise await self._ended()
            self._lines.feed(chunk)

    async def _ended(self) -> TransportError:
        return TransportError(f"{self.where} closed its output")

    async def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError):
            self._writer.close()
        with contextlib.suppress(asyncio.TimeoutError, OSError, RuntimeError):
            await asyncio.wait_for(self._writer.wait_closed(), 2.0)


class _AsyncProcess(_AsyncLines):
    def __init__(self, proc: asyncio.subprocess.Process, stdio: Stdio, max_bytes: int) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        super().__init__(proc.stdout, proc.stdin, max_bytes, stdio.where)
        self._proc = proc
        self._stdio = stdio
        self._close_timeout = stdio.close_timeout

    @classmethod
    async def start(cls, stdio: Stdio, max_bytes: int) -> _AsyncProcess:
        try:
            proc = await asyncio.create_subprocess_exec(*stdio.command, **stdio._spawn_options())
        except OSError as e:
            raise TransportError(f"cannot start {stdio.where}: {e}") from e
        return cls(proc, stdio, max_bytes)

    async def _ended(self) -> TransportError:
        try:
            code: int | None = await asyncio.wait_for(self._proc.wait(), 1.0)
        except asyncio.TimeoutError:
            code = None
        return self._stdio._ended(code)

    async def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError):
            self._writer.close()  # the end of its input: a server answers what is in flight and exits
        try:
            await asyncio.wait_for(self._proc.wait(), self._close_timeout)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self._proc.terminate()
            try:
                await asyncio.wait_for(self._proc.wait(), 2.0)
            except asyncio.TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self._proc.kill()
                await self._proc.wait()


class _AsyncWebSocket:
    def __init__(self, ws: _AsyncWs, url: str, max_bytes: int) -> None:
        self.where = url
        self._ws = ws
        self._max = max_bytes

    @classmethod
    async def open(cls, url: str, token: str | None, max_bytes: int, timeout: float | None) -> _AsyncWebSocket:
        try:
            ws = await _connect_async(
                url, additional_headers=_ws_headers(token), max_size=max_bytes, open_timeout=timeout
            )
        except (OSError, asyncio.TimeoutError, WebSocketException) as e:
            raise TransportError(f"cannot open the WebSocket {url}: {e}") from e
        return cls(ws, url, max_bytes)

    async def send(self, message: bytes) -> None:
        try:
            await self._ws.send(message.decode("utf-8"))
        except ConnectionClosed as e:
            raise _ws_closed(self.where, e, self._max) from e

    async def recv(self) -> bytes | str:
        try:
            return await self._ws.recv()
        except ConnectionClosed as e:
            raise _ws_closed(self.where, e, self._max) from e

    async def close(self) -> None:
        await self._ws.close()


class _NotificationStream:
    """One `AsyncRpcClient.notifications()` iterator: a bounded queue that ends with the
    connection."""

    def __init__(self, owner: set[_NotificationStream]) -> None:
        self._owner = owner
        self._queue: deque[Notification | None] = deque()
        self._ready = asyncio.Event()
        owner.add(self)

    def put(self, item: Notification | None) -> None:
        if len(self._queue) >= NOTIFICATION_QUEUE:
            dropped = self._queue.popleft()
            _log.warning("a notifications() iterator is %d behind: dropped %r", NOTIFICATION_QUEUE, dropped)
        self._queue.append(item)
        self._ready.set()

    def __aiter__(self) -> _NotificationStream:
        return self

    async def __anext__(self) -> Notification:
        while not self._queue:
            self._ready.clear()
            await self._ready.wait()
        item = self._queue[0]
        if item is None:  # the end stays, for the next call too
            raise StopAsyncIteration
        self._queue.popleft()
        return item

    def close(self) -> None:
        """Stops receiving."""
        self._owner.discard(self)
        self.put(None)


class _AsyncLink:
    """An asynchronous connection: one reader task; handlers each in a task."""

    def __init__(
        self,
        channel: _AsyncChannel,
        max_bytes: int,
        deliver: Callable[[Notification | None], None],
        handlers: Mapping[str, AsyncHandler],
    ) -> None:
        self._channel = channel
        self._session = _Session(channel.where, max_bytes)
        self._deliver = deliver
        self._handlers = dict(handlers)
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def exchange(self, spec: _rt.MethodSpec[Any], params: object, timeout: float | None) -> object:
        waiter: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        request_id, body = self._session.request(spec, params, waiter)
        try:
            await self._channel.send(body)
            return await asyncio.wait_for(waiter, timeout)
        except asyncio.TimeoutError:
            raise TransportError(f"`{spec.name}` had no answer from {self._channel.where} within {timeout} s") from None
        finally:
            self._session.forget(request_id)

    async def _read(self) -> None:
        try:
            while True:
                for item in self._session.receive(await self._channel.recv()):
                    if isinstance(item, Notification):
                        self._deliver(item)
                    elif (handler := self._handlers.get(item.method)) is None:
                        await self._send_quietly(_Session.not_found(item))
                    else:
                        task = asyncio.get_running_loop().create_task(self._serve(item, handler))
                        self._tasks.add(task)
                        task.add_done_callback(self._tasks.discard)
        except TransportError as e:
            self._session.fail(e)
        except asyncio.CancelledError:
            self._session.fail(TransportError(f"the client of {self._channel.where} was closed"))
            raise
        except Exception as e:
            self._session.fail(TransportError(f"reading from {self._channel.where} failed: {e!r}"))
        finally:
            self._deliver(None)

    async def _serve(self, request: _ServerRequest, handler: AsyncHandler) -> None:
        try:
            result = handler(request.params)
            if inspect.isawaitable(result):
                result = await result
            answer = _Session.answer(request, result)
        except RpcError as e:
            answer = _Session.answer(request, error=e)
        except Exception as e:
            answer = _Session.answer(request, error=_handler_failed(request, e))
        await self._send_quietly(answer)

    async def _send_quietly(self, message: bytes) -> None:
        try:
            await self._channel.send(message)
        except TransportError as e:
            _log.warning("cannot answer %s: %s", self._channel.where, e)

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._session.fail(TransportError(f"the client of {self._channel.where} was closed"))
        for task in list(self._tasks):
            task.cancel()
        try:
            await self._channel.close()
        finally:
            if not self._reader.done():
                try:
                    await asyncio.wait_for(asyncio.shield(self._reader), 5.0)
                except asyncio.TimeoutError:
                    self._reader.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await self._reader


class AsyncRpcClient:
    """An asynchronous JSON-RPC 2.0 client: mix it in before a generated `AsyncMethods`
    (`class Kv(AsyncRpcClient, methods.AsyncMethods)`).

    `target` is as for `RpcClient`, except that streams are an `asyncio` `(StreamReader,
    StreamWriter)` pair; a WebSocket or a `Stdio` child is opened by the first call (or `connect()`,
    or `async with`). Notifications go to `on_notification` (a plain function, called as they
    arrive) and to every `notifications()` iterator; `handlers` may be coroutine functions."""

    def __init__(
        self,
        target: str | Stdio | tuple[asyncio.StreamReader, asyncio.StreamWriter],
        *,
        token: str | None = None,
        timeout: float | None = 30.0,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        on_notification: Callable[[Notification], object] | None = None,
        handlers: Mapping[str, AsyncHandler] | None = None,
    ) -> None:
        self._kind = _target(target, token)
        self._target = target
        self.url = target if isinstance(target, str) else None
        self._token = token
        self._timeout = timeout
        self._max = max_message_bytes
        self._on_notification = on_notification
        self._handlers = dict(handlers or {})
        self._http: httpx.AsyncClient | None = None
        self._link: _AsyncLink | None = None
        self._opening: asyncio.Lock | None = None
        self._streams: set[_NotificationStream] = set()
        self._ended = False
        self._closed = False
        self._ids = itertools.count(1)
        if self._kind == "http":
            self._http = httpx.AsyncClient(headers=_headers(token), timeout=timeout)

    async def connect(self) -> None:
        """Opens the WebSocket or starts the `Stdio` child, unless done already (HTTP: nothing)."""
        if self._http is not None or self._link is not None:
            return
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._link is not None:
                return
            if self._closed:
                raise TransportError("the client is closed")
            channel: _AsyncChannel
            target = self._target
            if isinstance(target, str):
                channel = await _AsyncWebSocket.open(target, self._token, self._max, self._timeout)
            elif isinstance(target, Stdio):
                channel = await _AsyncProcess.start(target, self._max)
            else:
                assert isinstance(target, tuple)
                channel = _AsyncLines(target[0], target[1], self._max, "the server's streams")
            self._link = _AsyncLink(channel, self._max, self._deliver, self._handlers)

    def _deliver(self, item: Notification | None) -> None:
        if item is None:
            self._ended = True
        elif self._on_notification is not None:
            try:
                self._on_notification(item)
            except Exception:
                _log.exception("the on_notification callback failed")
        for stream in list(self._streams):
            stream.put(item)

    def notifications(self) -> AsyncIterator[Notification]:
        """The notifications the server sends from now on, until the connection ends (take it
        before the call that asks for them). Keeps up to `NOTIFICATION_QUEUE` unread ones."""
        stream = _NotificationStream(self._streams)
        if self._ended or self._closed:
            stream.close()
        return stream

    async def _call(self, spec: _rt.MethodSpec[_T], params: object) -> _T:
        if self._http is not None:
            assert self.url is not None
            body = _body(next(self._ids), spec, params)
            try:
                response = await self._http.post(self.url, content=body)
            except httpx.TransportError as e:
                raise http_failure(str(self.url), e) from e
            return _http_result(spec, response)
        await self.connect()
        assert self._link is not None
        return _result(spec, await self._link.exchange(spec, params, self._timeout))

    async def aclose(self) -> None:
        """Closes the connection (a `Stdio` child is stopped): calls still waiting raise
        `TransportError`, `notifications()` iterators end."""
        self._closed = True
        if self._link is not None:
            await self._link.close()
        if self._http is not None:
            await self._http.aclose()
        for stream in list(self._streams):
            stream.close()

    async def __aenter__(self: _AsyncSelf) -> _AsyncSelf:
        await self.connect()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
