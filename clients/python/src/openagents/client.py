"""`AsyncClient` and the blocking `Client`: the schema's methods as typed calls over any transport.

```python
async with AsyncClient.stdio("echo") as client:
    async with client.events() as events:
        result = asyncio.create_task(client.submit("hello world"))
        async for ev in events:
            print(ev.event)
            if isinstance(ev.event, (RuntimeEventTurnCompleted, RuntimeEventTurnFailed)):
                break
    print((await result).result)
```

Every method the schema defines is a method here (generated: `openagents._generated.methods`),
with typed params and a typed result; errors are the generated exceptions (`BusyError`, ...).
Cancelling an awaited `submit` (or a blocking one, with Ctrl-C) sends `interrupt` naming that
submit's assignment (one is generated when the call gives none), so it can never stop another turn.

Every client compares the digest of the schema its runtime was built from (HTTP response headers,
the WebSocket handshake, `status` over stdio, and every `status` result) with `SCHEMA_DIGEST`, and
reports a mismatch once: a `SchemaMismatchWarning`, or with `strict_schema=True` a
`SchemaMismatchError` from that call and every later one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import threading
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from types import TracebackType
from typing import IO, Any, Literal, TypeVar

from pydantic import JsonValue, ValidationError

from . import _rt
from ._generated.errors import RuntimeSubmitException, exception_for
from ._generated.methods import INTERRUPT, METHODS, AsyncMethods, Methods
from ._generated.models import ErrorCode, ErrorDetails, RuntimeStatus, RuntimeSubmitError, ServerEvent
from ._rt import OpenAgentsError
from ._schema import RuntimeSchema, SchemaGuard
from .errors import ProtocolError, TransportError
from .rpc import wire_params
from .transport.base import OMIT, EventSource, Transport, _Omit
from .transport.http import BlockingHttp, HttpTransport, Reconnect
from .transport.stdio import StdioTransport
from .transport.websocket import ApprovalCallback, WebSocketTransport
from .validation import violations

__all__ = ["AsyncClient", "AsyncEventStream", "Client", "EventStream"]

_T = TypeVar("_T")

DEFAULT_TIMEOUT = 30.0
"""Seconds a call may take, unless the method has its own limit (`submit` has none: a turn runs
as long as its runner's time limit allows)."""

DEFAULT_METHOD_TIMEOUTS: Mapping[str, float | None] = {"submit": None}

INTERRUPT_GRACE = 5.0
"""How long a cancelled `submit` waits for its `interrupt` to be answered."""


def _params_error(method: str, error: ValidationError) -> RuntimeSubmitException:
    found = violations(error)
    listed = "; ".join(f"{v.pointer or '(root)'}: {v.message}" for v in found)
    details = ErrorDetails(violations=found[:1000])
    err = RuntimeSubmitError(
        code=ErrorCode.INVALID_PARAMS,
        message=f"invalid params for `{method}`: {listed}",
        retryable=False,
        details=details,
    )
    return exception_for(err)


def _dumped(spec: _rt.MethodSpec[_T], result: _T) -> JsonValue:
    dumped: JsonValue = spec.result.dump_python(result, mode="json", by_alias=True, exclude_unset=True)
    return dumped


def _wire_params(spec: _rt.MethodSpec[Any], params: object) -> JsonValue | _Omit:
    """The params as they go on the wire (`OMIT` for none), checked against the schema first:
    invalid params raise `InvalidParamsError` here, before anything is sent."""
    try:
        has_params, wire = wire_params(spec, params)
    except ValidationError as e:
        raise _params_error(spec.name, e) from None
    return wire if has_params else OMIT


class AsyncEventStream:
    """The runtime's events, as an async iterator of `ServerEvent`; use it as an async context
    manager to be subscribed before you submit (so no event of the turn is missed)."""

    def __init__(
        self,
        source: EventSource,
        before: Coroutine[Any, Any, object] | None = None,
        on_open: Callable[[], None] | None = None,
    ) -> None:
        self._source = source
        self._before = before
        self._on_open = on_open

    async def __aenter__(self) -> AsyncEventStream:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def open(self) -> None:
        """Subscribes; events published after this returns all arrive."""
        try:
            await self._source.open()
        finally:
            if self._on_open is not None:
                on_open, self._on_open = self._on_open, None
                on_open()
        if self._before is not None:
            before, self._before = self._before, None
            await before

    def __aiter__(self) -> AsyncEventStream:
        return self

    async def __anext__(self) -> ServerEvent:
        await self.open()
        event = await self._source.next()
        if event is None:
            raise StopAsyncIteration
        return event

    async def aclose(self) -> None:
        """Unsubscribes."""
        if self._before is not None:
            self._before.close()
            self._before = None
        await self._source.aclose()


class AsyncClient(AsyncMethods):
    """A typed client over a `Transport`. Build one with `AsyncClient.stdio(...)`,
    `AsyncClient.http(...)` or `AsyncClient.websocket(...)`, and use it as an async context manager.

    `strict_schema=True` makes a runtime built from a different schema an error
    (`SchemaMismatchError`) rather than a warning."""

    def __init__(
        self,
        transport: Transport,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        method_timeouts: Mapping[str, float | None] | None = None,
        interrupt_on_cancel: bool = True,
        strict_schema: bool = False,
    ) -> None:
        self.transport = transport
        self.timeout = timeout
        self.method_timeouts = dict(DEFAULT_METHOD_TIMEOUTS if method_timeouts is None else method_timeouts)
        self.interrupt_on_cancel = interrupt_on_cancel
        self.schema = SchemaGuard(strict_schema)
        """The schema check: `schema.mismatch` is what the runtime reported once it differed."""
        self._inflight: set[asyncio.Task[Any]] = set()
        self._probed = False

    @classmethod
    def stdio(
        cls,
        runner: str,
        *,
        binary: str | os.PathLike[str] | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stderr: Literal["capture", "inherit"] | int | IO[bytes] = "capture",
        timeout: float | None = DEFAULT_TIMEOUT,
        method_timeouts: Mapping[str, float | None] | None = None,
        strict_schema: bool = False,
    ) -> AsyncClient:
        """A client for a runtime it starts itself: `openagents serve --stdio --runner RUNNER`
        (`binary` defaults to `$OPENAGENTS_BIN`, then `openagents` on `PATH`)."""
        transport = StdioTransport(runner, binary=binary, args=args, env=env, cwd=cwd, stderr=stderr)
        return cls(transport, timeout=timeout, method_timeouts=method_timeouts, strict_schema=strict_schema)

    @classmethod
    def http(
        cls,
        url: str,
        *,
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        method_timeouts: Mapping[str, float | None] | None = None,
        reconnect: Reconnect | None = None,
        strict_schema: bool = False,
    ) -> AsyncClient:
        """A client for `openagents serve --http` at `url`, with its bearer token."""
        transport = HttpTransport(url, token=token, token_file=token_file, timeout=timeout, reconnect=reconnect)
        return cls(transport, timeout=timeout, method_timeouts=method_timeouts, strict_schema=strict_schema)

    @classmethod
    def websocket(
        cls,
        url: str,
        *,
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
        on_approval: ApprovalCallback | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        method_timeouts: Mapping[str, float | None] | None = None,
        open_timeout: float | None = 10.0,
        ping_interval: float | None = 20.0,
        close_timeout: float | None = 5.0,
        strict_schema: bool = False,
    ) -> AsyncClient:
        """A client for the WebSocket `/frontend/v2` of `openagents serve --http` at `url` (the
        `http://` URL its readiness line printed, or a `ws://` URL), with its bearer token.

        `on_approval(prompt)` decides the runtime's approval requests (sync, run in a worker thread,
        or async) and returns an `ApprovalReply` or a bool; when it raises, times out, or is not
        given, the request is denied. Every frontend whose credential may answer approvals is asked,
        and the first answer wins: a client without a callback on such a credential denies them."""
        transport = WebSocketTransport(
            url,
            token=token,
            token_file=token_file,
            on_approval=on_approval,
            timeout=timeout,
            open_timeout=open_timeout,
            ping_interval=ping_interval,
            close_timeout=close_timeout,
        )
        return cls(transport, timeout=timeout, method_timeouts=method_timeouts, strict_schema=strict_schema)

    async def __aenter__(self) -> AsyncClient:
        await self.start()
        return self

    async def start(self) -> None:
        """Connects (or starts the runtime) and checks the runtime's schema when the transport
        learns it on connecting (the WebSocket handshake)."""
        try:
            await self.transport.start()
        except OpenAgentsError:
            self._check_schema()
            raise
        try:
            self._check_schema()
        except BaseException:
            await self.aclose()
            raise

    def _check_schema(self) -> None:
        self.schema.check(self.transport.runtime_schema)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the transport (a runtime started over stdio exits)."""
        await self.transport.aclose()

    def _timeout_for(self, method: str) -> float | None:
        return self.method_timeouts.get(method, self.timeout)

    async def _call(self, spec: _rt.MethodSpec[_T], params: object) -> _T:
        return self._typed(spec, await self._request(spec.name, _wire_params(spec, params)))

    def _typed(self, spec: _rt.MethodSpec[_T], result: JsonValue) -> _T:
        """A method's result as its type (and the runtime's schema checked, from `status`)."""
        try:
            with _rt.unlabelled():
                typed = spec.result.validate_python(result)
        except ValidationError as e:
            raise ProtocolError(f"the `{spec.name}` result is not a valid result: {e}") from None
        if isinstance(typed, RuntimeStatus):
            where = f"{self.transport.where}, in its `status` result"
            self.schema.check(RuntimeSchema(typed.schema_digest, typed.protocol_version, where))
        return typed

    def _named(self, method: str, wire: JsonValue | _Omit) -> tuple[JsonValue | _Omit, str | None]:
        """A `submit` gets a name (its assignment), so the interrupt a cancellation sends stops
        only this turn (never a later one, or another client's)."""
        if method == "submit" and self.interrupt_on_cancel and isinstance(wire, dict):
            given = wire.get("assignment")
            assignment = given if isinstance(given, str) else f"asg-{secrets.token_hex(16)}"
            return {**wire, "assignment": assignment}, assignment
        return wire, None

    async def _probe_schema(self, method: str) -> None:
        """Over a transport without headers (stdio), asks `status` once before the first call."""
        if self._probed or not self.transport.probes_schema:
            return
        self._probed = True
        if method != "status":
            with contextlib.suppress(RuntimeSubmitException):
                await self._call(METHODS["status"], None)

    async def _request(self, method: str, wire: JsonValue | _Omit) -> JsonValue:
        wire, assignment = self._named(method, wire)
        await self._probe_schema(method)
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
        try:
            result = await self.transport.request(method, wire, self._timeout_for(method))
        except OpenAgentsError:
            self._check_schema()
            raise
        except (asyncio.CancelledError, TimeoutError):
            if method == "submit" and self.interrupt_on_cancel:
                # The turn runs on in the runtime until told to stop.
                await self._interrupt_quietly(assignment)
            raise
        finally:
            if task is not None:
                self._inflight.discard(task)
        self._check_schema()
        return result

    async def _interrupt_quietly(self, assignment: str | None) -> None:
        params: JsonValue | _Omit = OMIT if assignment is None else {"assignment": assignment}
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.shield(self.transport.request(INTERRUPT.name, params, INTERRUPT_GRACE))

    async def _settle(self, timeout: float) -> None:
        """Waits (up to `timeout`) for cancelled calls to finish their clean-up."""
        pending = {t for t in self._inflight if t is not asyncio.current_task()}
        if pending:
            await asyncio.wait(pending, timeout=timeout)

    async def call(self, method: str, params: JsonValue = None) -> JsonValue:
        """Calls a method by name with untyped params and returns its untyped result (a method
        this version knows is still checked: its params before sending, its result after)."""
        spec = METHODS.get(method)
        if spec is None:
            return await self._request(method, OMIT if params is None else params)
        return _dumped(spec, await self._call(spec, params))

    def events(self, since: int | None = None) -> AsyncEventStream:
        """The runtime's events after sequence number `since` (replayed while the runtime still
        holds them, else announced by a `gap` event), or only new ones when `since` is None."""
        source = self.transport.events(since)
        before = None
        if since is not None and not self.transport.resumes:
            before = self.subscribe(since=since)
        return AsyncEventStream(source, before, self._check_schema)


# --- the blocking client ---------------------------------------------------------------------------


class EventStream:
    """The runtime's events as a blocking iterator of `ServerEvent`; a context manager."""

    def __init__(self, client: Client, stream: AsyncEventStream) -> None:
        self._client = client
        self._stream = stream

    def __enter__(self) -> EventStream:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        """Subscribes; events published after this returns all arrive."""
        self._client._run(self._stream.open())

    def __iter__(self) -> Iterator[ServerEvent]:
        return self

    def __next__(self) -> ServerEvent:
        try:
            return self._client._run(self._stream.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None

    def close(self) -> None:
        """Unsubscribes."""
        self._client._run(self._stream.aclose())


class Client(Methods):
    """The blocking client: the same methods as `AsyncClient`. Over HTTP calls go out on the
    caller's thread (a blocking `httpx.Client`); otherwise, and for event streams, they run on a
    private event loop in a background thread. Ctrl-C during a blocking `submit` sends `interrupt`."""

    def __init__(self, transport: Transport, **options: Any) -> None:
        self._blocking = transport.blocking() if isinstance(transport, HttpTransport) else None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="openagents-client", daemon=True)
        self._thread.start()
        self._closed = False
        self.aio = AsyncClient(transport, **options)
        """The `AsyncClient` underneath (its methods run on the background loop only)."""

    @classmethod
    def stdio(cls, runner: str, **options: Any) -> Client:
        """A client for a runtime it starts itself; the options are `AsyncClient.stdio`'s."""
        transport_opts = {k: options.pop(k) for k in ("binary", "args", "env", "cwd", "stderr") if k in options}
        return cls(StdioTransport(runner, **transport_opts), **options)

    @classmethod
    def http(cls, url: str, **options: Any) -> Client:
        """A client for `openagents serve --http`; the options are `AsyncClient.http`'s."""
        transport_opts = {k: options.pop(k) for k in ("token", "token_file", "reconnect") if k in options}
        transport = HttpTransport(url, timeout=options.get("timeout", DEFAULT_TIMEOUT), **transport_opts)
        return cls(transport, **options)

    @classmethod
    def websocket(cls, url: str, **options: Any) -> Client:
        """A client for the WebSocket `/frontend/v2`; the options are `AsyncClient.websocket`'s. A
        plain `on_approval` function runs in a worker thread, an async one on the client's loop."""
        names = ("token", "token_file", "on_approval", "open_timeout", "ping_interval", "close_timeout")
        transport_opts = {k: options.pop(k) for k in names if k in options}
        transport = WebSocketTransport(url, timeout=options.get("timeout", DEFAULT_TIMEOUT), **transport_opts)
        return cls(transport, **options)

    def _run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        if self._closed:
            coro.close()
            raise TransportError("the client is closed")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except KeyboardInterrupt:
            # Cancel the call in the loop (a cancelled submit sends interrupt) and let it settle.
            future.cancel()
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self.aio._settle(INTERRUPT_GRACE + 1), self._loop).result(
                    INTERRUPT_GRACE + 2
                )
            raise

    def _call(self, spec: _rt.MethodSpec[_T], params: object) -> _T:
        if self._blocking is None:
            return self._run(self.aio._call(spec, params))
        return self.aio._typed(spec, self._request(self._blocking, spec.name, _wire_params(spec, params)))

    def _request(self, blocking: BlockingHttp, method: str, wire: JsonValue | _Omit) -> JsonValue:
        """`AsyncClient._request` on the caller's thread (HTTP carries the schema in headers: no probe)."""
        if self._closed:
            raise TransportError("the client is closed")
        aio = self.aio
        wire, assignment = aio._named(method, wire)
        try:
            result = blocking.request(method, wire, aio._timeout_for(method))
        except OpenAgentsError:
            aio._check_schema()
            raise
        except (KeyboardInterrupt, TimeoutError):
            if method == "submit" and aio.interrupt_on_cancel:
                # The turn runs on in the runtime until told to stop.
                params: JsonValue | _Omit = OMIT if assignment is None else {"assignment": assignment}
                with contextlib.suppress(Exception):
                    blocking.request(INTERRUPT.name, params, INTERRUPT_GRACE)
            raise
        aio._check_schema()
        return result

    def call(self, method: str, params: JsonValue = None) -> JsonValue:
        """`AsyncClient.call`, blocking."""
        if self._blocking is None:
            return self._run(self.aio.call(method, params))
        spec = METHODS.get(method)
        if spec is None:
            return self._request(self._blocking, method, OMIT if params is None else params)
        return _dumped(spec, self._call(spec, params))

    def events(self, since: int | None = None) -> EventStream:
        """`AsyncClient.events`, as a blocking iterator."""

        async def make() -> AsyncEventStream:
            return self.aio.events(since)

        return EventStream(self, self._run(make()))

    def __enter__(self) -> Client:
        self._run(self.aio.start())
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Closes the transport and stops the background loop."""
        if self._closed:
            return
        try:
            if self._blocking is not None:
                self._blocking.close()
            self._run(self.aio.aclose())
        finally:
            self._closed = True
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            if not self._loop.is_running():
                self._loop.close()
