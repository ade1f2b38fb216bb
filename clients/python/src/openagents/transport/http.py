"""HTTP: `POST /rpc` with one request per call, and `GET /events` as Server-Sent Events that
resume with `Last-Event-ID` after a dropped connection. Every request carries the bearer token."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
from pydantic import JsonValue, ValidationError

from .._generated.constants import SERVER_MAX_LINE_BYTES
from .._generated.models import RuntimeEventShuttingDown, ServerEvent
from ..errors import ProtocolError, TransportError
from .base import EventSource, Transport, _Omit, decode_response, encode_request, schema_from_headers
from .connection import Sequencer

__all__ = ["HttpTransport", "Reconnect"]


@dataclass(frozen=True)
class Reconnect:
    """How an event stream comes back after its connection drops: up to `attempts` tries in a
    row, waiting `initial` seconds and doubling up to `maximum` between them. `read_timeout` is how
    long a silent connection is trusted (the server sends a keep-alive every 15 s)."""

    attempts: int = 8
    initial: float = 0.05
    maximum: float = 2.0
    read_timeout: float = 45.0


def _read_token(token: str | None, token_file: str | os.PathLike[str] | None) -> str:
    if token is not None:
        return token.strip()
    if token_file is None:
        raise TransportError("an HTTP runtime needs a bearer token: pass token=... or token_file=...")
    try:
        text = Path(token_file).read_text(encoding="utf-8").strip()
    except OSError as e:
        raise TransportError(f"cannot read the token file {os.fspath(token_file)}: {e}") from e
    if not text:
        raise TransportError(f"the token file {os.fspath(token_file)} is empty")
    return text


def _error_from_body(status: int, body: bytes) -> Exception:
    try:
        doc = json.loads(body)
    except ValueError:
        snippet = body[:200].decode("utf-8", errors="replace")
        return ProtocolError(f"HTTP {status} without a JSON body: {snippet!r}")
    try:
        decode_response(doc)
    except Exception as e:
        return e
    return ProtocolError(f"HTTP {status} with a result where an error was expected")


class _Sse(EventSource):
    def __init__(self, transport: HttpTransport, since: int | None) -> None:
        self._t = transport
        self._order = Sequencer(since)
        self._response: httpx.Response | None = None
        self._chunks: AsyncIterator[bytes] | None = None
        self._buffer = bytearray()
        self._done = False
        self._failures = 0

    async def open(self) -> None:
        if self._response is None and not self._done:
            await self._connect()

    async def _connect(self) -> None:
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if self._order.last is not None:
            headers["Last-Event-ID"] = str(self._order.last)
        r = self._t._reconnect
        timeout = httpx.Timeout(self._t._timeout or 30.0, read=r.read_timeout)
        request = self._t._client.build_request("GET", "events", headers=headers, timeout=timeout)
        response = await self._t._client.send(request, stream=True)
        self._t._note_schema(response)
        if response.status_code != 200:
            body = await response.aread()
            await response.aclose()
            raise _error_from_body(response.status_code, body)
        self._response = response
        self._chunks = response.aiter_raw().__aiter__()
        self._buffer.clear()

    async def _drop(self) -> None:
        if self._response is not None:
            with contextlib.suppress(Exception):
                await self._response.aclose()
        self._response = None

    async def _line(self) -> bytes | None:
        """The next line of the stream (bounded), or None when the connection ended."""
        while True:
            i = self._buffer.find(b"\n")
            if i >= 0:
                line = bytes(self._buffer[:i])
                del self._buffer[: i + 1]
                return line[:-1] if line.endswith(b"\r") else line
            if len(self._buffer) > SERVER_MAX_LINE_BYTES:
                raise ProtocolError(f"an event-stream line is longer than {SERVER_MAX_LINE_BYTES} bytes")
            try:
                assert self._chunks is not None
                chunk = await self._chunks.__anext__()
            except StopAsyncIteration:
                return None
            self._buffer += chunk

    async def _event(self) -> ServerEvent | None:
        """The next event of the current connection, or None when it ended."""
        data: list[bytes] = []
        while True:
            line = await self._line()
            if line is None:
                return None
            if not line:
                if not data:
                    continue
                raw = b"\n".join(data)
                data.clear()
                try:
                    return ServerEvent.from_json(raw)
                except ValidationError:
                    continue  # not a valid event (a newer server's malformed kind): skip it
            if line.startswith(b":"):
                continue  # a keep-alive comment
            field, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if field == b"data":
                data.append(value)

    async def next(self) -> ServerEvent | None:
        while not self._done:
            ready = self._order.pop()
            if ready is not None:
                if isinstance(ready.event, RuntimeEventShuttingDown):
                    self._done = True
                    await self._drop()
                return ready
            if self._response is None:
                await self._reconnect()
                continue
            try:
                event = await self._event()
            except (httpx.TransportError, httpx.StreamError):
                await self._drop()
                self._failures += 1
                continue
            if event is None:
                # The connection ended without the runtime's last event: come back.
                await self._drop()
                self._failures += 1
                continue
            self._failures = 0
            self._order.feed(event)  # what came before the connection dropped is not repeated
        return None

    async def _reconnect(self) -> None:
        r = self._t._reconnect
        while True:
            if self._failures > r.attempts:
                self._done = True
                raise TransportError(f"the event stream dropped and did not come back after {r.attempts} attempts")
            if self._failures:
                await asyncio.sleep(min(r.initial * 2 ** (self._failures - 1), r.maximum))
            try:
                await self._connect()
                return
            except httpx.TransportError:
                self._failures += 1

    async def aclose(self) -> None:
        self._done = True
        await self._drop()


class HttpTransport(Transport):
    """Talks to `openagents serve --http`: `url` as its readiness line printed it, and the token
    (or the file holding it)."""

    resumes = True

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
        timeout: float | None = 30.0,
        reconnect: Reconnect | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = url if url.endswith("/") else url + "/"
        self._token = _read_token(token, token_file)
        self._timeout = timeout
        self._reconnect = reconnect or Reconnect()
        self._own_client = client is None
        self._client = client or httpx.AsyncClient(timeout=timeout)
        self._client.base_url = httpx.URL(self.url)
        self._client.headers["Authorization"] = f"Bearer {self._token}"
        self._next_id = 0

    async def request(self, method: str, params: JsonValue | _Omit, timeout: float | None) -> JsonValue:
        self._next_id += 1
        body = encode_request(self._next_id, method, params)
        request = self._client.build_request(
            "POST", "rpc", content=body, headers={"Content-Type": "application/json"}, timeout=httpx.Timeout(timeout)
        )
        try:
            status, content = await self._send(request)
        except httpx.TimeoutException:
            raise TimeoutError(f"no answer to `{method}` within {timeout} s") from None
        except httpx.TransportError as e:
            raise TransportError(f"cannot reach {self.url}: {e}") from e
        try:
            doc = json.loads(content)
        except ValueError:
            raise _error_from_body(status, content) from None
        return decode_response(doc)

    async def _send(self, request: httpx.Request) -> tuple[int, bytes]:
        """Sends a request and reads its body, never more than `SERVER_MAX_LINE_BYTES` of it."""
        response = await self._client.send(request, stream=True)
        self._note_schema(response)
        try:
            declared = response.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > SERVER_MAX_LINE_BYTES:
                raise ProtocolError(f"the response is longer than {SERVER_MAX_LINE_BYTES} bytes")
            body = bytearray()
            async for chunk in response.aiter_raw():
                body += chunk
                if len(body) > SERVER_MAX_LINE_BYTES:
                    raise ProtocolError(f"the response is longer than {SERVER_MAX_LINE_BYTES} bytes")
            return response.status_code, bytes(body)
        finally:
            await response.aclose()

    def _note_schema(self, response: httpx.Response) -> None:
        if self.runtime_schema is None:
            self.runtime_schema = schema_from_headers(response.headers, self.where)

    @property
    def where(self) -> str:
        return f"HTTP {self.url}"

    def events(self, since: int | None) -> EventSource:
        return _Sse(self, since)

    async def aclose(self) -> None:
        if self._own_client:
            await self._client.aclose()
