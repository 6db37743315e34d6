"""Tables written once: the retry-safe methods (the method table's ``retry_safe``, emitted in OpenRPC and the
clients' generated files), and every prose copy of them held to it; ptyd-mcp's defaults are the daemon's."""

from __future__ import annotations

import re
from pathlib import Path

from ptyd import protocol
from ptyd.rpc.methods import Api
from ptyd.rpc.openrpc import discover_method, openrpc_document
from ptyd_client import core, errors
from ptyd_client import types as wire

ROOT = Path(__file__).resolve().parents[2]
METHODS = Api(None).methods()  # type: ignore[arg-type]
ALL = [*METHODS, discover_method(METHODS, "test")]
SAFE = {m.name for m in ALL if m.retry_safe}
UNSAFE = {m.name for m in ALL if not m.retry_safe}


def names(text: str) -> set[str]:
    return set(re.findall(r"`+((?:terminal|agent|daemon)_\w+|rpc\.discover)`+", text))


def test_openrpc_says_which_methods_are_retry_safe() -> None:
    document = openrpc_document(ALL, "test")
    assert {m["name"] for m in document["methods"] if m["x-retry-safe"]} == SAFE
    assert "terminal_send" not in SAFE  # a repeat types again unless it carries the same request_key
    assert {"terminal_output", "terminal_open", "terminal_signal"} <= UNSAFE


def test_the_clients_retry_tables_are_generated_from_it() -> None:
    assert set(wire.RETRY_SAFE) == SAFE
    assert SAFE | {"terminal_send"} == core.RETRY_SAFE  # every send of this client carries a request_key
    ts = (ROOT / "clients" / "typescript" / "src" / "protocol.ts").read_text()
    listed = re.search(r"RETRY_SAFE_METHODS: readonly string\[\] = \[(.*?)\];", ts, re.S)
    assert listed is not None
    assert set(re.findall(r'"([\w.]+)"', listed.group(1))) == SAFE
    assert "new Set(RETRY_SAFE_METHODS)" in (ROOT / "clients" / "typescript" / "src" / "client.ts").read_text()


def test_the_prose_lists_match_the_table() -> None:
    python_readme = (ROOT / "clients" / "python" / "README.md").read_text()
    sentence = python_readme[python_readme.index("a send is never typed twice.") :].split("are not repeated")[0]
    assert names(sentence) == UNSAFE - {"terminal_send"}
    doc = errors.ConnectionLost.__doc__ or ""
    assert names(doc.split("; every other call")[0]) == UNSAFE - {"terminal_send"}
    ts_readme = (ROOT / "clients" / "typescript" / "README.md").read_text()
    repeated = ts_readme[ts_readme.index("only if repeating it changes") :].split("the others reject")[0]
    assert names(repeated) == SAFE


def test_ptyd_mcp_states_the_daemons_defaults() -> None:
    from ptyd_mcp import tools

    text = (ROOT / "ptyd_mcp" / "tools.py").read_text()
    for wrong in ("30000", "10000", "3000", "32768", "30_000", "32_768"):
        assert not re.search(rf"\b{wrong}\b", text), f"tools.py restates a default ({wrong}): use protocol.DEFAULTS"
    opened = next(t for t in tools.TOOLS if t.name == "terminal_open")
    timeout = opened.input["properties"]["timeout_ms"]["description"]
    assert f"(default {protocol.DEFAULTS.open_timeout_ms})" in timeout
