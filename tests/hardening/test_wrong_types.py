"""Wrong types in every field of every method: the field list is the daemon's own OpenRPC document.

A request with one bad field is answered ``invalid_params`` naming that field, and runs nothing: the witness
and the test's own session are unchanged, and nothing is logged above WARNING.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from conftest import Daemon, Rpc, stress
from ptyd.rpc.methods import Api
from ptyd.rpc.openrpc import openrpc_document

from .conftest import OwnSession
from .probes import answers_to, assert_response, fuzzing, kept_connection

pytestmark = pytest.mark.usefixtures("unharmed", "own_untouched")

DOC = openrpc_document(Api(None).methods(), "x")  # type: ignore[arg-type]
FIELDS = [(m["name"], p["name"], p["schema"]) for m in DOC["methods"] for p in m["params"]]
REQUIRED = {m["name"]: [p["name"] for p in m["params"] if p["required"]] for m in DOC["methods"]}

FAST = fuzzing(200)
# --stress=ci (.ci/run's bounded slow tier) runs the long fuzzer within the default 120 s; at full length
# (make stress) it takes minutes on 2 cores, so it carries a bound of its own.
SLOW = fuzzing(stress(4000, ci=500))
SLOW_TIMEOUT = pytest.mark.timeout(stress(600, ci=120))

POOL: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**64,
    -(2**70),
    10**300,
    1.5,
    -0.0,
    1e308,
    "",
    "x",
    "\u0000",
    "\U0001f600" * 300,
    [],
    [1, "a", None],
    [[[[[]]]]],
    {},
    {"a": 1},
    {"token": "x", "session_id": "y"},
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=15,
)


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def accepted_types(schema: dict[str, Any]) -> set[str]:
    """The JSON types a field's schema admits at its top level."""
    if "anyOf" in schema:
        return set().union(*(accepted_types(member) for member in schema["anyOf"]))
    if "$ref" in schema:
        return {"object"}
    if "enum" in schema or "const" in schema:
        return {json_type(v) for v in schema.get("enum", [schema.get("const")])}
    kind = schema["type"]
    return set(kind) if isinstance(kind, list) else {kind}


def fits(value: Any, schema: dict[str, Any]) -> bool:
    types = accepted_types(schema)
    kind = json_type(value)
    return kind in types or (kind == "integer" and "number" in types)


def out_of_bounds(schema: dict[str, Any]) -> list[Any]:
    """Values of the right type just past each bound the schema declares."""
    members = schema.get("anyOf", [schema])
    values: list[Any] = []
    for member in members:
        if "minimum" in member:
            values += [member["minimum"] - 1, -(10**30)]
        if "maximum" in member:
            values += [member["maximum"] + 1, 10**30]
        if "minLength" in member:
            values.append("x" * (member["minLength"] - 1))
        if "maxLength" in member:
            values.append("x" * (member["maxLength"] + 1))
        if "maxItems" in member:
            values.append(["x"] * (member["maxItems"] + 1))
        if "items" in member and member["items"].get("type") == "string":
            values.append([7])
        if member.get("additionalProperties", {}) not in ({}, True, False):
            values.append({"A": 7})
        if "enum" in member:
            values.append("not-" + str(member["enum"][0]))
    return values


@pytest.fixture(scope="module")
def wire(module_daemon: Daemon) -> Iterator[Rpc]:
    with kept_connection(module_daemon) as rpc:
        yield rpc


@pytest.fixture
def own_untouched(own: OwnSession) -> Iterator[None]:
    """None of the rejected requests reached the test's own session either (a resize, a send, a close)."""
    yield
    assert own.shell.transcript() == ["$"]
    status = own.shell.call("terminal_status")
    assert (status["cols"], status["rows"], status["busy"]) == (160, 40, False)


def base_params(own: OwnSession, method: str) -> dict[str, Any]:
    valid = {
        "token": own.token,
        "session_id": own.session_id,
        "input": "",
        "signal": "SIGWINCH",
        "cols": 80,
        "rows": 24,
        "subscription_id": "sub-0000000000000000",
    }
    missing = [name for name in REQUIRED[method] if name not in valid]
    assert missing == [], f"no valid value known for the required fields {missing} of {method}: add one here"
    return {name: valid[name] for name in REQUIRED[method]}


def call_raw(wire: Rpc, method: str, params: Any) -> dict[str, Any]:
    frame = json.dumps({"jsonrpc": "2.0", "id": 11, "method": method, "params": params}).encode()
    [reply] = answers_to(wire, frame, 1)
    assert_response(reply)
    assert reply["id"] == 11
    return reply  # type: ignore[no-any-return]


def assert_invalid_params(reply: dict[str, Any], field: str | None) -> None:
    assert "error" in reply, f"accepted: {reply}"
    assert reply["error"]["code"] == -32602, reply
    assert reply["error"]["data"]["kind"] == "invalid_params", reply
    if field is not None:
        assert f"`$.{field}" in reply["error"]["data"]["detail"], reply


@pytest.mark.parametrize(("method", "field", "schema"), FIELDS, ids=[f"{m}.{f}" for m, f, _ in FIELDS])
def test_every_field_rejects_every_wrong_type(wire: Rpc, own: OwnSession, method: str, field: str, schema: Any) -> None:
    wrong = [v for v in POOL if not fits(v, schema)] + out_of_bounds(schema)
    assert wrong, f"nothing is wrong for {method}.{field}?"
    for value in wrong:
        params = base_params(own, method) | {field: value}
        assert_invalid_params(call_raw(wire, method, params), field)


@pytest.mark.parametrize("method", list(REQUIRED))
def test_missing_unknown_and_positional_params(wire: Rpc, own: OwnSession, method: str) -> None:
    for field in REQUIRED[method]:
        params = base_params(own, method)
        del params[field]
        reply = call_raw(wire, method, params)
        assert_invalid_params(reply, None)
        assert f"`{field}`" in reply["error"]["data"]["detail"]
    unknown = call_raw(wire, method, base_params(own, method) | {"bogus": 1})
    assert_invalid_params(unknown, None)
    assert "unknown field `bogus`" in unknown["error"]["data"]["detail"]
    positional = list(base_params(own, method).values()) or [None]  # [] is no params at all, which is fine
    assert_invalid_params(call_raw(wire, method, positional), None)


def check_random_wrong_value(wire: Rpc, own: OwnSession, where: tuple[str, str, Any], value: Any) -> None:
    method, field, schema = where
    assume(not fits(value, schema))
    assert_invalid_params(call_raw(wire, method, base_params(own, method) | {field: value}), field)


@FAST
@given(st.sampled_from(FIELDS), json_values)
def test_random_wrong_values(wire: Rpc, own: OwnSession, where: tuple[str, str, Any], value: Any) -> None:
    check_random_wrong_value(wire, own, where, value)


@pytest.mark.slow
@SLOW_TIMEOUT
@SLOW
@given(st.sampled_from(FIELDS), json_values)
def test_random_wrong_values_long(wire: Rpc, own: OwnSession, where: tuple[str, str, Any], value: Any) -> None:
    check_random_wrong_value(wire, own, where, value)


ENVELOPE_WRONG: dict[str, list[Any]] = {
    "jsonrpc": [None, 2, 2.0, "2", "1.0", "2.0 ", [], {}],
    "method": [None, 1, True, [], {}, ["daemon_info"]],
    "params": [None, 1, "x", True],
    "id": [True, [], {}, [1]],  # a fractional id is a number, echoed as JSON-RPC 2.0 says (test_dispatch)
}


@pytest.mark.parametrize("field", list(ENVELOPE_WRONG))
def test_envelope_fields_reject_wrong_types(wire: Rpc, field: str) -> None:
    for value in ENVELOPE_WRONG[field]:
        request = {"jsonrpc": "2.0", "id": 3, "method": "daemon_info"} | {field: value}
        [reply] = answers_to(wire, json.dumps(request).encode(), 1)
        assert_response(reply)
        assert reply["error"]["code"] == -32600, (field, value, reply)
        assert reply["id"] == (3 if field != "id" else None)
