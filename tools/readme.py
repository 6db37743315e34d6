"""Fill the README's included files (``make docs``): each ``<!-- include PATH -->`` ... ``<!-- end include -->``
pair gets PATH's text as a fenced block, so an example shown is the file a test runs. ``--check`` exits 1 when
the README is stale (tests/test_readme.py checks the same)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
INCLUDE = re.compile(r"(<!-- include (?P<path>\S+) -->\n)(?P<body>.*?)(<!-- end include -->)", re.S)
FENCES = {".ts": "ts", ".py": "python", ".sh": "sh", ".toml": "toml", ".json": "json"}


def included(path: str) -> str:
    source = (ROOT / path).read_text()
    return f"```{FENCES.get(Path(path).suffix, 'text')}\n{source.rstrip()}\n```\n"


def render(text: str) -> str:
    """``text`` with every include filled from the file it names."""
    return INCLUDE.sub(lambda m: m.group(1) + included(m.group("path")) + m.group(4), text)


def includes(text: str) -> list[str]:
    """The paths the README includes."""
    return [m.group("path") for m in INCLUDE.finditer(text)]


def main(argv: list[str]) -> int:
    current = README.read_text()
    fresh = render(current)
    if "--check" in argv:
        if fresh != current:
            print("README.md is stale: run make docs", file=sys.stderr)
            return 1
        return 0
    README.write_text(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
