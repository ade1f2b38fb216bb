"""The runner side of the contract, for runners written in Python: read one bounded `Turn`, run
the application, write bounded events, and always end with exactly one terminal event.

```python
from openagents.runner import serve_streaming

def run(turn, progress):
    for word in turn.task.split():
        progress.text(word)
    return turn.task

serve_streaming(run)
```

The bounds are the Rust helper's (`openagents_runner::serve`): the request line is at most
`MAX_FRAME` bytes (a longer one is refused without being read whole), every event line is at most
`MAX_FRAME` bytes, everything written to stdout at most `MAX_OUTPUT` bytes with room always kept
for the terminal event, and a result too large for one line becomes a `failed` event saying so.
While `run` runs, `print()` goes to stderr: stdout belongs to the protocol.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import BinaryIO

from pydantic import ValidationError

from . import _rt
from ._generated.constants import MAX_FRAME, MAX_OUTPUT, VERSION
from ._generated.models import ApprovalAnswer, Turn
from .validation import violations

__all__ = [
    "Answer",
    "Failed",
    "LineTooLong",
    "NoAnswer",
    "OutputFull",
    "Progress",
    "ProgressError",
    "ProgressIOError",
    "read_line",
    "serve_once",
    "serve_streaming",
]

TERMINAL_RESERVE = MAX_FRAME + 1
"""Room kept for the terminal event: one full line and its newline."""


class Failed(_rt.OpenAgentsError):
    """Raise it from `run` to end the turn with a `failed` event carrying exactly its message."""


class ProgressError(_rt.OpenAgentsError):
    """Why a progress event was not written (nothing was)."""


class LineTooLong(ProgressError):
    """The event would be a line longer than `MAX_FRAME`; send smaller pieces."""

    def __init__(self, size: int) -> None:
        super().__init__(
            f"a progress event of {size} bytes is longer than MAX_FRAME ({MAX_FRAME} bytes); send it in smaller pieces"
        )
        self.size = size


class OutputFull(ProgressError):
    """The turn's output would exceed `MAX_OUTPUT` (room for the terminal event is kept)."""

    def __init__(self) -> None:
        super().__init__(f"the turn's output would exceed MAX_OUTPUT ({MAX_OUTPUT} bytes)")


class ProgressIOError(ProgressError):
    """Writing to stdout failed (the host has gone away)."""


class NoAnswer(ProgressError):
    """The host did not answer an approval request (stdin ended, or the answer was not valid)."""

    def __init__(self, why: str) -> None:
        super().__init__(f"the host did not answer the approval request: {why}")


class _TooLong(ValueError):
    pass


def read_line(stream: BinaryIO, limit: int) -> bytes | None:
    """Reads one line (without `\\n`, and without a `\\r` before it) of at most `limit` bytes;
    `None` at end of input. Never holds more than `limit` + 2 bytes of a line: a longer line raises
    `ValueError` with only that much of it read."""
    raw = stream.readline(limit + 2)
    if not raw:
        return None
    if raw.endswith(b"\n"):
        line = raw[:-1]
        if line.endswith(b"\r"):
            line = line[:-1]
        if len(line) > limit:
            raise _TooLong()
        return line
    if len(raw) > limit:
        raise _TooLong()
    return raw[:-1] if raw.endswith(b"\r") else raw


def _encode(event: dict[str, str]) -> bytes:
    # Compact JSON with non-ASCII as UTF-8, byte for byte what the Rust side writes.
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _describe(v_pointer: str, message: str) -> str:
    return f"{v_pointer or '(root)'}: {message}"


def _read_turn(stream: BinaryIO) -> Turn:
    try:
        line = read_line(stream, MAX_FRAME)
    except _TooLong:
        raise Failed(f"the request line is longer than MAX_FRAME ({MAX_FRAME} bytes); it was refused unread") from None
    except OSError as e:
        raise Failed(f"reading the request failed: {e}") from None
    if line is None:
        raise Failed("no request: stdin ended before a turn line")
    try:
        document = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise Failed(f"the request is not JSON: invalid UTF-8 at byte offset {e.start}") from None
    except ValueError as e:
        raise Failed(f"the request is not JSON: {e}") from None
    try:
        return Turn.from_wire(document, strict=True)
    except ValidationError as e:
        found = violations(e)
        if any(v.pointer == "/schema" and v.keyword == "const" for v in found):
            shown = json.dumps(document.get("schema"), ensure_ascii=False, separators=(",", ":"))
            raise Failed(f'unsupported turn schema {shown}: this runner speaks "{VERSION}"') from None
        listed = "; ".join(_describe(v.pointer, v.message) for v in found)
        raise Failed(f"the request is not a valid turn: {listed}") from None


@dataclass(frozen=True)
class Answer:
    """The host's answer to `Progress.ask`."""

    approved: bool
    """Whether the runner may go ahead. With nobody authorised to answer, this is False."""
    answer: str | None
    """A free-form answer, when the person gave one."""


class Progress:
    """Writes `text` events for a streaming runner, within the contract's bounds, and asks the
    host for approval."""

    def __init__(self, out: BinaryIO, stdin: BinaryIO) -> None:
        self._out = out
        self._in = stdin
        self._written = 0
        self._asked = 0

    @property
    def written(self) -> int:
        """Bytes written so far, newlines included."""
        return self._written

    def text(self, text: str) -> None:
        """Writes one `text` event and flushes it, so the host sees progress as it happens.

        Raises `LineTooLong` or `OutputFull` (nothing is written), or `ProgressIOError`."""
        self._write(_encode({"type": "text", "text": text}))

    def ask(self, prompt: str) -> Answer:
        """Asks the host for approval and waits for its answer. Approvals fail closed: when nobody
        authorised can answer, the answer is a denial.

        Raises a `ProgressError` when the request would break a bound, on I/O, or `NoAnswer`."""
        self._asked += 1
        ask_id = f"ask-{self._asked}"
        self._write(_encode({"type": "approval_request", "id": ask_id, "prompt": prompt}))
        try:
            reply = read_line(self._in, MAX_FRAME)
        except _TooLong:
            raise NoAnswer(f"line longer than {MAX_FRAME} bytes") from None
        except OSError as e:
            raise NoAnswer(str(e)) from None
        if reply is None:
            raise NoAnswer("stdin ended")
        try:
            answer = ApprovalAnswer.from_json(reply, strict=True)
        except ValidationError as e:
            raise NoAnswer("; ".join(_describe(v.pointer, v.message) for v in violations(e))) from None
        if answer.id != ask_id:
            raise NoAnswer(f"the answer is for `{answer.id}`, not `{ask_id}`")
        return Answer(approved=answer.approved, answer=answer.answer)

    def _write(self, line: bytes) -> None:
        if len(line) > MAX_FRAME:
            raise LineTooLong(len(line))
        if self._written + len(line) + 1 > MAX_OUTPUT - TERMINAL_RESERVE:
            raise OutputFull()
        try:
            self._out.write(line + b"\n")
            self._out.flush()
        except OSError as e:
            raise ProgressIOError(f"writing progress failed: {e}") from e
        self._written += len(line) + 1


def _terminal(out: BinaryIO, ok: bool, text: str) -> None:
    event = {"type": "completed", "result": text} if ok else {"type": "failed", "message": text}
    try:
        line = _encode(event)
    except UnicodeEncodeError:
        what = "result" if ok else "failure message"
        line = _encode({"type": "failed", "message": f"the {what} is not valid Unicode (it holds a lone surrogate)"})
    if len(line) > MAX_FRAME:
        what = "result" if ok else "failure message"
        message = (
            f"the {what} is too large: {len(line)} bytes encoded,"
            f" and a line may be at most MAX_FRAME ({MAX_FRAME}) bytes"
        )
        line = _encode({"type": "failed", "message": message})
    out.write(line + b"\n")
    out.flush()


def _outcome(call: Callable[[], object]) -> tuple[bool, str]:
    try:
        result = call()
        if inspect.isawaitable(result):
            result = asyncio.run(_await(result))
    except Failed as e:
        return False, str(e)
    except Exception as e:
        traceback.print_exc(file=sys.stderr)
        return False, f"{type(e).__name__}: {e}"
    if not isinstance(result, str):
        return False, f"the runner returned {type(result).__name__}, not a str result"
    return True, result


async def _await(value: Awaitable[object]) -> object:
    return await value


def _serve(run: Callable[[Turn, Progress], object], stdin: BinaryIO | None, stdout: BinaryIO | None) -> None:
    inp = stdin if stdin is not None else sys.stdin.buffer
    out = stdout if stdout is not None else sys.stdout.buffer
    try:
        turn = _read_turn(inp)
    except Failed as e:
        _terminal(out, False, str(e))
        return
    progress = Progress(out, inp)
    saved = sys.stdout
    sys.stdout = sys.stderr  # print() in application code must not corrupt the protocol
    try:
        ok, text = _outcome(lambda: run(turn, progress))
    finally:
        sys.stdout = saved
    _terminal(out, ok, text)


def serve_once(
    run: Callable[[Turn], str] | Callable[[Turn], Awaitable[str]],
    *,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
) -> None:
    """Reads one bounded JSON request, invokes `run`, and writes one result.

    Reads at most `MAX_FRAME` bytes up to the first newline (a longer request is refused without
    being buffered whole), validates the `Turn` with the generated models, calls `run` (a function
    or a coroutine function) and writes one `completed` event with the string it returns, or one
    `failed` event when it raises (`Failed(message)` for a message of your own), then flushes.
    Every problem with the request is answered with a `failed` event; `run` is not called."""
    _serve(lambda turn, _progress: run(turn), stdin, stdout)


def serve_streaming(
    run: Callable[[Turn, Progress], str] | Callable[[Turn, Progress], Awaitable[str]],
    *,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
) -> None:
    """`serve_once` for runners that report progress: `run` gets a `Progress` to write `text`
    events with (and to `ask` for approval), which refuses to exceed `MAX_OUTPUT` in total (room
    for the terminal event is always kept)."""
    _serve(run, stdin, stdout)
