"""Clients of any JSON-RPC 2.0 service over HTTP, for the methods `openagents-codegen python`
generates from that service's schema: the generated `Methods` (blocking) and `AsyncMethods`
(asynchronous) declare one typed call per method over an abstract `_call`, and `RpcClient` and
`AsyncRpcClient` supply it. Nothing here knows a method of ours::

    from openagents.rpc import RpcClient
    from kv_client import methods

    class Kv(RpcClient, methods.Methods):
        pass

    with Kv("http://127.0.0.1:8080/rpc") as kv:
        entry = kv.get("notes/a")

Params are checked against the schema before they are sent (an invalid one raises pydantic's
`ValidationError`), results are validated into the generated models (an answer that breaks the
schema raises `ProtocolError`), and an error answer raises `RpcError` with the service's code,
message and data.
"""

from __future__ import annotations

import itertools
import json
from types import TracebackType
from typing import Any, TypeVar

import httpx
from pydantic import JsonValue, ValidationError

from . import _rt
from .errors import ProtocolError, TransportError

__all__ = ["AsyncRpcClient", "RpcClient", "RpcError"]

_T = TypeVar("_T")
_Self = TypeVar("_Self")


class RpcError(_rt.TypedError):
    """A JSON-RPC error answer: the service's `code`, `message` and `data` (None when absent)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message
        self.data = data


def wire_params(spec: _rt.MethodSpec[Any], params: object) -> tuple[bool, JsonValue]:
    """Whether the request carries params, and the params as they go on the wire, checked
    against the schema first (pydantic's `ValidationError` when they break it)."""
    if spec.params is not None:
        if isinstance(params, _rt.Model):
            return True, params.to_wire()
        if params is not None and not isinstance(params, dict):
            raise TypeError(f"`{spec.name}` params are an object")
        values = {} if params is None else {k: v for k, v in params.items() if v is not None}
        if not values and not spec.params_required:
            return False, None
        return True, spec.params.from_wire(values, strict=True).to_wire()
    if spec.params_adapter is not None:
        if params is None and not spec.params_required:
            return False, None
        spec.params_adapter.validate_python(params, context=_rt.STRICT)
        return True, params  # type: ignore[return-value]
    return params is not None, params  # type: ignore[return-value]


def _body(request_id: int, spec: _rt.MethodSpec[Any], params: object) -> bytes:
    has_params, wire = wire_params(spec, params)
    doc: dict[str, JsonValue] = {"jsonrpc": "2.0", "id": request_id, "method": spec.name}
    if has_params:
        doc["params"] = wire
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _result(spec: _rt.MethodSpec[_T], response: httpx.Response) -> _T:
    try:
        answer = json.loads(response.content)
    except ValueError:
        raise ProtocolError(
            f"`{spec.name}` was answered HTTP {response.status_code} with a body that is not JSON"
        ) from None
    if not isinstance(answer, dict):
        raise ProtocolError(f"the answer to `{spec.name}` is not a JSON-RPC response object")
    if "error" in answer:
        e = answer["error"]
        if not isinstance(e, dict) or not isinstance(e.get("code"), int) or not isinstance(e.get("message"), str):
            raise ProtocolError(f"the error answering `{spec.name}` is not a JSON-RPC error object")
        raise RpcError(e["code"], e["message"], e.get("data"))
    if "result" not in answer:
        raise ProtocolError(f"the answer to `{spec.name}` has neither `result` nor `error`")
    try:
        return spec.result.validate_python(answer["result"], context=_rt.STRICT)
    except ValidationError as e:
        raise ProtocolError(f"the `{spec.name}` result is not what the schema says: {e}") from None


def _headers(token: str | None) -> dict[str, str]:
    headers = {"content-type": "application/json", "accept": "application/json"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return headers


class RpcClient:
    """A blocking JSON-RPC 2.0 client over HTTP `POST` to `url`: mix it in before a generated
    `Methods` (`class Kv(RpcClient, methods.Methods)`)."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float | None = 30.0) -> None:
        self.url = url
        self._http = httpx.Client(headers=_headers(token), timeout=timeout)
        self._ids = itertools.count(1)

    def _call(self, spec: _rt.MethodSpec[_T], params: object) -> _T:
        body = _body(next(self._ids), spec, params)
        try:
            response = self._http.post(self.url, content=body)
        except httpx.TransportError as e:
            raise TransportError(f"cannot reach {self.url}: {e}") from e
        return _result(spec, response)

    def close(self) -> None:
        """Closes the HTTP connections."""
        self._http.close()

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class AsyncRpcClient:
    """An asynchronous JSON-RPC 2.0 client over HTTP `POST` to `url`: mix it in before a generated
    `AsyncMethods` (`class Kv(AsyncRpcClient, methods.AsyncMethods)`)."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float | None = 30.0) -> None:
        self.url = url
        self._http = httpx.AsyncClient(headers=_headers(token), timeout=timeout)
        self._ids = itertools.count(1)

    async def _call(self, spec: _rt.MethodSpec[_T], params: object) -> _T:
        body = _body(next(self._ids), spec, params)
        try:
            response = await self._http.post(self.url, content=body)
        except httpx.TransportError as e:
            raise TransportError(f"cannot reach {self.url}: {e}") from e
        return _result(spec, response)

    async def aclose(self) -> None:
        """Closes the HTTP connections."""
        await self._http.aclose()

    async def __aenter__(self: _Self) -> _Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
