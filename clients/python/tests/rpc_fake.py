"""A scripted JSON-RPC 2.0 server for tests/test_rpc_transports.py, over JSON lines (stdin/stdout
when run as a script, or any pair of binary streams) and over a `websockets` server on loopback.
Standard library and `websockets` only, so that it runs as `python rpc_fake.py` too.

Its methods, each a behaviour a client has to cope with:

- `echo`: answers its params.
- `pair`: held until a second `pair` arrives; then a reply with an id no call has, and the two
  answered in reverse order (each with its own params).
- `notify`: `{"count": N}` sends N `changed` notifications (`{"n": i}`), then answers "done".
- `fail`: answers the error -32040 `no entry` with data `{"code": "not_found"}`.
- `sized`: `{"bytes": N}` answers with a message of exactly N bytes.
- `hangup`: closes the connection without answering.
- `never`: is never answered.
- `ask`: `{"method": M}` sends the client the request M (id "s-1", params `{"q": 1}`) and answers
  with the client's whole response to it.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

from websockets.http11 import Request, Response
from websockets.sync.server import Server, ServerConnection, serve

Doc = dict[str, Any]


class Hangup(Exception):
    """The script closes the connection."""


class Fake:
    """The behaviours, over one connection: `take` one received message, `send` what goes out."""

    def __init__(self, send: Callable[[str], None]) -> None:
        self._send = send
        self._held: list[Doc] = []
        self._asked: dict[str, Doc] = {}

    def reply(self, request: Doc, **member: Any) -> None:
        self._send(json.dumps({"jsonrpc": "2.0", "id": request["id"], **member}))

    def take(self, text: str) -> None:
        doc: Doc = json.loads(text)
        if "method" not in doc:  # the client's answer to `ask`
            original = self._asked.pop(doc["id"])
            self.reply(original, result=doc)
            return
        method, params = doc["method"], doc.get("params", {})
        if method == "echo":
            self.reply(doc, result=params)
        elif method == "pair":
            self._held.append(doc)
            if len(self._held) == 2:
                first, second = self._held
                self._held = []
                self._send(json.dumps({"jsonrpc": "2.0", "id": 999999, "result": "for nobody"}))
                self.reply(second, result=second["params"])
                self.reply(first, result=first["params"])
        elif method == "notify":
            for i in range(params["count"]):
                self._send(json.dumps({"jsonrpc": "2.0", "method": "changed", "params": {"n": i}}))
            self.reply(doc, result="done")
        elif method == "fail":
            self.reply(doc, error={"code": -32040, "message": "no entry", "data": {"code": "not_found"}})
        elif method == "sized":
            bare = json.dumps({"jsonrpc": "2.0", "id": doc["id"], "result": ""})
            self.reply(doc, result="x" * (params["bytes"] - len(bare)))
        elif method == "hangup":
            raise Hangup
        elif method == "never":
            pass
        elif method == "ask":
            self._asked["s-1"] = doc
            self._send(json.dumps({"jsonrpc": "2.0", "id": "s-1", "method": params["method"], "params": {"q": 1}}))
        else:
            self.reply(doc, error={"code": -32601, "message": f"no method {method}"})


def serve_lines(reader: IO[bytes], writer: IO[bytes]) -> None:
    """Serves one line connection until its input ends or a `hangup`; then closes its output."""
    lock = threading.Lock()

    def send(text: str) -> None:
        with lock:
            writer.write(text.encode() + b"\n")
            writer.flush()

    fake = Fake(send)
    try:
        for line in reader:
            if line.strip():
                fake.take(line.decode())
    except Hangup:
        pass
    finally:
        writer.close()
        reader.close()


def serve_websocket(token: str | None = None) -> tuple[Server, str]:
    """A `websockets` server on 127.0.0.1 (a free port), serving in a thread of its own; its
    `ws://` URL. With `token`, a handshake without `Authorization: Bearer TOKEN` is refused 401."""

    def check(conn: ServerConnection, request: Request) -> Response | None:
        if token is not None and request.headers.get("Authorization") != f"Bearer {token}":
            return conn.respond(401, "a bearer token is required\n")
        return None

    def handler(conn: ServerConnection) -> None:
        fake = Fake(conn.send)
        try:
            for message in conn:
                fake.take(message if isinstance(message, str) else message.decode())
        except Hangup:
            conn.close()

    server = serve(handler, "127.0.0.1", 0, process_request=check, max_size=None)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.socket.getsockname()[1]
    return server, f"ws://127.0.0.1:{port}/rpc"


if __name__ == "__main__":
    serve_lines(sys.stdin.buffer, sys.stdout.buffer)
