"""The transport interface, and the decoding of response envelopes every transport shares."""

from __future__ import annotations

import abc
import json
from collections.abc import Mapping
from typing import Final

from pydantic import JsonValue, ValidationError

from .._generated.constants import SERVER_MAX_LINE_BYTES
from .._generated.errors import BY_CODE, RuntimeSubmitException, exception_for
from .._generated.models import (
    ErrorCode,
    RpcError,
    RuntimeEventGap,
    RuntimeEventLagged,
    RuntimeSubmitError,
    ServerEvent,
)
from .._schema import PROTOCOL_VERSION_HEADER, SCHEMA_DIGEST_HEADER, RuntimeSchema
from ..errors import ProtocolError

__all__ = [
    "OMIT",
    "EventSource",
    "RuntimeSchema",
    "Transport",
    "decode_response",
    "encode_request",
    "is_notice",
    "local_error",
    "resume_after_gap",
    "schema_from_headers",
]


class _Omit:
    def __repr__(self) -> str:
        return "OMIT"


OMIT: Final = _Omit()
"""Marks a request that carries no `params` at all."""


class EventSource(abc.ABC):
    """One subscriber's stream of `ServerEvent`s: every event once, in order, or an explicit
    `lagged`/`gap` notice saying which were missed. It ends after the runtime's last event."""

    @abc.abstractmethod
    async def open(self) -> None:
        """Subscribes; once it returns, no later event is missed."""

    @abc.abstractmethod
    async def next(self) -> ServerEvent | None:
        """The next event; `None` once the stream has ended."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Unsubscribes."""


class Transport(abc.ABC):
    """Carries requests and events. It never knows what a method means."""

    #: Whether `events(since=...)` resumes on the transport's own (HTTP's `Last-Event-ID`).
    resumes: bool = False

    #: What the runtime said about its schema (headers), once it said it; the client checks it.
    runtime_schema: RuntimeSchema | None = None

    #: Whether the client asks `status` once for the runtime's schema digest, because the transport
    #: carries no headers (stdio, whose caller is trusted with `status`).
    probes_schema: bool = False

    @property
    def where(self) -> str:
        """The transport and the runtime's address, for messages."""
        return type(self).__name__

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Connects (or starts the runtime); called before the first request."""

    @abc.abstractmethod
    async def request(self, method: str, params: JsonValue | _Omit, timeout: float | None) -> JsonValue:
        """Sends one request and returns its `result`.

        Raises the generated `RuntimeSubmitException` subclass for an error response,
        `TimeoutError` when no answer came within `timeout` seconds, and `TransportError`
        (`ProtocolError`) when the runtime cannot be reached (or answers nonsense)."""

    @abc.abstractmethod
    def events(self, since: int | None) -> EventSource:
        """A stream of events after `since` (when the transport resumes), else of new events."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Closes the connection (and stops a runtime the transport started)."""


def encode_request(request_id: int, method: str, params: JsonValue | _Omit) -> bytes:
    """One request as compact JSON, refused locally (as `frame_too_large`) past
    `SERVER_MAX_LINE_BYTES`, which the runtime would refuse anyway."""
    doc: dict[str, JsonValue] = {"id": request_id, "method": method}
    if not isinstance(params, _Omit):
        doc["params"] = params
    line = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    if len(line) > SERVER_MAX_LINE_BYTES:
        raise local_error(
            ErrorCode.FRAME_TOO_LARGE,
            f"the request is {len(line)} bytes; a runtime accepts at most SERVER_MAX_LINE_BYTES"
            f" ({SERVER_MAX_LINE_BYTES} bytes). Send less per request.",
        )
    return line


def local_error(code: ErrorCode, message: str) -> RuntimeSubmitException:
    """A typed error raised on this side, with the code's documented retry hint."""
    retryable = BY_CODE[code].RETRYABLE if code in BY_CODE else False
    return exception_for(RuntimeSubmitError(code=code, message=message, retryable=retryable))


def decode_response(doc: object) -> JsonValue:
    """The `result` of a response document, or its error raised as the generated exception."""
    if not isinstance(doc, dict):
        raise ProtocolError(f"a response is a JSON object, not {type(doc).__name__}")
    if "error" in doc:
        try:
            err = RpcError.from_wire(doc["error"])
        except ValidationError as e:
            raise ProtocolError(f"the error response is not a valid RpcError: {e}") from None
        raise exception_for(err.data, err.code)
    if "result" not in doc:
        raise ProtocolError("the response has neither `result` nor `error`")
    result: JsonValue = doc["result"]
    return result


def is_notice(event: ServerEvent) -> bool:
    """Whether an event is a subscriber-local notice (`lagged`, `gap`), which does not advance the
    sequence."""
    return isinstance(event.event, (RuntimeEventLagged, RuntimeEventGap))


def resume_after_gap(last: int | None, gap: RuntimeEventGap) -> int:
    """The newest sequence number a subscriber at `last` has after a `gap` notice: `resumed_at`
    (the replay resumes right after it). When the gap answers this subscriber's own resume point
    (`since` is where it stands) that holds even below `last`: a resume point ahead of the newest
    event (a runtime restarted since) is replayed from the oldest event held, and those events
    are new to it. A gap another subscriber's resume caused never moves this one back."""
    if last is None or gap.since == last:
        return gap.resumed_at
    return max(last, gap.resumed_at)


def schema_from_headers(headers: Mapping[str, str], where: str) -> RuntimeSchema | None:
    """The runtime's schema digest and protocol version from response headers (None without the
    digest header: an older runtime)."""
    digest = headers.get(SCHEMA_DIGEST_HEADER)
    if digest is None:
        return None
    return RuntimeSchema(digest.strip(), headers.get(PROTOCOL_VERSION_HEADER), where)
