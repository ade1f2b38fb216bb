"""The connection core that stdio and the WebSocket share, and the ordering rule every event stream
(HTTP's Server-Sent Events too) follows.

A `Connection` is one duplex channel to a runtime: requests go out with ids, replies come back
matched by id, events arrive on the same channel and fan out to local subscribers, and when the
channel closes every waiting request and subscriber is told why. A transport over it only opens
the channel, sends one message, receives one message, and says what a received message is
(`_dispatch`), as MCP's `BaseSession` and the TypeScript client's `PendingReplies` and
`LocalSubscription` do.

The ordering rule (`Sequencer`): every event once, in sequence order. A stream that starts from
`since` may first carry events the connection's previous stream had already queued, which are
newer than the replay's first: those are held until the ones before them arrive (or a `gap` or
`lagged` notice says they will not), and what was delivered already is dropped.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
from collections import deque

from pydantic import JsonValue, ValidationError

from .._generated.constants import SERVER_EVENT_CHANNEL_CAPACITY
from .._generated.models import RuntimeEventGap, RuntimeEventLagged, RuntimeEventShuttingDown, ServerEvent
from ..errors import TransportError
from .base import EventSource, Transport, _Omit, decode_response, encode_request, resume_after_gap

__all__ = ["Connection", "LocalSubscription", "Sequencer"]


class Sequencer:
    """Puts one subscriber's events in order: `feed` them as they arrive, `pop` them in sequence
    order, each once. `last` is the newest sequence number delivered (or `since`; None before the
    first event of a stream without `since`)."""

    def __init__(self, since: int | None) -> None:
        self.last = since
        self._syncing = since is not None  # until the event after `since` arrives
        self._held: dict[int, ServerEvent] = {}
        self._ready: deque[ServerEvent] = deque()

    def skip_through(self, seq: int) -> None:
        """Takes no event up to `seq` (the stream's position when a subscriber without `since`
        joined it): not another subscriber's replay of older events."""
        if not self._syncing:
            self.last = seq if self.last is None else max(self.last, seq)

    def feed(self, event: ServerEvent) -> None:
        kind = event.event
        if isinstance(kind, RuntimeEventGap):
            # The replay resumes after `resumed_at`: wait for that one, not the lost ones.
            self.last = resume_after_gap(self.last, kind)
            for seq in [s for s in self._held if s <= self.last]:
                del self._held[seq]
            self._ready.append(event)
            self._release_next()
            return
        if isinstance(kind, RuntimeEventLagged):
            self._ready.append(event)
            self.flush()  # some events will not come
            return
        seq, last = event.seq, self.last
        if last is not None and seq <= last:
            return  # replayed after a restart of the stream: already delivered
        if last is not None and seq > last + 1:
            if self._syncing and not isinstance(kind, RuntimeEventShuttingDown):
                self._held[seq] = event  # the old stream, ahead of the replay
                if len(self._held) > SERVER_EVENT_CHANNEL_CAPACITY:
                    self.flush()
                return
            self._release_below(seq)  # nothing earlier is coming: what is held goes first
            if seq in self._held:
                del self._held[seq]
        self._syncing = False
        self.last = seq
        self._ready.append(event)
        self._release_next()

    def pop(self) -> ServerEvent | None:
        """The next event in order, if one is ready."""
        return self._ready.popleft() if self._ready else None

    def flush(self) -> None:
        """Stops waiting for earlier events: what is held is ready next, in order."""
        self._syncing = False
        self._release_below(None)

    def _release_below(self, bound: int | None) -> None:
        for seq in sorted(s for s in self._held if bound is None or s < bound):
            self._ready.append(self._held.pop(seq))
            self.last = seq if self.last is None else max(self.last, seq)

    def _release_next(self) -> None:
        while self.last is not None and self.last + 1 in self._held:
            self.last += 1
            self._ready.append(self._held.pop(self.last))


class LocalSubscription(EventSource):
    """One subscriber of a connection's event stream. It holds at most
    `SERVER_EVENT_CHANNEL_CAPACITY` events; a reader that falls further behind misses the oldest
    and is told how many with a `lagged` event, as the runtime tells its own subscribers."""

    def __init__(self, connection: Connection, since: int | None) -> None:
        self._c = connection
        self.since = since
        self.order = Sequencer(since)
        self._queue: deque[ServerEvent] = deque()
        self._missed = 0
        self._wake = asyncio.Event()
        self._ended = False
        self._open = False
        self._closed = False

    async def open(self) -> None:
        if self._open:
            return
        await self._c.start()
        self._open = True
        self._c._subscribers.add(self)
        try:
            await self._c._joined(self)
        except BaseException:
            self._c._subscribers.discard(self)
            self._open = False
            raise

    def push(self, event: ServerEvent) -> None:
        if len(self._queue) >= SERVER_EVENT_CHANNEL_CAPACITY:
            self._queue.popleft()
            self._missed += 1
        self._queue.append(event)
        self._wake.set()

    def end(self) -> None:
        self._ended = True
        self._wake.set()

    async def next(self) -> ServerEvent | None:
        await self.open()
        while True:
            if self._missed:
                missed, self._missed = self._missed, 0
                position = self.order.last if self.order.last is not None else 0
                self.order.flush()
                return ServerEvent(seq=max(position, 0), event=RuntimeEventLagged(type="lagged", missed=missed))
            event = self.order.pop()
            if event is not None:
                if isinstance(event.event, RuntimeEventShuttingDown):
                    self._ended = True  # the runtime's last event
                    self._queue.clear()
                return event
            if self._queue:
                self.order.feed(self._queue.popleft())
                continue
            if self._ended:
                self.order.flush()  # nothing more is coming: what is held goes out in order
                if (event := self.order.pop()) is not None:
                    return event
                failure = self._c._failure
                if failure is not None and not self._c._shut_down and not self._closed:
                    raise failure
                return None
            self._wake.clear()
            await self._wake.wait()

    async def aclose(self) -> None:
        self._c._subscribers.discard(self)
        self._closed = True
        self.end()


class Connection(Transport):
    """A transport over one duplex channel: request ids, replies matched by id, local fan-out of
    events, and every waiter failed when the channel closes.

    A subclass opens the channel (`_open`), sends one message (`_send`, raising `ConnectionError`
    when the channel is gone), receives one decoded message (`_receive`: None at the end, a
    `TransportError` for a channel that breaks its contract), says what a message is
    (`_dispatch`, which calls `_on_reply` and `_on_event`), and says why the channel closed
    (`_close_reason`)."""

    def __init__(self) -> None:
        self._pending: dict[int, asyncio.Future[object]] = {}
        self._next_id = 0
        self._start_lock = asyncio.Lock()
        self._reader: asyncio.Task[None] | None = None
        self._subscribers: set[LocalSubscription] = set()
        self._failure: TransportError | None = None
        self._shut_down = False
        self._closed = False

    @abc.abstractmethod
    async def _open(self) -> None:
        """Opens the channel (connects, or starts the runtime)."""

    @abc.abstractmethod
    async def _send(self, message: bytes) -> None:
        """Sends one message (compact JSON); raises `ConnectionError` when the channel is gone."""

    @abc.abstractmethod
    async def _receive(self) -> object | None:
        """The next message, decoded from JSON; None once the channel has ended."""

    @abc.abstractmethod
    def _dispatch(self, doc: object) -> None:
        """Hands one received message to `_on_reply`, `_on_event`, or the transport's own use."""

    @abc.abstractmethod
    async def _close_reason(self, failure: TransportError | None) -> TransportError:
        """Why the channel closed (`failure` when the reader saw why), raised to every waiter."""

    async def _joined(self, sub: LocalSubscription) -> None:
        """Called when a subscriber joins the connection's event stream."""

    async def start(self) -> None:
        async with self._start_lock:
            if self._reader is not None:
                return
            if self._closed:
                raise TransportError("the transport is closed")
            await self._open()
            self._reader = asyncio.create_task(self._read_loop())

    async def _read_loop(self) -> None:
        failure: TransportError | None = None
        try:
            while (doc := await self._receive()) is not None:
                self._dispatch(doc)
        except TransportError as e:
            failure = e
        finally:
            self._failure = await self._close_reason(failure)
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(self._failure)
            for sub in list(self._subscribers):
                sub.end()

    def _on_reply(self, request_id: object, doc: object) -> None:
        if isinstance(request_id, int) and not isinstance(request_id, bool):
            fut = self._pending.get(request_id)
            if fut is not None and not fut.done():
                fut.set_result(doc)
        # A reply with a null id answers a message the runtime could not read; every message this
        # transport sends is readable, so there is nobody to give it to.

    def _on_event(self, raw: object) -> ServerEvent | None:
        try:
            event = ServerEvent.from_wire(raw)
        except ValidationError:
            return None  # not a valid event (a newer runtime's malformed kind): skip it, keep going
        if isinstance(event.event, RuntimeEventShuttingDown):
            self._shut_down = True
        for sub in list(self._subscribers):
            sub.push(event)
        return event

    async def request(self, method: str, params: JsonValue | _Omit, timeout: float | None) -> JsonValue:
        await self.start()
        if self._failure is not None:
            raise self._failure
        self._next_id += 1
        request_id = self._next_id
        message = encode_request(request_id, method, params)
        fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = fut
        try:
            try:
                await self._send(message)
            except ConnectionError as e:
                # The channel is gone: say why (an exit code, a close code), once the reader knows.
                if self._reader is not None:
                    with contextlib.suppress(Exception, asyncio.CancelledError):
                        await asyncio.wait_for(asyncio.shield(self._reader), 3.0)
                if self._failure is not None:
                    raise self._failure from e
                raise TransportError(f"cannot send to {self.where}: {e}") from e
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
        return LocalSubscription(self, since)

    async def _stop_reader(self) -> None:
        """Waits (briefly) for the reader to see the channel's end."""
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._reader, 2.0)
