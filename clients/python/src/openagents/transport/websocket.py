"""The frontend WebSocket, `/frontend/v2`: JSON-RPC 2.0 both ways over one connection, one message
per text frame. Requests are answered by `id`; after `subscribe` the runtime pushes events as
`frontend.v2.event` notifications; approval requests arrive as `frontend.v2.approval` requests
that the transport answers with the `on_approval` callback's decision (deny when there is no
callback or it fails: approvals fail closed)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import os
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias
from urllib.parse import urlsplit, urlunsplit

from pydantic import JsonValue, ValidationError
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI
from websockets.typing import Subprotocol

from .._generated.constants import SERVER_EVENT_CHANNEL_CAPACITY, SERVER_MAX_LINE_BYTES
from .._generated.models import (
    ApprovalPrompt,
    ApprovalReply,
    FrontendApprovalRequest,
    RuntimeEventGap,
    RuntimeEventLagged,
    RuntimeEventShuttingDown,
    ServerEvent,
)
from ..errors import ProtocolError, TransportError, WebSocketClosed
from .base import (
    OMIT,
    EventSource,
    Transport,
    _Omit,
    decode_response,
    encode_request,
    is_notice,
    resume_after_gap,
    schema_from_headers,
)
from .http import _error_from_body, _read_token

__all__ = ["FRONTEND_PATH", "SUBPROTOCOL", "ApprovalCallback", "WebSocketTransport", "websocket_url"]

FRONTEND_PATH = "/frontend/v2"
"""The only WebSocket path a runtime serves (on its HTTP port)."""

SUBPROTOCOL = "openagents.v2"
"""The subprotocol the runtime answers with."""

ApprovalCallback: TypeAlias = Callable[[ApprovalPrompt], ApprovalReply | bool | Awaitable[ApprovalReply | bool]]
"""Decides an approval request: returns (or, when async, resolves to) an `ApprovalReply` or a bool
(approved). A plain function runs in a worker thread, so it may block (to ask a person)."""

_log = logging.getLogger("openagents")


def websocket_url(url: str) -> str:
    """The `/frontend/v2` URL for `url`: the runtime's `http://` URL as `serve --http` printed it
    (`ws://` and `wss://` URLs too); a URL without a path gets `/frontend/v2`."""
    parts = urlsplit(url)
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme.lower())
    if scheme is None or not parts.netloc:
        raise TransportError(f"`{url}` is not an http://, https://, ws:// or wss:// URL")
    path = parts.path if parts.path not in ("", "/") else FRONTEND_PATH
    return urlunsplit((scheme, parts.netloc, path, parts.query, ""))


class _Subscriber(EventSource):
    def __init__(self, transport: WebSocketTransport, since: int | None) -> None:
        self._t = transport
        self._since = since
        self._queue: deque[ServerEvent] = deque()
        self._missed = 0
        self._last = -1 if since is None else since
        self._wake = asyncio.Event()
        self._ended = False
        self._open = False
        self._closed = False

    async def open(self) -> None:
        if self._open:
            return
        self._open = True
        self._t._subscribers.add(self)
        try:
            floor = await self._t._subscribe(self._since)
            if self._since is None:
                # Only what is new from here: not another subscriber's replay of older events.
                self._last = max(self._last, floor)
        except BaseException:
            self._t._subscribers.discard(self)
            self._open = False
            raise

    def _push(self, event: ServerEvent) -> None:
        if len(self._queue) >= SERVER_EVENT_CHANNEL_CAPACITY:
            # A slow reader misses the oldest events and is told how many, as on the server.
            self._queue.popleft()
            self._missed += 1
        self._queue.append(event)
        self._wake.set()

    def _end(self) -> None:
        self._ended = True
        self._wake.set()

    async def next(self) -> ServerEvent | None:
        await self.open()
        while True:
            if self._missed:
                missed, self._missed = self._missed, 0
                lagged = RuntimeEventLagged(type="lagged", missed=missed)
                return ServerEvent(seq=max(self._last, 0), event=lagged)
            if self._queue:
                event = self._queue.popleft()
                if isinstance(event.event, RuntimeEventGap):
                    self._last = resume_after_gap(self._last, event.event)
                elif not is_notice(event):
                    if event.seq <= self._last:
                        continue  # replayed for another subscriber's `since`: already delivered
                    self._last = event.seq
                if isinstance(event.event, RuntimeEventShuttingDown):
                    self._ended = True  # the runtime's last event
                    self._queue.clear()
                return event
            if self._ended:
                failure = self._t._failure
                if failure is not None and not self._t._shut_down and not self._closed:
                    raise failure
                return None
            self._wake.clear()
            await self._wake.wait()

    async def aclose(self) -> None:
        self._t._subscribers.discard(self)
        self._closed = True
        self._end()


class WebSocketTransport(Transport):
    """Talks to a runtime's `/frontend/v2` (served by `openagents serve --http` on its HTTP port),
    authenticated with `Authorization: Bearer <token>` before the upgrade.

    `url` is the runtime's URL as its readiness line printed it (`http://127.0.0.1:PORT/`), or a
    `ws://` URL. `on_approval` decides the runtime's approval requests, when the credential may
    answer them; without it, every request is denied at once (a frontend that cannot decide never
    approves). `open_timeout` bounds the handshake, `ping_interval` is how often the transport pings
    (the runtime also pings, and closes a connection silent for 60 s), and `close_timeout` how long
    closing waits for the runtime's close frame."""

    resumes = True

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
        on_approval: ApprovalCallback | None = None,
        timeout: float | None = 30.0,
        open_timeout: float | None = 10.0,
        ping_interval: float | None = 20.0,
        close_timeout: float | None = 5.0,
    ) -> None:
        self.url = websocket_url(url)
        self._token = _read_token(token, token_file)
        self.on_approval = on_approval
        self._timeout = timeout
        self._open_timeout = open_timeout
        self._ping_interval = ping_interval
        self._close_timeout = close_timeout
        self._conn: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[object]] = {}
        self._approvals: dict[str, asyncio.Task[None]] = {}
        self._next_id = 0
        self._start_lock = asyncio.Lock()
        self._subscribers: set[_Subscriber] = set()
        self._subscribed = False
        self._position = 0  # the newest sequence number the runtime is known to have reached
        self._failure: TransportError | None = None
        self._shut_down = False
        self._closed = False

    @property
    def where(self) -> str:
        return f"WebSocket {self.url}"

    @property
    def subprotocol(self) -> str | None:
        """The subprotocol the runtime answered with (`openagents.v2`), once connected."""
        return self._conn.subprotocol if self._conn is not None else None

    async def start(self) -> None:
        async with self._start_lock:
            if self._conn is not None:
                return
            if self._closed:
                raise TransportError("the transport is closed")
            try:
                conn = await connect(
                    self.url,
                    additional_headers={"Authorization": f"Bearer {self._token}"},
                    subprotocols=[Subprotocol(SUBPROTOCOL)],
                    compression=None,
                    open_timeout=self._open_timeout,
                    ping_interval=self._ping_interval,
                    ping_timeout=self._ping_interval,
                    close_timeout=self._close_timeout,
                    max_size=SERVER_MAX_LINE_BYTES,
                )
            except InvalidStatus as e:
                # Refused before the upgrade (a bad token, a wrong path): the body is a typed error.
                self.runtime_schema = schema_from_headers(e.response.headers, self.where)
                raise _error_from_body(e.response.status_code, bytes(e.response.body or b"")) from None
            except (InvalidHandshake, InvalidURI) as e:
                raise TransportError(f"cannot open the WebSocket {self.url}: {e}") from e
            except asyncio.TimeoutError:
                raise TransportError(f"no WebSocket handshake from {self.url} within {self._open_timeout} s") from None
            except OSError as e:
                raise TransportError(f"cannot reach {self.url}: {e}") from e
            if conn.response is not None:
                self.runtime_schema = schema_from_headers(conn.response.headers, self.where)
            self._conn = conn
            self._reader = asyncio.create_task(self._read_loop(conn))

    async def _read_loop(self, conn: ClientConnection) -> None:
        failure: TransportError | None = None
        try:
            async for message in conn:
                if isinstance(message, bytes):
                    failure = ProtocolError("the runtime sent a binary frame; it sends only JSON text frames")
                    await conn.close(1003, "only JSON text frames")
                    break
                try:
                    doc = json.loads(message)
                except ValueError as e:
                    failure = ProtocolError(f"the runtime sent a message that is not JSON: {e}")
                    await conn.close(1007, "not JSON")
                    break
                self._dispatch(doc)
        except ConnectionClosed:
            pass
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the connection failed under us: say so rather than hang
            failure = TransportError(f"the WebSocket {self.url} failed: {e}")
        finally:
            self._on_exit(conn, failure)

    def _dispatch(self, doc: object) -> None:
        if not isinstance(doc, dict):
            return
        method = doc.get("method")
        if method is None:
            request_id = doc.get("id")
            if isinstance(request_id, int) and not isinstance(request_id, bool):
                fut = self._pending.get(request_id)
                if fut is not None and not fut.done():
                    fut.set_result(doc)
            # A response with a null id answers a message the runtime could not read; every message
            # this transport sends is readable, so there is nobody to give it to.
            return
        if method == "frontend.v2.event":
            try:
                event = ServerEvent.from_wire(doc.get("params"))
            except ValidationError:
                return  # not a valid event (a newer runtime's malformed kind): skip it, keep going
            if isinstance(event.event, RuntimeEventShuttingDown):
                self._shut_down = True
            if not is_notice(event):
                self._position = max(self._position, event.seq)
            for sub in list(self._subscribers):
                sub._push(event)
        elif method == "frontend.v2.approval" and "id" in doc:
            key = json.dumps(doc["id"])
            self._approvals[key] = asyncio.create_task(self._answer(key, doc))
        elif method == "frontend.v2.approval_resolved":
            # Settled elsewhere (another frontend, a timeout, the turn ended): stop deciding.
            params = doc.get("params")
            request_id = params.get("request_id") if isinstance(params, dict) else None
            task = self._approvals.pop(json.dumps(request_id), None)
            if task is not None:
                task.cancel()

    async def _decide(self, doc: dict[str, Any]) -> ApprovalReply:
        """The callback's decision; a denial when there is none, it fails, or it takes longer than
        the runtime waits."""
        try:
            request = FrontendApprovalRequest.from_wire(doc)
        except ValidationError as e:
            _log.warning("denying an approval request that is not valid: %s", e)
            return ApprovalReply(approved=False)
        callback = self.on_approval
        if callback is None:
            return ApprovalReply(approved=False)
        prompt = request.params
        limit = prompt.timeout_ms / 1000 if prompt.timeout_ms is not None else None

        async def decide() -> object:
            if inspect.iscoroutinefunction(callback):
                got: object = callback(prompt)
            else:
                got = await asyncio.to_thread(callback, prompt)
            if inspect.isawaitable(got):
                got = await got
            return got

        try:
            got = await asyncio.wait_for(decide(), limit)
        except asyncio.TimeoutError:
            _log.warning("the approval callback took longer than the runtime waits; denying %r", prompt.prompt)
            return ApprovalReply(approved=False)
        except Exception:
            _log.warning("the approval callback raised; denying %r", prompt.prompt, exc_info=True)
            return ApprovalReply(approved=False)
        if isinstance(got, ApprovalReply):
            return got
        if isinstance(got, bool):
            return ApprovalReply(approved=got)
        _log.warning("the approval callback returned %r, not an ApprovalReply or a bool; denying", got)
        return ApprovalReply(approved=False)

    async def _answer(self, key: str, doc: dict[str, Any]) -> None:
        try:
            reply = await self._decide(doc)
            message = {"jsonrpc": "2.0", "id": doc["id"], "result": reply.to_wire()}
            conn = self._conn
            if conn is not None:
                with contextlib.suppress(ConnectionClosed):
                    await conn.send(json.dumps(message, ensure_ascii=False, separators=(",", ":")))
        finally:
            if self._approvals.get(key) is asyncio.current_task():
                del self._approvals[key]

    def _on_exit(self, conn: ClientConnection, failure: TransportError | None) -> None:
        if failure is None:
            if self._closed:
                failure = TransportError("the transport is closed")
            else:
                code, reason = conn.close_code, conn.close_reason or ""
                said = f" ({reason})" if reason else ""
                failure = WebSocketClosed(f"the WebSocket {self.url} closed: code {code}{said}", code, reason)
        self._failure = failure
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(failure)
        for sub in list(self._subscribers):
            sub._end()
        for task in list(self._approvals.values()):
            task.cancel()

    async def _subscribe(self, since: int | None) -> int:
        """Starts the connection's event stream (one per connection); a later subscriber with
        `since` restarts it from there, and subscribers already reading drop what they have seen.
        Returns the runtime's position: a subscriber without `since` takes only later events."""
        if since is None and self._subscribed:
            return self._position
        params: JsonValue | _Omit = OMIT if since is None else {"since": since}
        result = await self.request("subscribe", params, self._timeout)
        self._subscribed = True
        last = result.get("last_seq") if isinstance(result, dict) else None
        if isinstance(last, int) and not isinstance(last, bool):
            self._position = max(self._position, last)
            return last
        return self._position

    async def request(self, method: str, params: JsonValue | _Omit, timeout: float | None) -> JsonValue:
        await self.start()
        if self._failure is not None:
            raise self._failure
        assert self._conn is not None
        self._next_id += 1
        request_id = self._next_id
        text = encode_request(request_id, method, params).decode("utf-8")
        fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = fut
        try:
            try:
                await self._conn.send(text)
            except ConnectionClosed as e:
                # Say why (the close code and reason), once the reader knows.
                if self._reader is not None:
                    with contextlib.suppress(Exception, asyncio.CancelledError):
                        await asyncio.wait_for(asyncio.shield(self._reader), 3.0)
                if self._failure is not None:
                    raise self._failure from e
                raise TransportError(f"cannot send to {self.url}: {e}") from e
            try:
                doc = await asyncio.wait_for(fut, timeout)
            except asyncio.TimeoutError:
                raise TimeoutError(f"no answer to `{method}` within {timeout} s") from None
        finally:
            self._pending.pop(request_id, None)
            if fut.done() and not fut.cancelled():
                fut.exception()  # retrieved: the failure is raised another way
        return decode_response(doc)

    def events(self, since: int | None) -> EventSource:
        return _Subscriber(self, since)

    async def aclose(self) -> None:
        self._closed = True
        conn = self._conn
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._reader, 2.0)
        for task in list(self._approvals.values()):
            task.cancel()
