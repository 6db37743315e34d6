"""The Dispatcher against two fake methods: JSON-RPC 2.0's cases, per spec case, without a daemon or a socket.

tests/test_protocol.py runs the same cases over the real socket; these pin the dispatcher's own answers.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import msgspec
import pytest

from ptyd.errors import ERROR_CLASSES, FrameTooLarge, SessionBusy
from ptyd.rpc.dispatch import Dispatcher, Method, error_line

from .conftest import run


class EchoParams(msgspec.Struct, forbid_unknown_fields=True):
    text: str
    times: int = 1


class EchoResult(msgspec.Struct):
    text: str
    context: str


class FailParams(msgspec.Struct, forbid_unknown_fields=True):
    how: str


calls: list[str] = []


async def echo(context: Any, params: EchoParams) -> EchoResult:
    calls.append(params.text)
    return EchoResult(text=params.text * params.times, context=str(context))


async def fail(_: Any, params: FailParams) -> None:
    if params.how == "busy":
        raise SessionBusy("a send is already active", operation_id="op-1")
    if params.how == "cancel":
        raise asyncio.CancelledError
    raise RuntimeError("secret detail /home/someone")


DISPATCHER = Dispatcher(
    [Method("echo", EchoParams, EchoResult, echo, "Echo."), Method("fail", FailParams, None, fail, "Fail.")],
    max_batch=4,
)


def answer(frame: bytes | str | object) -> Any:
    if isinstance(frame, str):
        frame = frame.encode()
    line = frame if isinstance(frame, bytes) else json.dumps(frame).encode()
    out = run(lambda: DISPATCHER.handle_frame(line, "ctx"))
    return None if out is None else json.loads(out)


def request(method: str, params: Any = None, id: Any = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": id}
    if params is not None:
        message["params"] = params
    return message


def test_success_carries_the_result_and_the_id() -> None:
    assert answer(request("echo", {"text": "ab", "times": 2}, id="x")) == {
        "result": {"text": "abab", "context": "ctx"},
        "id": "x",
        "jsonrpc": "2.0",
    }


@pytest.mark.parametrize("id", [1.5, -2.25, 1e300])
def test_a_fractional_id_is_echoed(id: float) -> None:
    # JSON-RPC 2.0: numbers SHOULD NOT have fractional parts, but an id that has one is still an id to echo.
    assert answer(request("echo", {"text": "a"}, id=id))["id"] == id
    assert answer(request("echo", {"text": 5}, id=id))["id"] == id


def test_parse_error() -> None:
    assert answer('{"jsonrpc": "2.0", "method": ') == {
        "error": {"code": -32700, "message": "Parse error", "data": {"kind": "parse_error"}},
        "id": None,
        "jsonrpc": "2.0",
    }


def test_invalid_utf8_is_a_parse_error() -> None:
    assert answer(b'{"jsonrpc":"2.0","id":1,"method":"echo\xff"}')["error"]["code"] == -32700


def test_deep_nesting_is_a_parse_error() -> None:
    assert answer(b"[" * 100_000 + b"]" * 100_000)["error"]["code"] == -32700


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "1.0", "id": 1, "method": "echo"},
        {"id": 1, "method": "echo"},
        {"jsonrpc": "2.0", "id": 1, "method": 5},
        {"jsonrpc": "2.0", "id": 1, "method": "echo", "params": "x"},
        {"jsonrpc": "2.0", "id": 1, "method": "echo", "extra": True},
        {"jsonrpc": "2.0", "id": {"no": 1}, "method": "echo"},
        5,
    ],
    ids=["version", "no-version", "method-type", "params-type", "extra-member", "id-type", "not-object"],
)
def test_invalid_request(message: object) -> None:
    reply = answer(message)
    assert reply["error"]["code"] == -32600
    assert reply["error"]["data"]["kind"] == "invalid_request"
    valid_id = isinstance(message, dict) and not isinstance(message.get("id"), dict)
    assert reply["id"] == (message.get("id") if isinstance(message, dict) and valid_id else None)


def test_method_not_found_names_the_method() -> None:
    error = answer(request("teleport"))["error"]
    assert error == {
        "code": -32601,
        "message": "Method not found",
        "data": {"kind": "method_not_found", "method": "teleport"},
    }


@pytest.mark.parametrize(
    ("params", "detail", "field"),
    [
        ({"text": 5}, "$.text", "text"),
        ({}, "text", "text"),
        ({"text": "a", "bogus": 1}, "bogus", "bogus"),
        ({"text": "a", "times": "2"}, "$.times", "times"),
    ],
    ids=["wrong-type", "missing", "unknown-field", "wrong-type-optional"],
)
def test_invalid_params_names_the_field(params: dict[str, Any], detail: str, field: str) -> None:
    error = answer(request("echo", params))["error"]
    assert (error["code"], error["data"]["kind"], error["data"]["field"]) == (-32602, "invalid_params", field)
    assert detail in error["data"]["detail"]
    # A caller that shows only the message learns the field too.
    assert error["message"] == f"Invalid params: {error['data']['detail']}"
    assert f"`{field}`" in error["message"] or f"$.{field}`" in error["message"]


def test_positional_params_are_invalid() -> None:
    reply = answer(request("echo", ["a"], id=7))
    assert (reply["error"]["code"], reply["id"]) == (-32602, 7)


def test_application_error_keeps_its_code_message_and_data() -> None:
    assert answer(request("fail", {"how": "busy"}))["error"] == {
        "code": -32003,
        "message": "a send is already active",
        "data": {"kind": "session_busy", "operation_id": "op-1"},
    }


def test_unexpected_exception_is_an_incident_not_its_text(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="ptyd.rpc"):
        error = answer(request("fail", {"how": "bug"}))["error"]
    assert (error["code"], error["message"], error["data"]["kind"]) == (-32603, "Internal error", "internal")
    assert "secret" not in json.dumps(error)
    incident = error["data"]["incident"]
    assert any(f"incident {incident} in fail" in r.getMessage() and r.exc_info for r in caplog.records)


def test_cancellation_propagates() -> None:
    with pytest.raises(asyncio.CancelledError):
        answer(request("fail", {"how": "cancel"}))


def test_notification_gets_no_response_but_runs() -> None:
    calls.clear()
    assert answer({"jsonrpc": "2.0", "method": "echo", "params": {"text": "n"}}) is None
    assert calls == ["n"]
    assert answer({"jsonrpc": "2.0", "method": "no_such_method"}) is None
    assert answer({"jsonrpc": "2.0", "method": "fail", "params": {"how": "bug"}}) is None


def test_batch_answers_each_element_on_its_own() -> None:
    reply = answer(
        [
            request("echo", {"text": "a"}, id=1),
            request("nope", id=2),
            {"jsonrpc": "2.0", "method": "echo", "params": {"text": "b"}},
            7,
        ]
    )
    by_id = {r["id"]: r for r in reply if r["id"] is not None}
    assert by_id[1]["result"]["text"] == "a"
    assert by_id[2]["error"]["code"] == -32601
    assert [r["error"]["code"] for r in reply if r["id"] is None] == [-32600]
    assert len(reply) == 3


def test_empty_and_oversized_batches() -> None:
    assert answer([])["error"] == {"code": -32600, "message": "Invalid request", "data": {"kind": "empty_batch"}}
    error = answer([request("echo", {"text": "a"}, id=i) for i in range(5)])["error"]
    assert error["data"] == {"kind": "batch_too_large", "limit": 4}


def test_all_notification_batch_gets_no_response() -> None:
    assert answer([{"jsonrpc": "2.0", "method": "echo", "params": {"text": "a"}}]) is None


def test_the_frame_limit_error_is_a_line_of_the_same_table() -> None:
    assert json.loads(error_line(FrameTooLarge(limit=10))) == {
        "error": {"code": -32600, "message": "Invalid request", "data": {"kind": "frame_too_large", "limit": 10}},
        "id": None,
        "jsonrpc": "2.0",
    }


def test_every_error_kind_is_unique_and_in_its_range() -> None:
    kinds = [cls.kind for cls in ERROR_CLASSES]
    assert len(kinds) == len(set(kinds))
    for cls in ERROR_CLASSES:
        assert -32768 <= cls.code <= -32000, cls
        assert cls.__doc__, cls


class TokenParams(msgspec.Struct, forbid_unknown_fields=True):
    token: str


async def with_token(_: Any, params: TokenParams) -> str:
    return params.token


class Counting:
    """A Caller (the server's Peer): told of each call that carries a token, and when one was valid."""

    def __init__(self) -> None:
        self.presenting_now = 0
        self.valid = 0

    def presenting(self, delta: int) -> None:
        self.presenting_now += delta

    def authenticated(self) -> None:
        self.valid += 1


def test_a_caller_is_told_of_every_call_with_a_token_and_other_contexts_of_none() -> None:
    tokens = Dispatcher([Method("t", TokenParams, None, with_token, "Token.")], max_batch=4)
    line = json.dumps(request("t", {"token": "x"})).encode()
    caller = Counting()
    for _ in range(3):  # the answer for the context's class is kept: the same each time
        assert json.loads(run(lambda: tokens.handle_frame(line, caller)))["result"] == "x"
        assert json.loads(run(lambda: tokens.handle_frame(line, "ctx")))["result"] == "x"
    assert (caller.presenting_now, caller.valid) == (0, 3)
