"""JSONL-RPC over a child process's stdio: spawns `openagents serve --stdio --runner ID`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from typing import IO, Literal

from .._generated.constants import SERVER_MAX_LINE_BYTES
from ..errors import ProtocolError, TransportError
from .connection import Connection

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


class StdioTransport(Connection):
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
        super().__init__()
        self.runner = runner
        self.command = [find_binary(binary), "serve", "--stdio", "--runner", runner, *args]
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        self._stderr_mode = stderr
        self._close_timeout = close_timeout
        self._proc: asyncio.subprocess.Process | None = None
        self._stderr_task: asyncio.Task[None] | None = None
        self._stderr_tail = bytearray()
        self._write_lock = asyncio.Lock()

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

    async def _open(self) -> None:
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
        if self._proc.stderr is not None:
            self._stderr_task = asyncio.create_task(self._drain_stderr(self._proc.stderr))

    async def _drain_stderr(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            self._stderr_tail += chunk
            if len(self._stderr_tail) > STDERR_TAIL_BYTES:
                del self._stderr_tail[: len(self._stderr_tail) - STDERR_TAIL_BYTES]

    async def _receive(self) -> object | None:
        assert self._proc is not None and self._proc.stdout is not None
        while True:
            try:
                line = await self._proc.stdout.readline()
            except ValueError:
                raise ProtocolError(f"the server wrote a line longer than {SERVER_MAX_LINE_BYTES} bytes") from None
            if not line:
                return None
            if line.strip():
                break
        try:
            doc: object = json.loads(line)
        except ValueError as e:
            raise ProtocolError(f"the server wrote a line that is not JSON: {e}") from None
        return doc

    def _dispatch(self, doc: object) -> None:
        if isinstance(doc, dict) and "event" in doc and "id" not in doc:
            self._on_event(doc["event"])
        elif isinstance(doc, dict):
            self._on_reply(doc.get("id"), doc)

    async def _send(self, message: bytes) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            async with self._write_lock:
                self._proc.stdin.write(message + b"\n")
                await self._proc.stdin.drain()
        except RuntimeError as e:  # the pipe is closed
            raise ConnectionError(str(e)) from e

    async def _close_reason(self, failure: TransportError | None) -> TransportError:
        if self._stderr_task is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._stderr_task), 1.0)
        code = None
        if self._proc is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                code = await asyncio.wait_for(self._proc.wait(), 2.0)
        if failure is not None:
            return failure
        tail = self.stderr_tail.strip()
        detail = f": {tail[-2000:]}" if tail else ""
        return TransportError(f"the server exited (code {code}){detail}")

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
        await self._stop_reader()
        if self._stderr_task is not None and not self._stderr_task.done():
            self._stderr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._stderr_task
