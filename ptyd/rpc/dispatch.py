"""JSON-RPC 2.0 dispatch: parse, envelope, method lookup, typed params, batches, and the error mapping.

msgspec parses each frame once and checks the envelope; each method's params are decoded by its own typed
Struct; batches are capped and each element is answered on its own, as the spec requires. Every error on the
wire is a ``ptyd.errors`` class (the one table of kinds), and the text of an unexpected exception never reaches
it: it is logged under an incident id, and the id is what the caller gets.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

from ptyd.errors import (
    BatchTooLarge,
    EmptyBatch,
    InternalError,
    InvalidArgument,
    InvalidRequest,
    MethodNotFound,
    ParseError,
    PtydError,
    Unauthorized,
)

log = logging.getLogger("ptyd.rpc")

Handler = Callable[[Any, Any], Awaitable[Any]]
# JSON-RPC 2.0: an id is a string, a number or null; numbers "SHOULD NOT contain fractional parts", but one that
# does is still an id, and the response must carry it back.
RequestId = int | float | str
# The field msgspec names in a validation error: "... - at `$.cols`", "missing required field `text`".
_FIELD = re.compile(r"at `\$\.([^`\[]+)|field `([^`]+)`")


@runtime_checkable
class Caller(Protocol):
    """A context that wants to know which of its calls carry a token and when one was valid (the server's Peer:
    a connection that never presents a valid token is closed after a bound, see ``ptyd.rpc.admission``)."""

    def presenting(self, delta: int) -> None: ...

    def authenticated(self) -> None: ...


_callers: dict[type, bool] = {}  # by the context's class: a runtime Protocol check costs ~14 us a call


def _is_caller(context: Any) -> bool:
    kind = type(context)
    known = _callers.get(kind)
    if known is None:
        known = _callers[kind] = isinstance(context, Caller)
    return known


@dataclass(frozen=True, slots=True)
class Method:
    name: str
    params: type[msgspec.Struct]
    result: Any  # a Struct type or a union of them; documentation and OpenRPC come from it
    handler: Handler  # (context, params) -> result
    summary: str
    # Safe to send again when the connection dropped before the answer came: it reads, or doing it twice is
    # doing it once. OpenRPC says so (x-retry-safe), and the clients' retry tables are generated from it.
    retry_safe: bool = False


class _Envelope(msgspec.Struct, forbid_unknown_fields=True):
    jsonrpc: Literal["2.0"]
    method: str
    params: dict[str, Any] | list[Any] | msgspec.UnsetType = msgspec.UNSET
    id: RequestId | msgspec.UnsetType | None = msgspec.UNSET


class _ErrorObject(msgspec.Struct, omit_defaults=True):
    code: int
    message: str
    data: Any = msgspec.UNSET


class _ErrorResponse(msgspec.Struct):
    error: _ErrorObject
    id: RequestId | None
    jsonrpc: str = "2.0"


class _SuccessResponse(msgspec.Struct):
    result: Any
    id: RequestId | None
    jsonrpc: str = "2.0"


_encoder = msgspec.json.Encoder()


class _Notification(msgspec.Struct):
    method: str
    params: Any
    jsonrpc: str = "2.0"


def notification(method: str, params: msgspec.Struct) -> bytes:
    """A JSON-RPC notification line (without the newline) that the daemon sends a client."""
    return _encoder.encode(_Notification(method, params))


def _error(exc: PtydError, id: Any = None) -> _ErrorResponse:
    return _ErrorResponse(error=_ErrorObject(exc.code, exc.message, exc.data), id=id)


def error_line(exc: PtydError) -> bytes:
    """The response line (without the newline) for an error that belongs to no request (``id`` null)."""
    return _encoder.encode(_error(exc))


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, int | float | str) and not isinstance(value, bool))


def _invalid(exc: msgspec.ValidationError) -> InvalidArgument:
    """The message names the field (a caller that shows only the message still learns which), data.field too."""
    detail = str(exc)
    found = _FIELD.search(detail)
    if found is None:
        return InvalidArgument(f"Invalid params: {detail}", detail=detail)
    field = found.group(1) or found.group(2)
    return InvalidArgument(f"Invalid params: {detail}", detail=detail, field=field)


class Dispatcher:
    def __init__(self, methods: list[Method], max_batch: int) -> None:
        self.methods = {m.name: m for m in methods}
        self.max_batch = max_batch

    async def _call(self, method: Method, params: dict[str, Any] | list[Any], context: Any) -> Any:
        if isinstance(params, list):
            raise InvalidArgument(detail="params must be an object")
        try:
            decoded = msgspec.convert(params, method.params)
        except msgspec.ValidationError as exc:
            raise _invalid(exc) from None
        # Every handler given a token authenticates it before anything else: past that, the token was valid.
        presented = getattr(decoded, "token", None) is not None and _is_caller(context)
        if presented:
            context.presenting(1)
        try:
            result = await method.handler(context, decoded)
        except Unauthorized:
            raise
        except PtydError:
            if presented:
                context.authenticated()
            raise
        except asyncio.CancelledError:
            raise
        except Exception:
            incident = secrets.token_hex(4)
            log.exception("incident %s in %s", incident, method.name)
            raise InternalError(incident=incident) from None
        finally:
            if presented:
                context.presenting(-1)
        if presented:
            context.authenticated()
        return result

    async def handle_frame(self, frame: bytes, context: Any) -> bytes | None:
        """One NDJSON frame in; its response line (without the newline) out, or None for notifications."""
        try:
            obj = msgspec.json.decode(frame)
        except (msgspec.DecodeError, RecursionError):
            return error_line(ParseError())
        if isinstance(obj, list):
            if not obj:
                return error_line(EmptyBatch())
            if len(obj) > self.max_batch:
                return error_line(BatchTooLarge(limit=self.max_batch))
            answers = await asyncio.gather(*(self._one(element, context) for element in obj))
            out = [a for a in answers if a is not None]
            return _encoder.encode(out) if out else None
        answer = await self._one(obj, context)
        return None if answer is None else _encoder.encode(answer)

    async def _one(self, obj: Any, context: Any) -> _ErrorResponse | _SuccessResponse | None:
        if not isinstance(obj, dict):
            return _error(InvalidRequest(detail="not an object"))
        raw_id = obj.get("id")
        reply_id = raw_id if _valid_id(raw_id) else None
        try:
            env = msgspec.convert(obj, _Envelope)
        except msgspec.ValidationError as exc:
            return _error(InvalidRequest(detail=str(exc)), reply_id)
        method = self.methods.get(env.method)
        try:
            if method is None:
                raise MethodNotFound(method=env.method[:128])
            result = await self._call(method, {} if env.params is msgspec.UNSET else env.params, context)
        except PtydError as exc:
            return None if env.id is msgspec.UNSET else _error(exc, env.id)
        return None if env.id is msgspec.UNSET else _SuccessResponse(result=result, id=env.id)
