"""Drives a kv server over HTTP with the Python generated from examples/kv/schema: the generated
`methods.Methods` (typed calls, params checked against the schema before they are sent, results
validated into the generated models) with `_call` supplied by the installed package's
`openagents.rpc.RpcClient`, a JSON-RPC 2.0 client that knows no method of anyone's.

usage: drive.py PACKAGE URL   (PACKAGE: the generated modules' package, importable from PYTHONPATH)
Prints one line per check; exits 1 on the first that fails.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from pydantic import ValidationError

from openagents.rpc import RpcClient, RpcError


def client_class(methods: Any) -> type:
    class Kv(RpcClient, methods.Methods):  # type: ignore[misc,name-defined]
        """The generated calls over POST /rpc."""

    return Kv


def main() -> int:
    package, url = sys.argv[1], sys.argv[2]
    methods = importlib.import_module(f"{package}.methods")
    m = importlib.import_module(f"{package}.models")
    kv = client_class(methods)(url)

    def check(what: str, ok: bool) -> None:
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        if not ok:
            sys.exit(1)

    entry = kv.put("py/greeting", m.ValueText(kind="text", text="hello from python"))
    check("put answers an Entry at version 1", isinstance(entry, m.Entry) and entry.version == 1)
    got = kv.get("py/greeting")
    check("get answers the tagged union's text branch", isinstance(got.value, m.ValueText) and got.value.text == "hello from python")
    entry = kv.put("py/count", m.ValueNumber(kind="number", number=2.5))
    entry = kv.put("py/count", m.ValueNumber(kind="number", number=3.5), if_version=1)
    check("put with if_version moves to version 2", entry.version == 2 and isinstance(entry.value, m.ValueNumber))
    try:
        kv.put("py/count", m.ValueFlag(kind="flag", flag=True), if_version=1)
        check("a stale if_version is refused", False)
    except RpcError as e:
        code = m.KvErrorCode(e.data["code"])
        check("a stale if_version is refused with version_conflict (-32041)", e.code == -32041 and code == m.KvErrorCode.VERSION_CONFLICT)
    check("delete answers deleted", kv.delete("py/count").deleted is True)
    try:
        kv.get("py/count")
        check("a deleted key is gone", False)
    except RpcError as e:
        check("a deleted key is not_found (-32040)", e.code == -32040 and e.data == {"code": "not_found"})
    try:
        kv.get("Not A Key")
        check("a key breaking its pattern is refused before it is sent", False)
    except ValidationError:
        check("a key breaking its pattern is refused before it is sent", True)
    try:
        kv.watch("py/")
        check("watch over HTTP is refused", False)
    except RpcError as e:
        check("watch over HTTP is cannot_notify (-32042)", e.code == -32042)
    return 0


if __name__ == "__main__":
    sys.exit(main())
