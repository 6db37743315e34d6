"""The OpenRPC document served by ``rpc.discover``, generated from the method table's msgspec Structs."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Iterator
from typing import Any

import msgspec

from ptyd.errors import APPLICATION_ERRORS
from ptyd.protocol import NOTIFICATIONS
from ptyd.rpc.dispatch import Method

REF = "#/components/schemas/{name}"


def _members(result: Any) -> tuple[Any, ...]:
    """A result union of Structs is documented as anyOf (msgspec only models tagged Struct unions)."""
    return typing.get_args(result) if isinstance(result, types.UnionType) else (result,)


def openrpc_document(methods: list[Method], version: str) -> dict[str, Any]:
    results = [_members(m.result) for m in methods]
    all_types = [m.params for m in methods] + [t for members in results for t in members]
    schemas, components = msgspec.json.schema_components([*all_types, *NOTIFICATIONS.values()], ref_template=REF)
    result_schemas = iter(schemas[len(methods) :])
    out_methods = []
    for i, method in enumerate(methods):
        params_schema = components[method.params.__name__]
        properties = params_schema.get("properties", {})
        required = set(params_schema.get("required", []))
        params = [
            {
                "name": name,
                "required": name in required,
                "schema": schema,
                **({"description": schema["description"]} if "description" in schema else {}),
            }
            for name, schema in properties.items()
        ]
        out_methods.append(
            {
                "name": method.name,
                "summary": method.summary.splitlines()[0] if method.summary else method.name,
                "description": method.summary,
                "paramStructure": "by-name",
                "params": params,
                "result": {"name": "result", "schema": _result_schema(results[i], result_schemas)},
                "errors": [{"$ref": f"#/components/errors/{cls.kind}"} for cls in APPLICATION_ERRORS],
                # An extension: whether a client may send it again after losing the connection mid-call.
                "x-retry-safe": method.retry_safe,
            }
        )
    errors = {
        cls.kind: {"code": cls.code, "message": (cls.__doc__ or cls.kind).strip(), "data": {"kind": cls.kind}}
        for cls in APPLICATION_ERRORS
    }
    return {
        "openrpc": "1.3.2",
        "info": {
            "title": "ptyd",
            "version": version,
            "description": "Persistent PTY sessions for AI agents: JSON-RPC 2.0, one request per line, "
            "over a Unix socket.",
        },
        "methods": out_methods,
        "components": {"schemas": components, "errors": errors},
        # OpenRPC has no notifications: the ones the daemon sends are listed in an extension field.
        "x-notifications": [
            {"name": name, "params": {"$ref": REF.format(name=params.__name__)}, "description": params.__doc__ or ""}
            for name, params in NOTIFICATIONS.items()
        ],
    }


def _result_schema(members: tuple[Any, ...], schemas: Iterator[dict[str, Any]]) -> dict[str, Any]:
    taken = [next(schemas) for _ in members]
    return taken[0] if len(taken) == 1 else {"anyOf": taken}


def discover_method(methods: list[Method], version: str) -> Method:
    """``rpc.discover``: the document describes ``methods`` and itself."""

    class DiscoverParams(msgspec.Struct, forbid_unknown_fields=True):
        """Describe this service: an OpenRPC 1.3 document generated from the daemon's own wire types."""

    document: dict[str, Any] = {}
    described = list(methods)  # as now: the caller appends this method to its own list

    async def discover(_: Any, __: DiscoverParams) -> dict[str, Any]:
        # Built at the first call, not at start: 0.1-0.2 s a handover's new daemon would serve nothing (issue 28).
        if not document:
            document.update(openrpc_document([*described, method], version))
        return document

    method = Method(
        "rpc.discover",
        DiscoverParams,
        dict[str, Any],
        discover,
        inspect.cleandoc(DiscoverParams.__doc__ or ""),
        retry_safe=True,
    )
    return method
