"""Every error the package raises.

`RuntimeSubmitException` and its subclasses (one per error code: `BusyError`,
`RunnerNotFoundError`, ...) are generated from the schema; a code this version does not know is
raised as `RuntimeSubmitException` itself, with `retryable` False. `TransportError` covers what
happens below the protocol: a process that would not start or died, a connection that failed, or
an answer that is not a valid response. `SchemaMismatchError` (strict mode) and
`SchemaMismatchWarning` (the default) report a runtime built from a different schema than this
package.
"""

from ._generated.errors import *  # noqa: F403
from ._generated.errors import __all__ as _generated_all
from ._rt import OpenAgentsError
from .validation import DocumentInvalid

__all__ = [
    *_generated_all,
    "DocumentInvalid",
    "OpenAgentsError",
    "ProtocolError",
    "SchemaMismatchError",
    "SchemaMismatchWarning",
    "TransportError",
    "WebSocketClosed",
]


class TransportError(OpenAgentsError):
    """The runtime could not be reached or talked to: it would not start, exited, or the
    connection failed or was closed."""


def http_failure(url: str, e: BaseException) -> TransportError:
    """The `TransportError` for an HTTP request to `url` that failed with httpx's `e`: "cannot
    reach" when no connection was made, else what happened on the connection (the server closed
    or reset it); the exception's kind when its text is empty, as httpx's often is."""
    reason = str(e) or type(e).__name__
    connecting = type(e).__name__ in ("ConnectError", "ConnectTimeout")
    if connecting:
        return TransportError(f"cannot reach {url}: {reason}")
    return TransportError(f"the connection to {url} failed: {reason} (the server closed or reset it)")


class ProtocolError(TransportError):
    """The runtime answered with something that is not a valid response."""


class WebSocketClosed(TransportError):
    """The WebSocket closed: `code` and `reason` are the close frame's (1001 the runtime is shutting
    down, 1003 a binary frame, 1008 idle, 1009 a message too large, 1013 too slow to keep up;
    1006 when the connection dropped without a close frame)."""

    def __init__(self, message: str, code: int | None, reason: str) -> None:
        super().__init__(message)
        self.code = code
        """The close code, None when the connection dropped without one."""
        self.reason = reason
        """The close frame's reason, for a person."""


class _SchemaMismatch(Exception):
    """What both schema mismatch reports carry besides their message."""

    def __init__(
        self,
        message: str,
        *,
        client_digest: str,
        runtime_digest: str,
        client_protocol_version: str,
        runtime_protocol_version: str | None,
        where: str,
    ) -> None:
        super().__init__(message)
        self.client_digest = client_digest
        """`SCHEMA_DIGEST`: the digest of the schema this package was generated from."""
        self.runtime_digest = runtime_digest
        """The digest the runtime reported (a response header or `status.schema_digest`)."""
        self.client_protocol_version = client_protocol_version
        """This package's `PROTOCOL_VERSION`."""
        self.runtime_protocol_version = runtime_protocol_version
        """The protocol version the runtime reported, when it did."""
        self.where = where
        """The transport and address the runtime was reached at."""


class SchemaMismatchWarning(_SchemaMismatch, UserWarning):
    """The runtime was built from a different schema than this package: the default report, once
    per client. The attributes name both digests, both protocol versions and the transport."""


class SchemaMismatchError(_SchemaMismatch, OpenAgentsError):
    """The runtime was built from a different schema than this package, and the client is strict
    (`strict_schema=True`): the call that finds out raises it, and so does every later call."""
