"""Drives a kv server over HTTP with the Python generated from examples/kv/schema: the generated
`methods.Methods` (typed calls, params checked against the schema before they are sent, results
validated into the generated models) over a hand-written `_call` of a few lines (urllib, POST /rpc).

usage: drive.py PACKAGE URL   (PACKAGE: the generated modules' package, importable from PYTHONPATH)
Prints one line per check; exits 1 on the first that fails.
"""

from __future__ import annotations

import importlib
import itertools
import json
import sys
import urllib.request
from typing import Any, TypeVar

from pydantic import ValidationError

_T = TypeVar("_T")


class RpcError(Exception):
    """A JSON-RPC error answer."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code: int = error["code"]
        self.data: Any = error.get("data")


def client_class(methods: Any) -> type:
    class HttpClient(methods.Methods):  # type: ignore[misc,name-defined]
        """The generated calls over POST /rpc."""

        def __init__(self, url: str) -> None:
            self.url = url
            self.ids = itertools.count(1)

        def _call(self, spec: Any, params: object) -> Any:
            assert isinstance(params, dict)
            values = {k: v for k, v in params.items() if v is not None}
            wire = spec.params.from_wire(values, strict=False).to_wire() if spec.params is not None else values
            body = json.dumps({"jsonrpc": "2.0", "id": next(self.ids), "method": spec.name, "params": wire}).encode()
            req = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=30) as resp:
                answer = json.loads(resp.read())
            if "error" in answer:
                raise RpcError(answer["error"])
            return spec.result.validate_python(answer["result"])

    return HttpClient


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
