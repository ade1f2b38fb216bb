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
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias
from urllib.parse import urlsplit, urlunsplit

from pydantic import JsonValue, ValidationError
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI
from websockets.typing import Subprotocol

from .._generated.constants import SERVER_MAX_LINE_BYTES
from .._generated.models import ApprovalPrompt, ApprovalReply, FrontendApprovalRequest
from ..errors import ProtocolError, TransportError, WebSocketClosed
from .base import OMIT, _Omit, is_notice, schema_from_headers
from .connection import Connection, LocalSubscription
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


class WebSocketTransport(Connection):
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
        on_approval: ApprovalCallback | None = None,
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
        timeout: float | None = 30.0,
        open_timeout: float | None = 10.0,
        ping_interval: float | None = 20.0,
        close_timeout: float | None = 5.0,
    ) -> None:
        super().__init__()
        self.url = websocket_url(url)
        self._token = _read_token(token, token_file)
        self.on_approval = on_approval
        self._timeout = timeout
        self._open_timeout = open_timeout
        self._ping_interval = ping_interval
        self._close_timeout = close_timeout
        self._conn: ClientConnection | None = None
        self._approvals: dict[str, asyncio.Task[None]] = {}
        self._subscribed = False
        self._position = 0  # the newest sequence number the runtime is known to have reached

    @property
    def where(self) -> str:
        return f"WebSocket {self.url}"

    @property
    def subprotocol(self) -> str | None:
        """The subprotocol the runtime answered with (`openagents.v2`), once connected."""
        return self._conn.subprotocol if self._conn is not None else None

    async def _open(self) -> None:
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

    async def _receive(self) -> object | None:
        conn = self._conn
        assert conn is not None
        try:
            message = await conn.recv()
        except ConnectionClosed:
            return None
        except Exception as e:  # the connection failed under us: say so rather than hang
            raise TransportError(f"the WebSocket {self.url} failed: {e}") from e
        if isinstance(message, bytes):
            await conn.close(1003, "only JSON text frames")
            raise ProtocolError("the runtime sent a binary frame; it sends only JSON text frames")
        try:
            doc: object = json.loads(message)
        except ValueError as e:
            await conn.close(1007, "not JSON")
            raise ProtocolError(f"the runtime sent a message that is not JSON: {e}") from None
        return doc

    async def _send(self, message: bytes) -> None:
        assert self._conn is not None
        try:
            await self._conn.send(message.decode("utf-8"))
        except ConnectionClosed as e:
            raise ConnectionError(str(e)) from e

    def _dispatch(self, doc: object) -> None:
        if not isinstance(doc, dict):
            return
        method = doc.get("method")
        if method is None:
            self._on_reply(doc.get("id"), doc)
        elif method == "frontend.v2.event":
            event = self._on_event(doc.get("params"))
            if event is not None and not is_notice(event):
                self._position = max(self._position, event.seq)
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
            if self._conn is not None:
                with contextlib.suppress(ConnectionError):
                    await self._send(json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
        finally:
            if self._approvals.get(key) is asyncio.current_task():
                del self._approvals[key]

    async def _close_reason(self, failure: TransportError | None) -> TransportError:
        for task in list(self._approvals.values()):
            task.cancel()
        if failure is not None:
            return failure
        if self._closed or self._conn is None:
            return TransportError("the transport is closed")
        code, reason = self._conn.close_code, self._conn.close_reason or ""
        said = f" ({reason})" if reason else ""
        return WebSocketClosed(f"the WebSocket {self.url} closed: code {code}{said}", code, reason)

    async def _joined(self, sub: LocalSubscription) -> None:
        floor = await self._subscribe(sub.since)
        if sub.since is None:
            sub.order.skip_through(floor)

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

    async def aclose(self) -> None:
        self._closed = True
        conn = self._conn
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()
        await self._stop_reader()
        for task in list(self._approvals.values()):
            task.cancel()
