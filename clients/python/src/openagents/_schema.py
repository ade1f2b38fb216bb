"""The schema check: a client compares the digest of the schema its runtime was built from with
`SCHEMA_DIGEST`, the one this package was generated from, and reports a mismatch once."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from ._generated.constants import PROTOCOL_VERSION, SCHEMA_DIGEST
from .errors import SchemaMismatchError, SchemaMismatchWarning

__all__ = ["RuntimeSchema", "SchemaGuard"]

SCHEMA_DIGEST_HEADER = "openagents-schema-digest"
"""The response header carrying the runtime's schema digest (HTTP responses, WebSocket handshake)."""
PROTOCOL_VERSION_HEADER = "openagents-protocol-version"
"""The response header carrying the runtime's protocol version."""


@dataclass(frozen=True)
class RuntimeSchema:
    """What a runtime says about its schema, and where it said it."""

    digest: str | None
    protocol_version: str | None
    where: str


class SchemaGuard:
    """One client's check: the first digest a runtime reports decides; a mismatch is a
    `SchemaMismatchWarning` once, or with `strict` a `SchemaMismatchError` raised now and on every
    later check."""

    def __init__(self, strict: bool = False) -> None:
        self.strict = strict
        self.mismatch: RuntimeSchema | None = None
        """What the runtime reported, once it differed."""
        self._reported = False

    def check(self, found: RuntimeSchema | None) -> None:
        """Compares what the runtime reported (nothing, when `found` is None or has no digest: an
        older runtime) with `SCHEMA_DIGEST`."""
        if self.mismatch is None and found is not None and found.digest and found.digest != SCHEMA_DIGEST:
            self.mismatch = found
        if self.mismatch is None:
            return
        error = _error(self.mismatch)
        if self.strict:
            raise error
        if not self._reported:
            self._reported = True
            warning = SchemaMismatchWarning(
                str(error),
                client_digest=error.client_digest,
                runtime_digest=error.runtime_digest,
                client_protocol_version=error.client_protocol_version,
                runtime_protocol_version=error.runtime_protocol_version,
                where=error.where,
            )
            warnings.warn(warning, stacklevel=3)


def _error(found: RuntimeSchema) -> SchemaMismatchError:
    digest = found.digest or ""
    runtime_version = found.protocol_version or "unknown"
    message = (
        f"the runtime at {found.where} was built from a different schema than this client: runtime schema"
        f" {digest[:12]} (protocol {runtime_version}), client schema {SCHEMA_DIGEST[:12]} (protocol"
        f" {PROTOCOL_VERSION}). Calls may be refused or lose fields. Regenerate the client from the"
        " runtime's schema with `make codegen`, or compare the two schemas with `openagents-codegen compat`."
    )
    return SchemaMismatchError(
        message,
        client_digest=SCHEMA_DIGEST,
        runtime_digest=digest,
        client_protocol_version=PROTOCOL_VERSION,
        runtime_protocol_version=found.protocol_version,
        where=found.where,
    )
