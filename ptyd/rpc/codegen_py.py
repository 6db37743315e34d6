"""Generate the Python client's result types (``clients/python/ptyd_client/types.py``) from the OpenRPC document.

The client types derive from the daemon's wire types instead of being written twice: every result Struct becomes
a ``TypedDict``, and the enum and union aliases of ``ptyd.protocol`` (``WaitReason``, ``SessionStatus``) keep their
names. ``python -m ptyd.rpc.codegen_py`` writes the file, ``--check`` fails when the committed file is stale.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import sys
import textwrap
import types
import typing
from pathlib import Path
from typing import Any

import msgspec

from ptyd import __version__
from ptyd import protocol as p
from ptyd.errors import ERROR_CLASSES
from ptyd.rpc.methods import Api
from ptyd.rpc.openrpc import discover_method, openrpc_document

TARGET = Path(__file__).resolve().parents[2] / "clients" / "python" / "ptyd_client" / "types.py"
WIDTH = 110

HEADER = '''\
"""Result types of every ptyd RPC as the daemon sends them: JSON objects, typed as ``TypedDict``.

Generated from the daemon's OpenRPC document by ``python -m ptyd.rpc.codegen_py``: do not edit, regenerate.
A test fails when this file and the daemon's wire types (``ptyd/protocol.py``) disagree.
"""

from typing import Final, Literal, TypeAlias, TypedDict
'''


def _alias_docs() -> dict[str, str]:
    """Docstrings written under module-level aliases in ``ptyd.protocol`` (a string right after the assignment)."""
    tree = ast.parse(inspect.getsource(p))
    docs: dict[str, str] = {}
    for stmt, following in zip(tree.body, tree.body[1:], strict=False):
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[stmt.targets[0].id] = inspect.cleandoc(following.value.value)
    return docs


def _protocol_aliases() -> tuple[dict[frozenset[str], str], dict[frozenset[str], str]]:
    """Names the protocol gives to enums (``Literal`` aliases) and to unions of Structs, keyed by their members."""
    enums: dict[frozenset[str], str] = {}
    unions: dict[frozenset[str], str] = {}
    for name, value in vars(p).items():
        if name.startswith("_"):
            continue
        if typing.get_origin(value) is typing.Literal:
            enums[frozenset(str(v) for v in typing.get_args(value))] = name
        elif isinstance(value, types.UnionType):
            members = typing.get_args(value)
            if all(isinstance(m, type) and issubclass(m, msgspec.Struct) for m in members):
                unions[frozenset(m.__name__ for m in members)] = name
    return enums, unions


def _docstring(text: str, indent: str) -> list[str]:
    """A docstring block, wrapped to the line length, one paragraph per blank-line-separated block."""
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    paragraphs = [" ".join(block.split()) for block in text.split("\n\n")]
    width = WIDTH - len(indent)
    if len(paragraphs) == 1 and len(paragraphs[0]) + 6 <= width:
        return [f'{indent}"""{paragraphs[0]}"""']
    lines: list[str] = []
    for i, paragraph in enumerate(paragraphs):
        if i:
            lines.append("")
        wrapped = textwrap.wrap(paragraph, width - (3 if i == 0 else 0))
        lines += [(f'"""{line}' if i == 0 and j == 0 else line) for j, line in enumerate(wrapped)]
    lines.append('"""')
    return [f"{indent}{line}" if line else "" for line in lines]


class _Generator:
    def __init__(self, schemas: dict[str, Any]) -> None:
        self.schemas = schemas
        self.enum_names, self.union_names = _protocol_aliases()
        self.alias_docs = _alias_docs()
        self.emitted: set[str] = set()
        self.blocks: list[list[str]] = []

    def ref(self, schema: dict[str, Any]) -> str:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        self.emit_struct(name)
        return name

    def annotation(self, schema: dict[str, Any]) -> str:
        if "$ref" in schema:
            return self.ref(schema)
        if "anyOf" in schema:
            members = schema["anyOf"]
            refs = [m for m in members if "$ref" in m]
            key = frozenset(str(m["$ref"]).rsplit("/", 1)[-1] for m in refs)
            alias = self.union_names.get(key) if len(refs) > 1 else None
            if alias is not None:
                for member in refs:
                    self.ref(member)
                self.emit_alias(alias, " | ".join(self.ref(m) for m in refs))
                rest = [self.annotation(m) for m in members if "$ref" not in m]
                return " | ".join([alias, *rest])
            return " | ".join(self.annotation(m) for m in members)
        if "enum" in schema:
            values = [str(v) for v in schema["enum"]]
            literal = "Literal[" + ", ".join(json.dumps(v) for v in values) + "]"
            alias = self.enum_names.get(frozenset(values)) if len(values) > 1 else None
            if alias is None:
                return literal
            self.emit_alias(alias, literal)
            return alias
        kind = schema.get("type")
        if kind == "array":
            return f"list[{self.annotation(schema.get('items', {}))}]"
        if kind == "object":
            return f"dict[str, {self.annotation(schema.get('additionalProperties', {}))}]"
        simple = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}
        if kind in simple:
            return simple[str(kind)]
        raise ValueError(f"no Python type for the schema {schema!r}")

    def emit_alias(self, name: str, value: str) -> None:
        if name in self.emitted:
            return
        self.emitted.add(name)
        block = [f"{name}: TypeAlias = {value}"]
        if name in self.alias_docs:
            block += _docstring(self.alias_docs[name], "")
        self.blocks.append(block)

    def emit_struct(self, name: str) -> None:
        if name in self.emitted:
            return
        self.emitted.add(name)
        schema = self.schemas[name]
        # Dependencies are emitted first, so the module needs no forward references.
        fields = [(field, self.annotation(spec), spec) for field, spec in schema.get("properties", {}).items()]
        required = set(schema.get("required", []))
        total = all(field in required for field, _, _ in fields)
        block = [f"class {name}(TypedDict):" if total else f"class {name}(TypedDict, total=False):"]
        if schema.get("description"):
            block += [*_docstring(schema["description"], "    "), ""]
        for field, annotation, spec in fields:
            block.append(f"    {field}: {annotation}")
            if spec.get("description"):
                block += _docstring(spec["description"], "    ")
        if not fields:
            block.append("    pass")
        self.blocks.append(block)


def render() -> str:
    """The text of ``types.py`` for the daemon's current wire types."""
    methods = Api(None).methods()  # type: ignore[arg-type]
    document = openrpc_document(methods, __version__)
    gen = _Generator(document["components"]["schemas"])
    for method in document["methods"]:
        gen.annotation(method["result"]["schema"])
    for note in document["x-notifications"]:
        gen.annotation(note["params"])
    out = [HEADER]
    for block in gen.blocks:
        out += ["", "", *block]
    # Trailing commas keep one entry per line under ruff format, so a new method is a one-line diff.
    out += ["", "", "METHODS: Final = (", *(f"    {json.dumps(m['name'])}," for m in document["methods"]), ")"]
    out += ['"""Every RPC method the daemon serves besides ``rpc.discover``."""', ""]
    safe = [m.name for m in [*methods, discover_method(methods, __version__)] if m.retry_safe]
    out += ["RETRY_SAFE: Final = frozenset(", "    {", *(f"        {json.dumps(name)}," for name in safe), "    }", ")"]
    out += ['"""Methods safe to send again after the connection dropped mid-call (OpenRPC ``x-retry-safe``)."""', ""]
    out += ["ERROR_CODES: Final[dict[str, int]] = {"]
    out += [f"    {json.dumps(cls.kind)}: {cls.code}," for cls in ERROR_CLASSES]
    out += ["}", '"""``error.data.kind`` of every error the daemon reports (JSON-RPC\'s own first) and its code."""']
    return "\n".join(line.rstrip() for line in out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ptyd.rpc.codegen_py", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file is out of date")
    parser.add_argument("--stdout", action="store_true", help="print the file instead of writing it")
    args = parser.parse_args(argv)
    text = render()
    if args.stdout:
        sys.stdout.write(text)
        return 0
    if args.check:
        current = TARGET.read_text() if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET} is out of date: run python -m ptyd.rpc.codegen_py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
