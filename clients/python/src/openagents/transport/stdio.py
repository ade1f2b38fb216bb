"""JSONL-RPC over a child process's stdio: spawns `openagents serve --stdio --runner ID`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
from collections import deque
from collections.abc import Mapping, Sequence
from typing import IO, Literal

from pydantic import JsonValue, ValidationError

from .._generated.constants import SERVER_EVENT_CHANNEL_CAPACITY, SERVER_MAX_LINE_BYTES
from .._generated.models import RuntimeEventGap, RuntimeEventLagged, RuntimeEventShuttingDown, ServerEvent
from ..errors import ProtocolError, TransportError
from .base import EventSource, Transport, _Omit, decode_response, encode_request, is_notice, resume_after_gap

__all__ = ["STDERR_TAIL_BYTES", "StdioTransport", "find_binary"]

STDERR_TAIL_BYTES = 64 * 1024
"""How much of the server's stderr is kept (the newest bytes) when it is captured."""


def find_binary(binary: str | os.PathLike[str] | None = None) -> str:
    """The `openagents` binary: `binary`, else `$OPENAGENTS_BIN`, else `openagents` on `PATH`."""
    if binary is not None:
        return os.fspath(binary)
    env = os.environ.get("OPENAGENTS_BIN")
    if env:
        return env
    found = shutil.which("openagents")
    if found is None:
        raise TransportError(
            "cannot find the `openagents` binary: pass binary=..., set OPENAGENTS_BIN, or put it on PATH"
        )
    return found


class _Subscriber(EventSource):
    """One event stream over the connection's single stdio event feed.

    With `since`, the client sends `subscribe`; until the runtime's replay catches up, the feed
    may still carry events the previous subscription had already queued, which can be newer than
    the replay's first. Sequence numbers are contiguous on the runtime, so such an event is held
    until the ones before it arrive (or a `gap`/`lagged` notice says they will not), and the
    stream stays in order without loss or duplicates.
    """

    def __init__(self, transport: StdioTransport, since: int | None = None) -> None:
        self._t = transport
        self._queue: deque[ServerEvent] = deque()
        self._missed = 0
        self._last = -1 if since is None else since
        self._reorder = since is not None
        self._held: dict[int, ServerEvent] = {}
        self._wake = asyncio.Event()
        self._ended = False
        self._open = False
        self._closed = False

    async def open(self) -> None:
        if not self._open:
            await self._t.start()
            self._open = True
            self._t._subscribers.add(self)

    def _push(self, event: ServerEvent) -> None:
        if len(self._queue) >= SERVER_EVENT_CHANNEL_CAPACITY:
            # A slow subscriber misses the oldest events and is told how many, as on the server.
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
                self._release_held()
                missed, self._missed = self._missed, 0
                lagged = RuntimeEventLagged(type="lagged", missed=missed)
                return ServerEvent(seq=max(self._last, 0), event=lagged)
            if self._held and self._last + 1 in self._held:
                event = self._held.pop(self._last + 1)
                self._last = event.seq
                return event
            if self._queue:
                event = self._queue.popleft()
                if isinstance(event.event, RuntimeEventGap):
                    # The replay resumes after `resumed_at`: wait for that one, not the lost ones.
                    self._last = resume_after_gap(self._last, event.event)
                    for seq in [s for s in self._held if s <= self._last]:
                        del self._held[seq]
                elif is_notice(event):
                    self._release_held()  # `lagged`: some events will not come
                else:
                    if event.seq <= self._last:
                        continue  # a replay after `subscribe`: already delivered
                    if self._reorder and event.seq > self._last + 1:
                        self._held[event.seq] = event
                        if len(self._held) > SERVER_EVENT_CHANNEL_CAPACITY:
                            self._release_held()
                        continue
                    self._last = event.seq
                if isinstance(event.event, RuntimeEventShuttingDown):
                    self._ended = True  # the runtime's last event
                    self._queue.clear()
                return event
            if self._held and self._ended:
                self._release_held()  # nothing more is coming: what is held goes out in order
                continue
            if self._ended:
                if self._t._failure is not None and not self._t._shut_down and not self._closed:
                    raise self._t._failure
                return None
            self._wake.clear()
            await self._wake.wait()

    def _release_held(self) -> None:
        """Stops waiting for earlier events: what is held goes out next, in order."""
        self._reorder = False
        for seq in sorted(self._held, reverse=True):
            self._queue.appendleft(self._held.pop(seq))

    async def aclose(self) -> None:
        self._t._subscribers.discard(self)
        self._closed = True
        self._end()


class StdioTransport(Transport):
    """Starts `openagents serve --stdio --runner ID` and talks JSONL-RPC to it.

    The server starts only when the operator's configuration (`$OPENAGENTS_CONFIG`) enables it;
    its runners come from the operator's registry (`$OPENAGENTS_RUNNERS`), and it serves only
    `runner` and those more `--runner ID` arguments in `args` name. `stderr="capture"`
    keeps the newest `STDERR_TAIL_BYTES` of the server's stderr (`stderr_tail`) and puts it in
    the error when the server exits; `"inherit"` lets it through.

    stdio carries no headers: the client asks `status` once for the runtime's schema digest."""

    probes_schema = True

    def __init__(
        self,
        runner: str,
        *,
        binary: str | os.PathLike[str] | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stderr: Literal["capture", "inherit"] | int | IO[bytes] = "capture",
        close_timeout: float = 5.0,
    ) -> None:
        self.runner = runner
        self.command = [find_binary(binary), "serve", "--stdio", "--runner", runner, *args]
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        self._stderr_mode = stderr
        self._close_timeout = close_timeout
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._stderr_task: asyncio.Task[None] | None = None
        self._stderr_tail = bytearray()
        self._pending: dict[int, asyncio.Future[object]] = {}
        self._next_id = 0
        self._write_lock = asyncio.Lock()
        self._start_lock = asyncio.Lock()
        self._subscribers: set[_Subscriber] = set()
        self._failure: TransportError | None = None
        self._shut_down = False
        self._closed = False

    @property
    def where(self) -> str:
        return f"stdio (`{' '.join(self.command)}`)"

    @property
    def stderr_tail(self) -> str:
        """The newest bytes the server wrote on stderr (when captured)."""
        return self._stderr_tail.decode("utf-8", errors="replace")

    @property
    def pid(self) -> int | None:
        """The server process's id, once started."""
        return self._proc.pid if self._proc else None

    async def start(self) -> None:
        async with self._start_lock:
            if self._proc is not None:
                return
            if self._closed:
                raise TransportError("the transport is closed")
            if self._stderr_mode == "capture":
                stderr: int | IO[bytes] | None = subprocess.PIPE
            elif self._stderr_mode == "inherit":
                stderr = None
            else:
                stderr = self._stderr_mode
            try:
                self._proc = await asyncio.create_subprocess_exec(
                    *self.command,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    env=self._env,
                    cwd=self._cwd,
                    limit=SERVER_MAX_LINE_BYTES + 2,
                    start_new_session=True,
                )
            except OSError as e:
                raise TransportError(f"cannot start {self.command[0]}: {e}") from e
            self._reader = asyncio.create_task(self._read_loop())
            if self._proc.stderr is not None:
                self._stderr_task = asyncio.create_task(self._drain_stderr(self._proc.stderr))

    async def _drain_stderr(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            self._stderr_tail += chunk
            if len(self._stderr_tail) > STDERR_TAIL_BYTES:
                del self._stderr_tail[: len(self._stderr_tail) - STDERR_TAIL_BYTES]

    async def _read_loop(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        stdout = self._proc.stdout
        failure: TransportError | None = None
        try:
            while True:
                try:
                    line = await stdout.readline()
                except ValueError:
                    failure = ProtocolError(f"the server wrote a line longer than {SERVER_MAX_LINE_BYTES} bytes")
                    break
                if not line:
                    break
                if not line.strip():
                    continue
                try:
                    doc = json.loads(line)
                except ValueError as e:
                    failure = ProtocolError(f"the server wrote a line that is not JSON: {e}")
                    break
                if isinstance(doc, dict) and "event" in doc and "id" not in doc:
                    self._on_event(doc["event"])
                    continue
                if isinstance(doc, dict) and isinstance(doc.get("id"), int):
                    fut = self._pending.get(doc["id"])
                    if fut is not None and not fut.done():
                        fut.set_result(doc)
                # A response with a null id answers a request the server could not read; every
                # request this transport sends is readable, so there is nobody to give it to.
        except asyncio.CancelledError:
            raise
        finally:
            await self._on_exit(failure)

    def _on_event(self, raw: object) -> None:
        try:
            event = ServerEvent.from_wire(raw)
        except ValidationError:
            return  # not a valid event (a newer server's malformed kind): skip it, keep going
        if isinstance(event.event, RuntimeEventShuttingDown):
            self._shut_down = True
        for sub in list(self._subscribers):
            sub._push(event)

    async def _on_exit(self, failure: TransportError | None) -> None:
        if self._stderr_task is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._stderr_task), 1.0)
        code = None
        if self._proc is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                code = await asyncio.wait_for(self._proc.wait(), 2.0)
        if failure is None:
            tail = self.stderr_tail.strip()
            detail = f": {tail[-2000:]}" if tail else ""
            failure = TransportError(f"the server exited (code {code}){detail}")
        self._failure = failure
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(failure)
        for sub in list(self._subscribers):
            sub._end()

    async def request(self, method: str, params: JsonValue | _Omit, timeout: float | None) -> JsonValue:
        await self.start()
        if self._failure is not None:
            raise self._failure
        self._next_id += 1
        request_id = self._next_id
        line = encode_request(request_id, method, params)
        fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = fut
        try:
            assert self._proc is not None and self._proc.stdin is not None
            try:
                async with self._write_lock:
                    self._proc.stdin.write(line + b"\n")
                    await self._proc.stdin.drain()
            except (ConnectionError, RuntimeError) as e:
                # The server is gone: say why (its exit code and stderr), once the reader knows.
                if self._reader is not None:
                    with contextlib.suppress(Exception, asyncio.CancelledError):
                        await asyncio.wait_for(asyncio.shield(self._reader), 3.0)
                if self._failure is not None:
                    raise self._failure from e
                raise TransportError(f"cannot write to the server: {e}") from e
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
        proc = self._proc
        if proc is None:
            return
        if proc.returncode is None:
            if proc.stdin is not None:
                # End of input: the server answers what is in flight and exits.
                with contextlib.suppress(Exception):
                    proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), self._close_timeout)
            except asyncio.TimeoutError:
                # Ctrl-C, as the server understands it: interrupt the turn (its runner is stopped
                # with it), publish the last event, exit. Killed if that does not happen soon.
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGINT)
                try:
                    await asyncio.wait_for(proc.wait(), 2.0)
                except asyncio.TimeoutError:
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    await proc.wait()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._reader, 2.0)
        if self._stderr_task is not None and not self._stderr_task.done():
            self._stderr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._stderr_task
