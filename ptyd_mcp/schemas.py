"""JSON Schemas of the tools, derived from the daemon's wire types (``ptyd/protocol.py``) so they cannot drift.

Input schemas are the daemon's params without ``token`` (``ptyd-mcp`` holds it) and without the fields it sets
itself; optional fields lose their ``null`` alternative, which only means "the daemon's default". Output schemas
are the daemon's result Structs, open to added fields: the protocol grows by addition, so a newer daemon's result
still validates.
"""

from __future__ import annotations

from typing import Any

import msgspec

JsonSchema = dict[str, Any]


def _inline_root(struct: type[msgspec.Struct]) -> JsonSchema:
    """msgspec puts every Struct in ``$defs`` and refers to it from the root; MCP wants an object at the root."""
    schema = msgspec.json.schema(struct)
    defs: dict[str, Any] = schema["$defs"]
    root: JsonSchema = dict(defs.pop(struct.__name__))
    root.pop("title", None)
    if defs:
        root["$defs"] = defs
    return root


def _open(node: Any) -> Any:
    """Drop ``additionalProperties: false`` everywhere (see the module docstring)."""
    if isinstance(node, dict):
        return {k: _open(v) for k, v in node.items() if not (k == "additionalProperties" and v is False)}
    if isinstance(node, list):
        return [_open(v) for v in node]
    return node


def _without_null(prop: JsonSchema) -> JsonSchema:
    """``{"anyOf": [X, {"type": "null"}], "default": null}`` becomes X with the outer description."""
    alternatives = prop.get("anyOf")
    if not isinstance(alternatives, list):
        return prop
    rest = [alt for alt in alternatives if alt != {"type": "null"}]
    if len(rest) == len(alternatives):
        return prop
    inner: JsonSchema = dict(rest[0]) if len(rest) == 1 else {"anyOf": rest}
    if "description" in prop:
        inner["description"] = prop["description"]
    return inner


def output_schema(struct: type[msgspec.Struct], *, drop: tuple[str, ...] = ()) -> JsonSchema:
    """The schema of a daemon result object, as a tool's ``outputSchema``; without the fields in ``drop`` (a
    result this server returns in another form)."""
    result: JsonSchema = _open(_inline_root(struct))
    if drop:
        result["properties"] = {k: v for k, v in result.get("properties", {}).items() if k not in drop}
        if "required" in result:
            result["required"] = [name for name in result["required"] if name not in drop]
    return result


def input_schema(
    struct: type[msgspec.Struct],
    *,
    drop: tuple[str, ...] = (),
    describe: dict[str, str] | None = None,
    defaults: dict[str, Any] | None = None,
    extra: dict[str, JsonSchema] | None = None,
) -> JsonSchema:
    """The daemon's params of one method as a tool's ``inputSchema``: no token, no fields in ``drop``, model-facing
    descriptions from ``describe`` (replacing the protocol's), the defaults this server applies where they are not
    the daemon's (``defaults``), and MCP-only properties from ``extra``."""
    root = _inline_root(struct)
    gone = {"token", *drop}
    properties: dict[str, JsonSchema] = {}
    for name, prop in root.get("properties", {}).items():
        if name in gone:
            continue
        prop = _without_null(prop)
        if describe and name in describe:
            prop["description"] = describe[name]
        if defaults and name in defaults:
            prop["default"] = defaults[name]
        properties[name] = prop
    properties.update(extra or {})
    schema: JsonSchema = {"type": "object", "properties": properties}
    required = [name for name in root.get("required", []) if name not in gone]
    if required:
        schema["required"] = required
    if "$defs" in root:
        schema["$defs"] = root["$defs"]
    schema["additionalProperties"] = False
    return schema
