#!/usr/bin/env python3
"""Python client overhead, side by side with raw httpx, in one run (a benchmark, not a test).

1. `status` calls per second over HTTP: the typed client (`AsyncClient.status()`, `Client.status()`:
   request built from the generated method, response checked and decoded into `RuntimeStatus`)
   against raw httpx posting the same JSON body and decoding it with `json.loads`; one call at a
   time, and 16 in flight.
2. Event throughput: the client's SSE parser and `ServerEvent` validation against `json.loads` of
   each `data:` line (the bare SSE parse), over the same recorded event stream (no network, so it is the client's own
   cost), and end to end: one turn of 20,000 text events through a real runtime.

It starts `openagents serve --http --runner echo` itself, with a temporary operator configuration
and registry; build first with `cargo build --release -p openagents-cli -p openagents-runner`
(or pass `--build debug` for a debug build).

    .venv/bin/python clients/python/bench/bench_status.py [--seconds 2] [--rounds 3] [--build release] [--markdown]

Each measurement runs `--rounds` times, and each round's ratio is reported with their median: on a
loaded machine the rates drift, the ratio of one round much less. Within a round of a `status`
measurement raw and client calls alternate in batches of 50 ms, and besides calls per second each
side's CPU time per call in this process (`time.process_time`) is compared: that is the client's
own cost, which neither the server nor waiting for it enters.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import cast

import httpx

from openagents import AsyncClient, Client
from openagents.models import RuntimeEventLagged, RuntimeEventTurnCompleted, RuntimeEventTurnFailed
from openagents.transport.http import HttpTransport

REPO = Path(__file__).resolve().parents[3]
TERMINAL = (RuntimeEventTurnCompleted, RuntimeEventTurnFailed)


def start_server(tmp: Path, build: str = "release") -> tuple[subprocess.Popen[bytes], str, str]:
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / build
    (tmp / "config.toml").write_text("[capabilities.server]\nenabled = true\n")
    (tmp / "runners.toml").write_text(
        f"[runners.echo]\ncommand = {json.dumps(str(target / 'openagents-runner-echo'))}\n"
    )
    env = {
        **os.environ,
        "OPENAGENTS_CONFIG": str(tmp / "config.toml"),
        "OPENAGENTS_RUNNERS": str(tmp / "runners.toml"),
        "XDG_RUNTIME_DIR": str(tmp),
    }
    proc = subprocess.Popen(
        [str(target / "openagents"), "serve", "--http", "--runner", "echo"], env=env, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    ready = json.loads(proc.stdout.readline())
    return proc, ready["url"], ready["token_file"]


Side = tuple[int, float, float]
"""What one side of a comparison did: calls made, wall-clock seconds, and this process's CPU
seconds (`time.process_time`: the client's own work, not the server's, not waiting)."""

BATCH_SECONDS = 0.05
"""How long each side runs before the other takes its turn, within a round."""


async def interleaved_async(
    raw: Callable[[], Awaitable[object]], typed: Callable[[], Awaitable[object]], seconds: float, concurrency: int = 1
) -> tuple[Side, Side]:
    """Raw and typed calls in alternating batches of `BATCH_SECONDS` for `seconds` in all, with
    `concurrency` calls in flight; a burst of load or a slow stretch of the machine then falls on
    both sides alike, not on one of them."""
    for call in (raw, typed):
        for _ in range(50):
            await call()
    sides = [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]

    async def batch(side: list[float], call: Callable[[], Awaitable[object]]) -> None:
        n = 0
        start, cpu = time.perf_counter(), time.process_time()
        deadline = start + BATCH_SECONDS

        async def worker() -> None:
            nonlocal n
            while time.perf_counter() < deadline:
                await call()
                n += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        tally(side, n, start, cpu)

    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for side, call in zip(sides, (raw, typed), strict=True):
            await batch(side, call)
    return as_sides(sides)


def interleaved_sync(raw: Callable[[], object], typed: Callable[[], object], seconds: float) -> tuple[Side, Side]:
    """`interleaved_async` for blocking calls, one at a time."""
    for call in (raw, typed):
        for _ in range(50):
            call()
    sides = [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for side, call in zip(sides, (raw, typed), strict=True):
            n = 0
            start, cpu = time.perf_counter(), time.process_time()
            deadline = start + BATCH_SECONDS
            while time.perf_counter() < deadline:
                call()
                n += 1
            tally(side, n, start, cpu)
    return as_sides(sides)


def tally(side: list[float], calls: int, start: float, cpu: float) -> None:
    """Adds one batch, begun at `start` (wall clock) and `cpu` (process time), to a side."""
    side[0] += calls
    side[1] += time.perf_counter() - start
    side[2] += time.process_time() - cpu


def as_sides(sides: list[list[float]]) -> tuple[Side, Side]:
    (rn, rw, rc), (tn, tw, tc) = sides
    return (int(rn), rw, rc), (int(tn), tw, tc)


def median(xs: list[float]) -> float:
    xs = sorted(xs)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


Row = tuple[str, float, float, list[float], list[float]]
"""A measurement: its name, the raw and the client's median rates, each round's ratio of rates
(client / raw), and each round's ratio of CPU per call (raw / client; empty where not measured)."""


def row(name: str, pairs: list[tuple[float, float]], cpu: list[float] | None = None) -> Row:
    """Rounds of (raw, client) rates, measured in the same round: the ratio of each round, so a
    machine that speeds up or slows down between rounds moves both sides of a ratio alike."""
    return name, median([r for r, _ in pairs]), median([t for _, t in pairs]), [t / r for r, t in pairs], cpu or []


def status_row(name: str, rounds: list[tuple[Side, Side]]) -> Row:
    """A `status` row from interleaved rounds: calls per second, and CPU per call."""
    pairs = [(r[0] / r[1], t[0] / t[1]) for r, t in rounds]
    cpu = [(r[2] / r[0]) / (t[2] / t[0]) for r, t in rounds]
    return row(name, pairs, cpu)


async def status_rates(url: str, token: str, seconds: float, rounds: int) -> list[Row]:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    # The bytes the client sends for its first call (the seed's form, without `jsonrpc`).
    body = json.dumps({"id": 1, "method": "status"}, separators=(",", ":")).encode()
    rows = []
    async with httpx.AsyncClient(base_url=url, headers=headers) as raw, AsyncClient.http(url, token=token) as client:

        async def raw_status() -> object:
            r = await raw.post("rpc", content=body)
            return json.loads(r.content)["result"]

        async def typed_status() -> object:
            return await client.status()

        for conc in (1, 16):
            measured = [await interleaved_async(raw_status, typed_status, seconds, conc) for _ in range(rounds)]
            rows.append(status_row(f"status, async, {conc} in flight", measured))
    with httpx.Client(base_url=url, headers=headers) as raw_sync, Client.http(url, token=token) as sync:

        def raw_blocking() -> object:
            return json.loads(raw_sync.post("rpc", content=body).content)["result"]

        measured = [interleaved_sync(raw_blocking, sync.status, seconds) for _ in range(rounds)]
        rows.append(status_row("status, blocking Client", measured))
    return rows


async def record_stream(url: str, token: str, words: int) -> tuple[bytes, int]:
    """The raw SSE bytes of one turn of `words` text events (replayed from the runtime's buffer)."""
    async with AsyncClient.http(url, token=token) as client:
        before = (await client.status()).last_seq
        await client.submit(" ".join(["w"] * words))
        after = (await client.status()).last_seq
    chunks = []
    headers = {"Authorization": f"Bearer {token}", "Last-Event-ID": str(max(before, after - 1000))}
    async with httpx.AsyncClient(base_url=url) as raw, raw.stream("GET", "events", headers=headers) as r:
        async for chunk in r.aiter_raw():
            chunks.append(chunk)
            if b"turn_completed" in chunk:
                break
    data = b"".join(chunks)
    return data, data.count(b"\ndata:") + data.startswith(b"data:")


def parse_rates(data: bytes, events: int, seconds: float, rounds: int) -> Row:
    """Events per second: `json.loads` of each data line, against the client's SSE parser with
    `ServerEvent` validation (the same code path as a live stream)."""
    from openagents.transport.http import _Sse

    def raw() -> None:
        for line in data.split(b"\n"):
            if line.startswith(b"data:"):
                json.loads(line[5:])

    class Replay:
        def __init__(self) -> None:
            self.done = False

        def __aiter__(self) -> Replay:
            return self

        async def __anext__(self) -> bytes:
            if self.done:
                raise StopAsyncIteration
            self.done = True
            return data

    async def typed_once() -> None:
        sse = _Sse(cast(HttpTransport, None), None)
        sse._chunks = Replay()
        while await sse._event() is not None:
            pass

    def typed() -> None:
        asyncio.run(typed_once())

    def per_second(fn: Callable[[], None]) -> float:
        fn()
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            fn()
            n += 1
        return n * events / (time.perf_counter() - start)

    pairs = [(per_second(raw), per_second(typed)) for _ in range(rounds)]
    return row(f"events: SSE parse + decode, no network ({events} events; events/s)", pairs)


async def end_to_end(url: str, token: str, words: int) -> tuple[tuple[float, int, int], tuple[float, int, int]]:
    """One turn of `words` text events, watched live by raw httpx and then by the client: events
    per second delivered, events delivered, events missed (`lagged`)."""

    async def raw_watch(client: AsyncClient) -> tuple[float, int, int]:
        headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
        got = missed = 0
        async with (
            httpx.AsyncClient(base_url=url, timeout=None) as raw,
            raw.stream("GET", "events", headers=headers) as r,
        ):
            submit = asyncio.create_task(client.submit(" ".join(["w"] * words)))
            start = time.perf_counter()
            async for line in r.aiter_lines():
                if not line.startswith("data:"):
                    continue
                ev = json.loads(line[5:])["event"]
                got += 1
                if ev["type"] == "lagged":
                    missed += ev["missed"]
                if ev["type"] in ("turn_completed", "turn_failed"):
                    break
            elapsed = time.perf_counter() - start
            await submit
        return got / elapsed, got, missed

    async def typed_watch(client: AsyncClient) -> tuple[float, int, int]:
        got = missed = 0
        async with client.events() as events:
            submit = asyncio.create_task(client.submit(" ".join(["w"] * words)))
            start = time.perf_counter()
            async for ev in events:
                got += 1
                if isinstance(ev.event, RuntimeEventLagged):
                    missed += ev.event.missed
                if isinstance(ev.event, TERMINAL):
                    break
            elapsed = time.perf_counter() - start
            await submit
        return got / elapsed, got, missed

    async with AsyncClient(HttpTransport(url, token=token)) as client:
        raw = await raw_watch(client)
        typed = await typed_watch(client)
    return raw, typed


def fmt(n: float) -> str:
    return f"{n:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=2.0, help="how long each measurement runs")
    parser.add_argument("--words", type=int, default=20000, help="text events in the end-to-end turn")
    parser.add_argument("--rounds", type=int, default=3, help="back-to-back rounds of each measurement")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown section for BENCHMARKS.md")
    parser.add_argument(
        "--build", choices=("release", "debug"), default="release", help="which cargo build of the runtime to start"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc, url, token_file = start_server(Path(tmp), args.build)
        token = Path(token_file).read_text().strip()
        try:
            rows = asyncio.run(status_rates(url, token, args.seconds, args.rounds))
            data, events = asyncio.run(record_stream(url, token, 1000))
            rows.append(parse_rates(data, events, args.seconds, args.rounds))
            (raw_rate, raw_got, raw_missed), (typed_rate, typed_got, typed_missed) = asyncio.run(
                end_to_end(url, token, args.words)
            )
        finally:
            proc.kill()
            proc.wait()
    lines = [
        f"| measurement | raw | openagents client | client / raw, median of {args.rounds} rounds | each round"
        " | CPU per call, raw / client: median | each round |",
        "| --- | ---: | ---: | ---: | --- | ---: | --- |",
    ]
    for name, raw, typed, ratios, cpu in rows:
        unit = "" if name.startswith("events") else " (calls/s)"
        each = ", ".join(f"{r:.2f}" for r in ratios)
        cpu_each = ", ".join(f"{r:.2f}" for r in cpu)
        cpu_median = f"{median(cpu):.2f}" if cpu else ""
        lines.append(
            f"| {name}{unit} | {fmt(raw)} | {fmt(typed)} | {median(ratios):.2f} | {each} | {cpu_median} | {cpu_each} |"
        )
    lines.append(
        f"| events: one live turn of {args.words} text events (events/s delivered) | {fmt(raw_rate)} |"
        f" {fmt(typed_rate)} | {typed_rate / raw_rate:.2f} | one round | | |"
    )
    lines.append(
        f"| events: delivered / missed (`lagged`) in that turn | {raw_got} / {raw_missed} |"
        f" {typed_got} / {typed_missed} | | | | |"
    )
    table = "\n".join(lines)
    if args.markdown:
        print("## Python client overhead\n")
        print(
            "`status` calls per second over HTTP and event throughput, the Python client (generated methods,"
            " pydantic-validated results and events) side by side with raw httpx posting the same JSON and"
            " `json.loads` on each event, in one run on loopback (2-core machine, Python"
            f" {sys.version.split()[0]}, {args.build} build of the runtime).\n"
        )
        print("```sh\n.venv/bin/python clients/python/bench/bench_status.py --markdown\n```\n")
    print(table)


if __name__ == "__main__":
    main()
