"""Transports: how requests, responses and events travel. They know nothing of what a method
means; `AsyncClient` and `Client` sit on top of any of them.

- `StdioTransport`: spawns `openagents serve --stdio --runner ID` and speaks JSONL-RPC over its
  stdin and stdout (`{"id","method","params"}` lines in; responses and `{"event": ...}` lines out).
- `HttpTransport`: `POST /rpc` for requests and `GET /events` (Server-Sent Events, resumed with
  `Last-Event-ID` after a dropped connection) with a bearer token.

- `WebSocketTransport`: the frontend WebSocket `/frontend/v2` (JSON-RPC both ways; events after
  `subscribe`; approval requests answered by a callback, denied without one).

stdio and the WebSocket are channels over one connection core (`openagents.transport.connection`:
request ids, replies matched by id, fan-out of events to local subscribers in sequence order, and
every waiter failed when the channel closes). A new transport over one duplex channel subclasses
`Connection`; any other implements `Transport` and `EventSource` from `openagents.transport.base`.
"""

from .base import EventSource, Transport
from .http import HttpTransport, Reconnect
from .stdio import StdioTransport
from .websocket import WebSocketTransport

__all__ = ["EventSource", "HttpTransport", "Reconnect", "StdioTransport", "Transport", "WebSocketTransport"]
