"""HTTP: `POST /rpc` with one request per call, and `GET /events` as Server-Sent Events that
resume with `Last-Event-ID` after a dropped connection. Every request carries the bearer token."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
from pydantic import JsonValue

from .._generated.constants import SERVER_MAX_LINE_BYTES
from .._generated.models import RuntimeEventShuttingDown, ServerEvent
from ..errors import ProtocolError, TransportError, http_failure
from .base import EventSource, Transport, _Omit, decode_response, encode_request, schema_from_headers
from .connection import Sequencer
from .events import decode_event

__all__ = ["BlockingHttp", "HttpTransport", "Reconnect"]


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
        self._payloads: deque[bytes] = deque()
        self._done = False
        self._failures = 0

    async def open(self) -> None:
        if self._response is None and not self._done:
            await self._reconnect()  # a connection the runtime dropped (a pooled one) is tried again

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
        self._payloads.clear()

    async def _drop(self) -> None:
        if self._response is not None:
            with contextlib.suppress(Exception):
                await self._response.aclose()
        self._response = None

    async def _event(self) -> ServerEvent | None:
        """The next event of the current connection, or None when it ended."""
        while True:
            while self._payloads:
                # One at a time, as they are read: decoded events do not pile up (nor does the
                # garbage collector's work on them).
                event = decode_event(self._payloads.popleft())
                if event is not None:
                    return event
            try:
                assert self._chunks is not None
                chunk = await self._chunks.__anext__()
            except StopAsyncIteration:
                return None
            self._buffer += chunk
            self._split()

    def _split(self) -> None:
        """Takes the `data` of every complete event in the buffer, in one pass over it; keeps the
        rest (a line is bounded by `SERVER_MAX_LINE_BYTES`)."""
        buf = self._buffer
        if b"\r" in buf:
            # `\r\n` and `\r` end lines too; a last `\r` waits for the next chunk's `\n`.
            tail = b"\r" if buf.endswith(b"\r") else b""
            buf[:] = bytes(buf[: len(buf) - len(tail)]).replace(b"\r\n", b"\n").replace(b"\r", b"\n") + tail
        end = buf.rfind(b"\n\n")
        if len(buf) - (buf.rfind(b"\n") + 1) > SERVER_MAX_LINE_BYTES:
            raise ProtocolError(f"an event-stream line is longer than {SERVER_MAX_LINE_BYTES} bytes")
        if end < 0:
            return
        complete = bytes(buf[:end])
        del buf[: end + 2]
        for block in complete.split(b"\n\n"):
            if block.startswith(b"id: "):  # the runtime's own shape: `id: N`, one `data:` line
                rest = block[block.find(b"\n") + 1 :]
                if rest.startswith(b"data: ") and b"\n" not in rest:
                    self._payloads.append(rest[6:])
                    continue
            data: list[bytes] = []
            for line in block.split(b"\n"):
                if not line or line[0] == 0x3A:  # a blank line, or a keep-alive comment
                    continue
                field, _, value = line.partition(b":")
                if field == b"data":
                    data.append(value[1:] if value[:1] == b" " else value)
            if data:
                self._payloads.append(data[0] if len(data) == 1 else b"\n".join(data))

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


_JSON = {"Content-Type": "application/json"}


class _Body:
    """A `POST /rpc` response's body, never more than `SERVER_MAX_LINE_BYTES` of it."""

    def __init__(self, transport: HttpTransport, response: httpx.Response) -> None:
        transport._note_schema(response)
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > SERVER_MAX_LINE_BYTES:
            raise ProtocolError(f"the response is longer than {SERVER_MAX_LINE_BYTES} bytes")
        self.status = response.status_code
        self.data = bytearray()

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > SERVER_MAX_LINE_BYTES:
            raise ProtocolError(f"the response is longer than {SERVER_MAX_LINE_BYTES} bytes")

    def reply(self) -> JsonValue:
        """The response's `result`, or its error raised."""
        try:
            doc = json.loads(self.data)
        except ValueError:
            raise _error_from_body(self.status, bytes(self.data)) from None
        return decode_response(doc)


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
        request = self._rpc_request(self._client, method, params, timeout)
        with self._reaching(method, timeout):
            response = await self._client.send(request, stream=True)
            try:
                body = _Body(self, response)
                async for chunk in response.aiter_raw():
                    body.add(chunk)
            finally:
                await response.aclose()
        return body.reply()

    def blocking(self) -> BlockingHttp | None:
        """The same requests without an event loop (over `httpx.Client`), for the blocking
        `Client`; None when the transport was given its own `httpx.AsyncClient`."""
        return BlockingHttp(self) if self._own_client else None

    def _rpc_request(
        self, client: httpx.Client | httpx.AsyncClient, method: str, params: JsonValue | _Omit, timeout: float | None
    ) -> httpx.Request:
        self._next_id += 1
        body = encode_request(self._next_id, method, params)
        return client.build_request("POST", "rpc", content=body, headers=_JSON, timeout=httpx.Timeout(timeout))

    @contextlib.contextmanager
    def _reaching(self, method: str, timeout: float | None) -> Iterator[None]:
        try:
            yield
        except httpx.TimeoutException:
            raise TimeoutError(f"no answer to `{method}` within {timeout} s") from None
        except httpx.TransportError as e:
            raise http_failure(str(self.url), e) from e

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


class BlockingHttp:
    """`HttpTransport.request` for a caller without an event loop: the same requests and the same
    checks, over a blocking `httpx.Client` (no hop to another thread)."""

    def __init__(self, transport: HttpTransport) -> None:
        self._t = transport
        self._client = httpx.Client(
            base_url=transport.url,
            headers={"Authorization": f"Bearer {transport._token}"},
            timeout=transport._timeout,
        )

    def request(self, method: str, params: JsonValue | _Omit, timeout: float | None) -> JsonValue:
        t = self._t
        request = t._rpc_request(self._client, method, params, timeout)
        with t._reaching(method, timeout):
            response = self._client.send(request, stream=True)
            try:
                body = _Body(t, response)
                for chunk in response.iter_raw():
                    body.add(chunk)
            finally:
                response.close()
        return body.reply()

    def close(self) -> None:
        self._client.close()
