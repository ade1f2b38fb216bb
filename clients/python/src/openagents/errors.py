"""Every error the package raises.

`RuntimeSubmitException` and its subclasses (one per error code: `BusyError`,
`RunnerNotFoundError`, ...) are generated from the schema; a code this version does not know is
raised as `RuntimeSubmitException` itself, with `retryable` False. `TransportError` covers what
happens below the protocol: a process that would not start or died, a connection that failed, or
an answer that is not a valid response.
"""

from ._generated.errors import *  # noqa: F403
from ._generated.errors import __all__ as _generated_all
from ._rt import OpenAgentsError
from .validation import DocumentInvalid

__all__ = [*_generated_all, "DocumentInvalid", "OpenAgentsError", "ProtocolError", "TransportError"]


class TransportError(OpenAgentsError):
    """The runtime could not be reached or talked to: it would not start, exited, or the
    connection failed or was closed."""


class ProtocolError(TransportError):
    """The runtime answered with something that is not a valid response."""
