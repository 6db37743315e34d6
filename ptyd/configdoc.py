"""The configuration reference, generated from ``ptyd/config.py``: each key, its default, and the comment above it.

``python -m ptyd.configdoc markdown`` writes docs/config.md, ``example`` docs/config.example.toml (``make docs``);
``ptyd --print-config`` prints the effective configuration in the same TOML form. The reasons are the comments
in ``Config`` itself, so the docs cannot drift from the code.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import json
import sys
from dataclasses import dataclass
from typing import Any

import msgspec

from ptyd import config as config_module
from ptyd.config import Config


@dataclass(frozen=True)
class Key:
    name: str
    section: str
    reason: str


def keys() -> list[Key]:
    """Every field of :class:`Config`, in source order, with its section and the comment lines above it."""
    source = inspect.getsource(config_module)
    lines = source.splitlines()
    tree = ast.parse(source)
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == Config.__name__).body
    found: list[Key] = []
    for node in body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        comment: list[str] = []
        row = node.lineno - 2  # the line above, 0-based
        while row >= 0 and lines[row].strip().startswith("#") and not lines[row].strip().startswith("# ---"):
            comment.insert(0, lines[row].strip().removeprefix("#").strip())
            row -= 1
        section = ""
        for above in reversed(lines[: node.lineno - 1]):
            if above.strip().startswith("# ---"):
                section = above.strip().strip("#- ").strip()
                break
        reason = " ".join(comment)
        if not reason and found and row >= 0 and lines[row].strip() and found[-1].section == section:
            reason = found[-1].reason  # a field right below another shares its comment (a pair of bounds)
        found.append(Key(node.target.id, section, reason))
    return found


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and abs(value) >= 10_000:
        return f"{value:_}"  # TOML reads 4_194_304 as 4194304
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(value, tuple | list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, msgspec.Struct):
        return toml_value({k: v for k, v in msgspec.to_builtins(value).items() if v is not None})
    if isinstance(value, dict):  # an inline table; keys quoted, as a profile or agent name may hold dots
        return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML form for {value!r}")


def toml(config: Config, *, commented: bool) -> str:
    """``config`` as TOML, one key per line under its reason; ``commented`` comments the keys out (the example)."""
    values = msgspec.structs.asdict(config)
    out: list[str] = []
    for section, group in itertools.groupby(keys(), key=lambda k: k.section):
        out += ["", f"# --- {section} ---"]
        for key in group:
            out += ["", *(f"# {line}" for line in wrap(key.reason, 116))]
            out.append(f"{'# ' if commented else ''}{key.name} = {toml_value(values[key.name])}")
    return "\n".join(out).lstrip("\n") + "\n"


def wrap(text: str, width: int) -> list[str]:
    lines: list[str] = []
    current = ""
    for word in text.split():
        if current and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}".strip()
    return [*lines, current] if current else lines


def example() -> str:
    return (
        "# ptyd configuration: $XDG_CONFIG_HOME/ptyd/config.toml (~/.config/ptyd/config.toml), or ptyd --config FILE.\n"
        "# Every key, commented out at its default; uncomment what you change. Unknown keys are an error.\n"
        "# Generated from ptyd/config.py by `make docs`; `ptyd --print-config` shows the values in effect.\n\n"
        + toml(Config(), commented=True)
    )


def markdown() -> str:
    defaults = msgspec.structs.asdict(Config())
    out = [
        "# Configuration",
        "",
        "<!-- Generated from ptyd/config.py by `make docs` (python -m ptyd.configdoc markdown); do not edit. -->",
        "",
        "ptyd reads one TOML file: `--config FILE`, else `$XDG_CONFIG_HOME/ptyd/config.toml` (`~/.config/ptyd/"
        "config.toml`); a missing default file means every default below. Keys sit at the top level (a `[ptyd]` "
        "table holding them is accepted too); an unknown key or a value out of bounds is an error that names it, "
        "so a typo is never silently ignored. `SIGHUP` re-reads the file: new sessions, connections and calls "
        "follow it, and the limits apply at once; a live session keeps the settings it was opened with, and "
        "`containment`, `fd_keeper`, `fd_keeper_grace_ms` and `listen_backlog` are read at start only (a restart "
        "or a handover applies them). `ptyd --print-config` prints the "
        "values in effect; [config.example.toml](config.example.toml) lists every key at its default.",
        "",
    ]
    for section, group in itertools.groupby(keys(), key=lambda k: k.section):
        out += [f"## {section}", "", "| key | default | why |", "|---|---|---|"]
        for key in group:
            reason = key.reason.replace("|", "\\|")
            out.append(f"| `{key.name}` | `{toml_value(defaults[key.name])}` | {reason} |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str]) -> None:
    kinds = {"markdown": markdown, "example": example}
    if len(argv) != 1 or argv[0] not in kinds:
        sys.exit(f"usage: python -m ptyd.configdoc {{{'|'.join(kinds)}}}")
    sys.stdout.write(kinds[argv[0]]())


if __name__ == "__main__":
    main(sys.argv[1:])
