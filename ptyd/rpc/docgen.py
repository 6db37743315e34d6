"""Render docs/protocol.md from the same OpenRPC document ``rpc.discover`` serves (``make docs``).

A test checks the committed file matches, so the docs cannot drift from the wire types.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import sys
from typing import Any

from ptyd import __version__, protocol
from ptyd.errors import APPLICATION_ERRORS, ERROR_CLASSES, PtydError
from ptyd.rpc.methods import Api
from ptyd.rpc.openrpc import discover_method, openrpc_document

INTRO = """\
# ptyd protocol

Generated from `ptyd/protocol.py` by `make docs`; `rpc.discover` serves the same content as an OpenRPC document.

## Framing

JSON-RPC 2.0 over a Unix stream socket, newline-delimited: one request (or batch array) per line, UTF-8,
terminated by `\\n`; one response per line. Requests on one connection run concurrently and responses carry the
request's `id`; a request without `id` is a notification and gets no response. Parameters are always by name.
Field names are snake_case.

The socket is `--socket PATH`, else `$PTYD_SOCKET`, else `$XDG_RUNTIME_DIR/ptyd/ptyd.sock`, else
`/tmp/ptyd-$UID/ptyd.sock`, in a directory of mode 0700 (socket 0600). A connection from another uid is closed.

## Errors
"""


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " \\| ".join(_type(s) for s in schema["anyOf"])
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        return f"{_type(schema.get('items', {}))}[]"
    if kind == "object" and "additionalProperties" in schema:
        return f"map of {_type(schema['additionalProperties'])}"
    if kind == "null":
        return "null"
    return str(kind or "any")


def _bounds(schema: dict[str, Any]) -> str:
    parts = []
    for key, label in (
        ("minimum", ">="),
        ("maximum", "<="),
        ("minLength", "min length"),
        ("maxLength", "max length"),
    ):
        if key in schema:
            parts.append(f"{label} {schema[key]}")
    for option in schema.get("anyOf", []):
        extra = _bounds(option)
        if extra:
            parts.append(extra)
    return ", ".join(parts)


def _fields(schema: dict[str, Any]) -> list[str]:
    required = set(schema.get("required", []))
    rows = ["| field | type | required | default | description |", "|---|---|---|---|---|"]
    for name, field in schema.get("properties", {}).items():
        default = f"`{json.dumps(field['default'])}`" if "default" in field else ""
        description = field.get("description", "")
        bounds = _bounds(field)
        if bounds:
            description = f"{description} ({bounds})".strip()
        rows.append(f"| `{name}` | {_type(field)} | {'yes' if name in required else ''} | {default} | {description} |")
    return rows


def vocabulary() -> list[tuple[str, list[str], str]]:
    """The string enums of protocol.py (``Name = Literal[...]`` with a docstring under it): name, values, text.

    Read from the source, since a type alias keeps no docstring at run time."""
    tree = ast.parse(inspect.getsource(protocol))
    found = []
    for node, after in zip(tree.body, tree.body[1:], strict=False):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Subscript)
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id == "Literal"
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            name = node.targets[0].id  # type: ignore[attr-defined]
            values = [str(v) for v in getattr(protocol, name).__args__]
            found.append((name, values, " ".join(after.value.value.split())))
    return found


def _link_sees(text: str, headings: set[str]) -> str:
    """``(see ReadyBasis)`` in a description becomes a link to that type's section."""
    return re.sub(
        r"\(see (\w+)\)",
        lambda m: f"(see [{m.group(1)}](#{m.group(1).lower()}))" if m.group(1) in headings else m.group(0),
        text,
    )


def _meaning(cls: type[PtydError]) -> str:
    return " ".join((cls.__doc__ or "").split()).replace("``", "`")  # reST literals in Markdown


def _standard_errors() -> list[str]:
    """JSON-RPC's own errors, one row per code (a code's kinds together)."""
    by_code: dict[int, list[type[PtydError]]] = {}
    for cls in ERROR_CLASSES:
        if cls.standard():
            by_code.setdefault(cls.code, []).append(cls)
    rows = ["| code | `error.data.kind` | meaning |", "|---|---|---|"]
    for code, classes in by_code.items():
        kinds = ", ".join(f"`{cls.kind}`" for cls in classes)
        rows.append(f"| {code} | {kinds} | {' '.join(_meaning(cls) for cls in classes)} |")
    return rows


def render() -> str:
    methods = Api(None).methods()  # type: ignore[arg-type]
    doc = openrpc_document([*methods, discover_method(methods, __version__)], __version__)
    schemas = doc["components"]["schemas"]
    out = [
        INTRO,
        *_standard_errors(),
        "",
        "Application errors (`-32000` to `-32099`):",
        "",
        "| code | kind | meaning |",
        "|---|---|---|",
    ]
    for cls in APPLICATION_ERRORS:
        out.append(f"| {cls.code} | `{cls.kind}` | {_meaning(cls)} |")
    out += ["", "## Methods", ""]
    for method in doc["methods"]:
        out += [f"### `{method['name']}`", "", method["description"] or method["name"], ""]
        params: dict[str, Any] = {"properties": {p["name"]: p["schema"] for p in method["params"]}}
        params["required"] = [p["name"] for p in method["params"] if p["required"]]
        out += ["Params:", "", *(_fields(params) if method["params"] else ["(none)"]), ""]
        out += [f"Result: {_type(method['result']['schema'])}", ""]
    out += [
        "## Notifications",
        "",
        "Sent by the daemon, without `id`, on a connection that subscribed (`terminal_subscribe`): "
        '`{"jsonrpc": "2.0", "method": NAME, "params": {...}}`. A client reading responses skips lines that '
        "have a `method` and no `id`.",
        "",
    ]
    for note in doc["x-notifications"]:
        out += [f"### `{note['name']}`", "", f"Params: {_type(note['params'])}", ""]
    out += ["## Types", ""]
    words = vocabulary()
    for name, values, text in words:
        out += [
            f"### {name}",
            "",
            text.replace("``", "`"),
            "",
            "One of: " + " \\| ".join(f"`{json.dumps(v)}`" for v in values),
            "",
        ]
    for name in sorted(schemas):
        schema = schemas[name]
        if name.endswith("Params"):
            continue
        out += [f"### {name}", ""]
        if schema.get("description"):
            out += [schema["description"], ""]
        if "properties" in schema:
            out += [*_fields(schema), ""]
        elif "anyOf" in schema:
            out += [f"One of: {_type(schema)}", ""]
    headings = set(schemas) | {name for name, _, _ in words}
    return _link_sees("\n".join(out).rstrip() + "\n", headings)


if __name__ == "__main__":
    sys.stdout.write(render())
