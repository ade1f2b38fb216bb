"""Drives a kv server with the Python generated from examples/kv/schema: the generated
`methods.Methods` and `methods.AsyncMethods` (typed calls, params checked against the schema before
they are sent, results validated into the generated models) with `_call` supplied by the installed
package's `openagents.rpc` clients, which know no method of anyone's, over the three transports
the server has: HTTP `POST`, the WebSocket, and stdio (a `kv-server --stdio` child of its own).

usage: drive.py PACKAGE HTTP_URL WS_URL KV_SERVER
  PACKAGE    the generated modules' package, importable from PYTHONPATH
  HTTP_URL   http://ADDR/rpc of a running `kv-server --http`; WS_URL its ws://ADDR/rpc
  KV_SERVER  the kv-server binary, started with --stdio
Prints one line per check; exits 1 on the first that fails.
"""

from __future__ import annotations

import asyncio
import importlib
import queue
import sys
from typing import Any

from pydantic import ValidationError

from openagents.rpc import AsyncRpcClient, Notification, RpcClient, RpcError, Stdio

NOTIFIED_WITHIN = 10.0
"""Seconds a `changed` notification may take to arrive (it is sent before the call's reply)."""


def check(what: str, ok: bool) -> None:
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        sys.exit(1)


def calls(kv: Any, m: Any, name: str, prefix: str) -> None:
    """put, get, a conditional put, delete and the errors, over one client."""
    key, count = f"{prefix}greeting", f"{prefix}count"
    entry = kv.put(key, m.ValueText(kind="text", text="hello from python"))
    check(f"[{name}] put answers an Entry at version 1", isinstance(entry, m.Entry) and entry.version == 1)
    got = kv.get(key)
    check(
        f"[{name}] get answers the tagged union's text branch",
        isinstance(got.value, m.ValueText) and got.value.text == "hello from python",
    )
    kv.put(count, m.ValueNumber(kind="number", number=2.5))
    entry = kv.put(count, m.ValueNumber(kind="number", number=3.5), if_version=1)
    check(
        f"[{name}] put with if_version moves to version 2",
        entry.version == 2 and isinstance(entry.value, m.ValueNumber),
    )
    try:
        kv.put(count, m.ValueFlag(kind="flag", flag=True), if_version=1)
        check(f"[{name}] a stale if_version is refused", False)
    except RpcError as e:
        code = m.KvErrorCode(e.data["code"])
        check(
            f"[{name}] a stale if_version is refused with version_conflict (-32041)",
            e.code == -32041 and code == m.KvErrorCode.VERSION_CONFLICT,
        )
    check(f"[{name}] delete answers deleted", kv.delete(count).deleted is True)
    try:
        kv.get(count)
        check(f"[{name}] a deleted key is gone", False)
    except RpcError as e:
        check(f"[{name}] a deleted key is not_found (-32040)", e.code == -32040 and e.data == {"code": "not_found"})
    try:
        kv.get("Not A Key")
        check(f"[{name}] a key breaking its pattern is refused before it is sent", False)
    except ValidationError:
        check(f"[{name}] a key breaking its pattern is refused before it is sent", True)


def watched(kv: Any, m: Any, name: str, prefix: str, notes: queue.Queue[Notification]) -> None:
    """`watch`, then a put and a delete under the prefix, each notified as `changed`."""
    check(f"[{name}] watch answers watching 1", kv.watch(prefix).watching == 1)
    key = f"{prefix}watched"
    kv.put(key, m.ValueFlag(kind="flag", flag=True))
    note = notes.get(timeout=NOTIFIED_WITHIN)
    changed = m.Changed.from_wire(note.params, strict=True)
    check(
        f"[{name}] a put is notified as `changed` with its value",
        note.method == "changed"
        and changed.key == key
        and changed.version == 1
        and isinstance(changed.value, m.ValueFlag),
    )
    kv.delete(key)
    changed = m.Changed.from_wire(notes.get(timeout=NOTIFIED_WITHIN).params, strict=True)
    check(f"[{name}] a delete is notified as `changed` without a value", changed.key == key and changed.value is None)


async def watched_async(kv: Any, m: Any, name: str, prefix: str) -> None:
    """The asynchronous client: calls, and `watch` read from `notifications()`."""
    notes = kv.notifications()
    key = f"{prefix}watched"
    entry = await kv.put(key, m.ValueText(kind="text", text="async"))
    got = await kv.get(key)
    check(f"[{name}] put and get answer", entry.version == 1 and got.value.text == "async")
    await kv.watch(prefix)
    await kv.put(key, m.ValueText(kind="text", text="again"), if_version=1)
    note = await asyncio.wait_for(notes.__anext__(), NOTIFIED_WITHIN)
    changed = m.Changed.from_wire(note.params, strict=True)
    check(f"[{name}] notifications() yields `changed`", changed.key == key and changed.version == 2)


def main() -> int:
    package, http_url, ws_url, kv_server = sys.argv[1:5]
    methods = importlib.import_module(f"{package}.methods")
    m = importlib.import_module(f"{package}.models")

    class Kv(RpcClient, methods.Methods):  # type: ignore[misc,name-defined]
        """The generated calls, blocking."""

    class AsyncKv(AsyncRpcClient, methods.AsyncMethods):  # type: ignore[misc,name-defined]
        """The generated calls, asynchronous."""

    with Kv(http_url) as kv:
        calls(kv, m, "http", "http/")
        try:
            kv.watch("http/")
            check("[http] watch over HTTP is refused", False)
        except RpcError as e:
            check("[http] watch over HTTP is cannot_notify (-32042)", e.code == -32042)

    stdio = Stdio([kv_server, "--stdio"])
    connections: list[tuple[str, str | Stdio]] = [("websocket", ws_url), ("stdio", stdio)]
    for name, target in connections:
        notes: queue.Queue[Notification] = queue.Queue()
        with Kv(target, on_notification=notes.put) as kv:
            calls(kv, m, name, f"{name}/")
            watched(kv, m, name, f"{name}/", notes)

    async def run_async() -> None:
        for name, target in connections:
            async with AsyncKv(target) as kv:
                await watched_async(kv, m, f"async {name}", f"async-{name}/")

    asyncio.run(run_async())
    return 0


if __name__ == "__main__":
    sys.exit(main())
