"""`serve_once` and `serve_streaming`: the runner side of the contract at its bounds (the same
cases as `crates/runner/tests/serve.rs`), and a Python runner under the real `openagents run`."""

from __future__ import annotations

import io
import json
from collections.abc import Awaitable, Callable

import pytest

from openagents.constants import MAX_FRAME, MAX_OUTPUT, VERSION
from openagents.models import Turn
from openagents.runner import Failed, LineTooLong, OutputFull, Progress, serve_once, serve_streaming

from .conftest import Setup


def turn_line(task: str) -> str:
    return (
        f'{{"schema":"{VERSION}","assignment":"a1","conversation":"c1","agent":{{"runner":"echo"}},'
        f'"task":"{task}","cwd":"/"}}'
    )


def turn_line_of_len(n: int) -> str:
    return turn_line("t" * (n - len(turn_line(""))))


def events(out: bytes) -> list[dict[str, str]]:
    lines = out.decode("utf-8").splitlines()
    for line in lines:
        assert len(line.encode("utf-8")) <= MAX_FRAME, f"a line of {len(line)} bytes"
    return [json.loads(line) for line in lines]


def serve(request: str, run: Callable[[Turn], str] | Callable[[Turn], Awaitable[str]]) -> list[dict[str, str]]:
    out = io.BytesIO()
    serve_once(run, stdin=io.BytesIO(request.encode("utf-8")), stdout=out)
    return events(out.getvalue())


def test_one_turn_one_terminal_event() -> None:
    assert serve(turn_line("hi") + "\n", lambda t: "done") == [{"type": "completed", "result": "done"}]
    assert serve(turn_line("hi"), lambda t: "no newline is fine") == [
        {"type": "completed", "result": "no newline is fine"}
    ]

    def fails(_: Turn) -> str:
        raise Failed("could not")

    assert serve(turn_line("hi") + "\n", fails) == [{"type": "failed", "message": "could not"}]

    def crashes(_: Turn) -> str:
        raise RuntimeError("boom")

    assert serve(turn_line("hi") + "\n", crashes) == [{"type": "failed", "message": "RuntimeError: boom"}]


async def _async_run(turn: Turn) -> str:
    return turn.task.upper()


def test_a_coroutine_function_is_awaited() -> None:
    assert serve(turn_line("hi") + "\n", _async_run) == [{"type": "completed", "result": "HI"}]


@pytest.mark.parametrize(
    ("request_line", "needle"),
    [
        ("", "no request"),
        ("not json\n", "the request is not JSON"),
        (
            turn_line("hi").replace(VERSION, "openagents.agent.runner.v0") + "\n",
            'unsupported turn schema "openagents.agent.runner.v0": this runner speaks "openagents.agent.runner.v1"',
        ),
        (turn_line("hi").replace('"runner":"echo"', '"runner":"echo","command":"/bin/sh"') + "\n", "/agent/command"),
        (turn_line("hi").replace('"cwd":"/"', '"cwd":"relative"') + "\n", "/cwd"),
        ('{"schema":' + "\xff" + "}\n", "the request is not JSON"),
    ],
)
def test_refused_requests_are_answered_with_a_failed_event(request_line: str, needle: str) -> None:
    called: list[Turn] = []

    def run(turn: Turn) -> str:
        called.append(turn)
        return ""

    got = serve(request_line, run)
    assert called == [], "the application must not run"
    assert len(got) == 1 and got[0]["type"] == "failed"
    assert needle in got[0]["message"]


def test_request_line_at_max_frame_and_one_byte_past() -> None:
    at = turn_line_of_len(MAX_FRAME)
    assert len(at) == MAX_FRAME
    got = serve(at + "\n", lambda t: str(len(t.task)))
    assert got[0]["type"] == "completed"
    got = serve(at + "\r\n", lambda t: "crlf")
    assert got == [{"type": "completed", "result": "crlf"}]
    past = turn_line_of_len(MAX_FRAME + 1)
    got = serve(past + "\n", lambda t: "")
    assert got[0]["type"] == "failed" and "longer than MAX_FRAME" in got[0]["message"]


def test_a_longer_request_is_not_read_whole() -> None:
    class Counting(io.BytesIO):
        read_total = 0

        def readline(self, size: int | None = -1) -> bytes:
            line = super().readline(size)
            Counting.read_total += len(line)
            return line

    stdin = Counting((turn_line_of_len(10 * MAX_FRAME) + "\n").encode())
    out = io.BytesIO()
    serve_once(lambda t: "", stdin=stdin, stdout=out)
    assert Counting.read_total <= MAX_FRAME + 2
    assert events(out.getvalue())[0]["type"] == "failed"


def test_a_result_too_large_becomes_a_failed_event() -> None:
    overhead = len('{"type":"completed","result":""}')
    fits = "r" * (MAX_FRAME - overhead)
    assert serve(turn_line("hi"), lambda t: fits) == [{"type": "completed", "result": fits}]
    got = serve(turn_line("hi"), lambda t: fits + "r")
    assert got[0]["type"] == "failed" and "result is too large" in got[0]["message"]
    # Multi-byte characters count in bytes, as encoded.
    got = serve(turn_line("hi"), lambda t: "é" * (MAX_FRAME // 2))
    assert got[0]["type"] == "failed" and "result is too large" in got[0]["message"]


def test_streaming_refuses_to_exceed_max_output() -> None:
    refused: list[Exception] = []

    def run(_: Turn, progress: Progress) -> str:
        while True:
            try:
                progress.text("x" * 60_000)
            except OutputFull as e:
                refused.append(e)
                return "stopped"

    out = io.BytesIO()
    serve_streaming(run, stdin=io.BytesIO(turn_line("hi").encode()), stdout=out)
    assert refused
    assert len(out.getvalue()) <= MAX_OUTPUT
    evs = events(out.getvalue())
    assert evs[-1] == {"type": "completed", "result": "stopped"}
    assert all(e["type"] == "text" for e in evs[:-1])

    def too_long(_: Turn, progress: Progress) -> str:
        try:
            progress.text("y" * MAX_FRAME)
        except LineTooLong:
            return "ok"
        return "not refused"

    out = io.BytesIO()
    serve_streaming(too_long, stdin=io.BytesIO(turn_line("hi").encode()), stdout=out)
    assert events(out.getvalue()) == [{"type": "completed", "result": "ok"}]


def test_print_in_the_application_goes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    def run(turn: Turn) -> str:
        print("a log line")
        return "done"

    assert serve(turn_line("hi"), run) == [{"type": "completed", "result": "done"}]
    assert "a log line" in capsys.readouterr().err


def test_ask_reads_the_hosts_answer() -> None:
    answer = '{"type":"approval_answer","id":"ask-1","approved":true,"answer":"go"}\n'
    got: list[object] = []

    def run(turn: Turn, progress: Progress) -> str:
        a = progress.ask("may I?")
        got.append(a)
        return "approved" if a.approved else "denied"

    out = io.BytesIO()
    serve_streaming(run, stdin=io.BytesIO((turn_line("hi") + "\n" + answer).encode()), stdout=out)
    evs = events(out.getvalue())
    assert evs[0] == {"type": "approval_request", "id": "ask-1", "prompt": "may I?"}
    assert evs[-1] == {"type": "completed", "result": "approved"}


def test_the_python_echo_runner_matches_the_rust_one(setup: Setup) -> None:
    for task in ["hello world", "hello wörld 😀  spaced"]:
        py = setup.run("run", "--json", "--runner", "py-echo", "--assignment", "a1", "--conversation", "c1", task)
        rs = setup.run("run", "--json", "--runner", "echo", "--assignment", "a1", "--conversation", "c1", task)
        assert py.returncode == 0, py.stderr
        assert rs.returncode == 0, rs.stderr

        def shape(out: str) -> list[dict[str, object]]:
            evs = [json.loads(line)["event"] for line in out.splitlines()]
            for e in evs:
                e.pop("runner", None)
            return evs

        assert shape(py.stdout) == shape(rs.stdout)
        plain = setup.run("run", "--runner", "py-echo", task)
        assert plain.returncode == 0 and plain.stdout == setup.run("run", "--runner", "echo", task).stdout
