"""JSON-RPC 2.0 framing and dispatch, per spec case, over the real socket."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import ROOT, Daemon, Rpc, RpcError


def raw(rpc: Rpc, line: bytes) -> dict:
    rpc.send_raw(line + b"\n")
    return json.loads(rpc.recv_line())


def test_parse_error(rpc: Rpc) -> None:
    reply = raw(rpc, b'{"jsonrpc": "2.0", "method": ')
    assert reply == {
        "jsonrpc": "2.0",
        "error": {"code": -32700, "message": "Parse error", "data": {"kind": "parse_error"}},
        "id": None,
    }


def test_invalid_utf8_is_a_parse_error(rpc: Rpc) -> None:
    assert raw(rpc, b'{"jsonrpc":"2.0","id":1,"method":"daemon_info\xff"}')["error"]["code"] == -32700


def test_deep_nesting_is_a_parse_error(rpc: Rpc) -> None:
    assert raw(rpc, b"[" * 100_000 + b"]" * 100_000)["error"]["code"] == -32700
    assert rpc.call("daemon_info")["pid"] > 0


@pytest.mark.parametrize(
    "request_",
    [
        {"jsonrpc": "1.0", "id": 1, "method": "daemon_info"},
        {"id": 1, "method": "daemon_info"},
        {"jsonrpc": "2.0", "id": 1, "method": 5},
        {"jsonrpc": "2.0", "id": 1, "method": "daemon_info", "params": "x"},
        {"jsonrpc": "2.0", "id": 1, "method": "daemon_info", "extra": True},
        {"jsonrpc": "2.0", "id": {"no": 1}, "method": "daemon_info"},
        5,
    ],
    ids=["version", "no-version", "method-type", "params-type", "extra-member", "id-type", "not-object"],
)
def test_invalid_request(rpc: Rpc, request_: object) -> None:
    reply = raw(rpc, json.dumps(request_).encode())
    assert reply["error"]["code"] == -32600
    expected_id = (
        request_.get("id") if isinstance(request_, dict) and not isinstance(request_.get("id"), dict) else None
    )
    assert reply["id"] == expected_id


def test_method_not_found(rpc: Rpc) -> None:
    with pytest.raises(RpcError) as err:
        rpc.call("terminal_teleport")
    assert err.value.code == -32601
    assert err.value.data == {"kind": "method_not_found", "method": "terminal_teleport"}


def test_invalid_params_names_the_field(rpc: Rpc, token: str) -> None:
    with pytest.raises(RpcError) as err:
        rpc.call("terminal_open", token=token, cols="wide")
    assert err.value.code == -32602
    assert err.value.kind == "invalid_params"
    assert "$.cols" in err.value.data["detail"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"session_id": "x", "input": "", "token": 5}, "$.token"),
        ({"session_id": "x", "token": "t"}, "input"),
        ({"session_id": "x", "input": "", "token": "t", "bogus": 1}, "bogus"),
        ({"session_id": "x", "input": "", "token": "t", "max_bytes": 10}, "$.max_bytes"),
    ],
    ids=["wrong-type", "missing", "unknown-field", "out-of-range"],
)
def test_invalid_params_cases(rpc: Rpc, params: dict, field: str) -> None:
    with pytest.raises(RpcError) as err:
        rpc.call("terminal_send", **params)
    assert err.value.code == -32602
    assert field in err.value.data["detail"]


def test_positional_params_are_invalid(rpc: Rpc) -> None:
    reply = raw(rpc, b'{"jsonrpc":"2.0","id":7,"method":"agent_register","params":["x"]}')
    assert reply["error"]["code"] == -32602
    assert reply["id"] == 7


def test_unknown_enum_value(rpc: Rpc, token: str) -> None:
    with pytest.raises(RpcError) as err:
        rpc.call("terminal_open", token=token, profile="sloppy")
    assert err.value.code == -32602
    assert "$.profile" in err.value.data["detail"]


def test_notification_gets_no_response(rpc: Rpc) -> None:
    rpc.send_raw(b'{"jsonrpc":"2.0","method":"daemon_info"}\n')
    rpc.send_raw(b'{"jsonrpc":"2.0","method":"no_such_method"}\n')
    assert rpc.call("daemon_info")["pid"] > 0  # the next line answered is this call's


def test_batch_answers_each_element(rpc: Rpc) -> None:
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "daemon_info"},
        {"jsonrpc": "2.0", "id": 2, "method": "nope"},
        {"jsonrpc": "2.0", "method": "daemon_info"},
        {"jsonrpc": "1.0", "id": 3, "method": "daemon_info"},
        7,
    ]
    reply = raw(rpc, json.dumps(batch).encode())
    assert isinstance(reply, list)
    by_id = {r["id"]: r for r in reply if r["id"] is not None}
    assert "result" in by_id[1]
    assert by_id[2]["error"]["code"] == -32601
    assert by_id[3]["error"]["code"] == -32600
    assert [r["error"]["code"] for r in reply if r["id"] is None] == [-32600]
    assert len(reply) == 4


def test_empty_and_oversized_batches(rpc: Rpc) -> None:
    assert raw(rpc, b"[]")["error"]["data"]["kind"] == "empty_batch"
    big = json.dumps([{"jsonrpc": "2.0", "id": i, "method": "daemon_info"} for i in range(10_000)]).encode()
    assert raw(rpc, big)["error"]["data"]["kind"] == "batch_too_large"


def test_all_notification_batch_gets_no_response(rpc: Rpc) -> None:
    rpc.send_raw(b'[{"jsonrpc":"2.0","method":"daemon_info"}]\n')
    assert rpc.call("daemon_info")["pid"] > 0


def test_oversized_frame_is_skipped_and_the_connection_lives(fresh_daemon: Daemon) -> None:
    fresh_daemon.config_path.write_text("max_frame_bytes = 4096\n")
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register")["token"]
        session = rpc.call("terminal_open", token=token, env={"PS1": "$ "})["session_id"]
        # Sent in pieces, so the daemon sees the frame grow past the limit before its newline arrives.
        rpc.send_raw(b'{"jsonrpc":"2.0","id":99,"method":"daemon_info","params":{"x":"' + b"a" * 3000)
        rpc.send_raw(b"a" * 3000)
        rpc.send_raw(b"a" * 3000 + b'"}}\n')
        reply = json.loads(rpc.recv_line())
        assert reply["error"] == {
            "code": -32600,
            "message": "Invalid request",
            "data": {"kind": "frame_too_large", "limit": 4096},
        }
        result = rpc.call("terminal_send", token=token, session_id=session, input="echo alive\n")
        assert "alive" in result["viewport"].splitlines()


def test_concurrent_requests_on_one_connection(rpc: Rpc, token: str) -> None:
    session = rpc.call("terminal_open", token=token, env={"PS1": "$ "})["session_id"]
    slow = rpc.request("terminal_send", {"token": token, "session_id": session, "input": "sleep 1; echo slept\n"})
    fast = rpc.request("daemon_info", {})
    first = rpc.recv()
    assert first["id"] == fast  # the read answered while the send was still waiting
    second = rpc.recv()
    assert second["id"] == slow
    assert "slept" in second["result"]["viewport"]
    rpc.call("terminal_close", token=token, session_id=session)


def test_rpc_discover_is_openrpc(rpc: Rpc) -> None:
    doc = rpc.call("rpc.discover")
    assert doc["openrpc"].startswith("1.")
    names = {m["name"] for m in doc["methods"]}
    assert {"terminal_open", "terminal_send", "terminal_read", "terminal_close", "rpc.discover"} <= names
    send = next(m for m in doc["methods"] if m["name"] == "terminal_send")
    assert [p["name"] for p in send["params"] if p["required"]] == ["token", "session_id", "input"]


def test_protocol_docs_are_generated_from_the_wire_types() -> None:
    from ptyd.rpc.docgen import render

    committed = (ROOT / "docs" / "protocol.md").read_text()
    assert committed == render(), "docs/protocol.md is stale: run `make docs`"


def test_daemon_info(rpc: Rpc, token: str) -> None:
    info = rpc.call("daemon_info", token=token)
    assert info["backend_types"] == ["exec", "shell"]
    assert info["containment"] in ("cgroup", "subreaper")
    assert info["protocol_version"] == 9
    workers = info["engine_workers"]  # 6: the engine workers' record
    if workers is not None:  # engines in workers (engine_process = "worker", the default)
        assert workers["paused"] is None
        assert len(workers["pids"]) == len(workers["rss_bytes"]) == workers["workers"]
        assert workers["crashes"] >= workers["hangs"] + workers["kills"]
    assert Path(f"/proc/{info['pid']}").exists()
