"""JSON-RPC 2.0 dispatch: the one place that touches jsonrpcserver.

jsonrpcserver (5.0.9) calls the method and carries its Success/Error result. What it does poorly or slowly is
done here: msgspec parses each frame once; its jsonschema validation is replaced by a msgspec envelope check
plus each method's typed params Struct; its per-call method lookup and ``inspect.signature().bind`` arity check
(the better part of its cost, and redundant once params are typed) are replaced by a dict lookup; batches are
capped and split here so each element is answered on its own as the spec requires (jsonrpcserver rejects a
whole batch for one bad element); and exceptions never reach its handler, which would put their text on the
wire.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import msgspec
from jsonrpcserver.async_dispatcher import call as jsonrpc_call
from jsonrpcserver.request import Request
from jsonrpcserver.result import Error, InvalidParams, MethodNotFoundResult, Success
from jsonrpcserver.sentinels import NODATA, NOID
from oslash.either import Left

from ptyd.errors import PtydError

log = logging.getLogger("ptyd.rpc")

PARSE_ERROR, INVALID_REQUEST, INTERNAL_ERROR = -32700, -32600, -32603

Handler = Callable[[Any, Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Method:
    name: str
    params: type[msgspec.Struct]
    result: Any  # a Struct type or a union of them; documentation and OpenRPC come from it
    handler: Handler  # (context, params) -> result
    summary: str


class _Envelope(msgspec.Struct, forbid_unknown_fields=True):
    jsonrpc: Literal["2.0"]
    method: str
    params: dict[str, Any] | list[Any] | msgspec.UnsetType = msgspec.UNSET
    id: int | str | msgspec.UnsetType | None = msgspec.UNSET


class _ErrorObject(msgspec.Struct, omit_defaults=True):
    code: int
    message: str
    data: Any = msgspec.UNSET


class _ErrorResponse(msgspec.Struct):
    error: _ErrorObject
    id: int | str | None
    jsonrpc: str = "2.0"


class _SuccessResponse(msgspec.Struct):
    result: Any
    id: int | str | None
    jsonrpc: str = "2.0"


_encoder = msgspec.json.Encoder()


class _Notification(msgspec.Struct):
    method: str
    params: Any
    jsonrpc: str = "2.0"


def notification(method: str, params: msgspec.Struct) -> bytes:
    """A JSON-RPC notification line (without the newline) that the daemon sends a client."""
    return _encoder.encode(_Notification(method, params))


def _error(code: int, message: str, data: Any = msgspec.UNSET, id: Any = None) -> _ErrorResponse:
    return _ErrorResponse(error=_ErrorObject(code, message, data), id=id)


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, int | str) and not isinstance(value, bool))


class Dispatcher:
    def __init__(self, methods: list[Method], max_batch: int) -> None:
        self.methods = {m.name: m for m in methods}
        self.max_batch = max_batch
        self._table = {m.name: self._wrap(m) for m in methods}

    def _wrap(self, method: Method) -> Callable[..., Awaitable[Any]]:
        decode = method.params
        handler = method.handler

        async def call(context: Any, *args: Any, **kwargs: Any) -> Any:
            if args:
                return InvalidParams({"kind": "invalid_params", "detail": "params must be an object"})
            try:
                params = msgspec.convert(kwargs, decode)
            except msgspec.ValidationError as exc:
                return InvalidParams({"kind": "invalid_params", "detail": str(exc)})
            try:
                return Success(await handler(context, params))
            except PtydError as exc:
                return Error(exc.code, exc.message, exc.data)
            except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
                raise
            except Exception:
                incident = secrets.token_hex(4)
                log.exception("incident %s in %s", incident, method.name)
                return Error(INTERNAL_ERROR, "Internal error", {"kind": "internal", "incident": incident})

        return call

    async def handle_frame(self, frame: bytes, context: Any) -> bytes | None:
        """One NDJSON frame in; its response line (without the newline) out, or None for notifications."""
        try:
            obj = msgspec.json.decode(frame)
        except (msgspec.DecodeError, RecursionError):
            return _encoder.encode(_error(PARSE_ERROR, "Parse error", {"kind": "parse_error"}))
        if isinstance(obj, list):
            if not obj:
                return _encoder.encode(_error(INVALID_REQUEST, "Invalid request", {"kind": "empty_batch"}))
            if len(obj) > self.max_batch:
                data = {"kind": "batch_too_large", "limit": self.max_batch}
                return _encoder.encode(_error(INVALID_REQUEST, "Invalid request", data))
            answers = await asyncio.gather(*(self._one(element, context) for element in obj))
            out = [a for a in answers if a is not None]
            return _encoder.encode(out) if out else None
        answer = await self._one(obj, context)
        return None if answer is None else _encoder.encode(answer)

    async def _one(self, obj: Any, context: Any) -> _ErrorResponse | _SuccessResponse | None:
        if not isinstance(obj, dict):
            return _error(INVALID_REQUEST, "Invalid request", {"kind": "invalid_request", "detail": "not an object"})
        raw_id = obj.get("id")
        reply_id = raw_id if _valid_id(raw_id) else None
        try:
            env = msgspec.convert(obj, _Envelope)
        except msgspec.ValidationError as exc:
            return _error(INVALID_REQUEST, "Invalid request", {"kind": "invalid_request", "detail": str(exc)}, reply_id)
        params = {} if env.params is msgspec.UNSET else env.params
        request = Request(env.method, params, NOID if env.id is msgspec.UNSET else env.id)
        method = self._table.get(env.method)
        result = (
            Left(MethodNotFoundResult(env.method)) if method is None else await jsonrpc_call(request, context, method)
        )
        if env.id is msgspec.UNSET:
            return None
        if isinstance(result, Left):
            err = result._error
            data = msgspec.UNSET if err.data is NODATA else err.data
            if err.code == -32601:
                data = {"kind": "method_not_found", "method": env.method[:128]}
            elif err.code == -32602 and not isinstance(data, dict):
                data = {"kind": "invalid_params", "detail": str(data)}
            return _error(err.code, err.message, data, env.id)
        return _SuccessResponse(result=result._value.result, id=env.id)
