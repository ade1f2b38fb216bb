"""openagents: a typed Python client and runner helper for the openagents runtime.

The models, constants, typed methods and error classes are generated from the JSON Schema files
in `schema/` (`openagents._generated`); the transports and the runner helper are written by hand.

- `AsyncClient` / `Client`: drive a runtime over stdio (`AsyncClient.stdio(runner)` starts
  `openagents serve --stdio`), HTTP (`AsyncClient.http(url, token_file=...)`) or the WebSocket
  (`AsyncClient.websocket(url, token_file=..., on_approval=...)`).
- `SchemaMismatchWarning` / `SchemaMismatchError`: a runtime built from a different schema than
  this package (a warning once per client; an error with `strict_schema=True`).
- `openagents.runner.serve_once` / `serve_streaming`: write a runner in Python.
- `openagents.models`, `openagents.errors`, `openagents.constants`: the generated types.
- `openagents.validate(type_name, document)`: check a document strictly, as the Rust validator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._generated.constants import *  # noqa: F403
from ._generated.constants import __all__ as _constants
from ._generated.errors import *  # noqa: F403
from ._generated.errors import __all__ as _errors
from ._rt import OpenAgentsError
from .errors import (
    DocumentInvalid,
    ProtocolError,
    SchemaMismatchError,
    SchemaMismatchWarning,
    TransportError,
    WebSocketClosed,
)
from .validation import check, validate

if TYPE_CHECKING:
    from .client import AsyncClient, AsyncEventStream, Client, EventStream

__version__ = "0.1.0"

__all__ = [
    *_constants,
    *_errors,
    "AsyncClient",
    "AsyncEventStream",
    "Client",
    "DocumentInvalid",
    "EventStream",
    "OpenAgentsError",
    "ProtocolError",
    "SchemaMismatchError",
    "SchemaMismatchWarning",
    "TransportError",
    "WebSocketClosed",
    "check",
    "validate",
]


def __getattr__(name: str) -> Any:
    # The clients (and httpx) load on first use, so a runner starts without them.
    if name in ("AsyncClient", "AsyncEventStream", "Client", "EventStream"):
        from . import client

        return getattr(client, name)
    raise AttributeError(f"module 'openagents' has no attribute {name!r}")
