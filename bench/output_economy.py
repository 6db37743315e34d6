"""What an agent reads of real outputs, in tokens (UTF-8 bytes / 4): before (the daemon's default 32 KiB viewport,
every line as drawn) and after (ptyd-mcp's defaults: an 8 KiB budget, ``compact``, ``join_wrapped``), with an
8 KiB plain viewport between them to tell the budget's share from the economy's.

Each scenario runs once per variant, side by side on one daemon, in a fresh session. Run:
``.venv/bin/python -m bench.output_economy`` (it needs network to PyPI for the pip scenario); it prints the
Markdown table of docs/output-economy.md.
"""

from __future__ import annotations

import shutil
import sys
import sysconfig
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import DaemonProcess, private_dir, register, shell_env
from ptyd.terminal.economy import LOOKS_LIKE_ERROR

VARIANTS = {
    "before: 32 KiB": {"compact": False, "max_bytes": 32 * 1024},
    "8 KiB": {"compact": False, "max_bytes": 8192},
    "agent defaults (16 KiB compact)": {},  # protocol 5: what an agent's token gets when it names nothing
    "after: 8 KiB compact": {"compact": True, "join_wrapped": True, "max_bytes": 8192},
}


@dataclass
class Scenario:
    name: str
    command: str  # {n}: the run's number, for commands that need a place of their own
    timeout_ms: int = 180_000


def _setup(work: Path) -> list[Scenario]:
    pkg = work / "pkg"
    (pkg / "demo_pkg").mkdir(parents=True)
    (pkg / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "demo-pkg"\nversion = "1.0"\n'
    )
    (pkg / "demo_pkg" / "__init__.py").write_text("VALUE = 42\n")
    tests = work / "test_generated.py"
    tests.write_text(
        textwrap.dedent(
            """
            import pytest

            @pytest.mark.parametrize("n", range(600))
            def test_number(n):
                assert n % 250 != 249, f"n={n} is unlucky"

            def test_division():
                assert 1 / 0
            """
        )
    )
    build_log = work / "build.log"
    with build_log.open("w") as f:  # a long build with one error in its middle
        for i in range(20_000):
            f.write(f"[{i:5}/20000] CC src/module_{i}.o\n")
            if i == 9_000:
                f.write("src/module_9000.c:42:7: error: 'sizes' undeclared (first use in this function)\n")
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    src = work / "src"
    for name in ("email", "json", "http", "xml", "asyncio", "unittest", "logging", "importlib", "concurrent"):
        shutil.copytree(stdlib / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    python = sys.executable
    return [
        Scenario(
            "pip install (a local package, build deps from PyPI)",
            f"python3 -m venv {work}/venv{{n}} && {work}/venv{{n}}/bin/pip install --no-cache-dir {pkg}\n",
        ),
        Scenario("pytest -v (601 tests, 3 failures)", f"{python} -m pytest -v -p no:cacheprovider {tests}\n"),
        Scenario("build: python3 -m compileall (9 stdlib packages)", f"python3 -m compileall -f {src}\n"),
        Scenario("a 20,000-line build log with one error", f"cat {build_log}\n"),
        Scenario("yes for 1 s", "timeout 1 yes\n"),
        Scenario(
            "a 200k-line loop",
            "python3 -c \"for i in range(200000): print(f'processing item {{i}} of 200000: ok')\"\n",
        ),
    ]


def _tokens(text: str) -> int:
    return round(len(text.encode()) / 4)


def run() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with private_dir() as directory, DaemonProcess(directory) as daemon, tempfile.TemporaryDirectory() as tmp:
        caller = daemon.connect()
        token = register(caller, "economy")
        scenarios = _setup(Path(tmp))
        for scenario in scenarios:
            row: dict[str, Any] = {"scenario": scenario.name}
            for n, (variant, options) in enumerate(VARIANTS.items()):
                opened = caller.call("terminal_open", token=token, env=shell_env(), cwd=tmp)
                sid = opened["session_id"]
                result = caller.call(
                    "terminal_send",
                    token=token,
                    session_id=sid,
                    input=scenario.command.format(n=n),
                    timeout_ms=scenario.timeout_ms,
                    idle_ms=scenario.timeout_ms,  # a quiet build step is not the end: wait for the prompt
                    **options,
                )
                lines = result["lines"]
                count = lines["end_line"] - lines["start_line"]
                full = caller.call(
                    "terminal_read",
                    token=token,
                    session_id=sid,
                    start_line=max(lines["start_line"], lines["end_line"] - 10_000),
                    max_lines=min(count, 10_000),
                    max_bytes=16 * 1024 * 1024,
                )
                errors = [line for line in full["lines"] if LOOKS_LIKE_ERROR.search(line)]
                shown = set(result["viewport"].splitlines())
                retained = _tokens("\n".join(full["lines"]))
                row.setdefault("lines", count)
                # Beyond what scrollback keeps: estimated from the retained lines' average size.
                row.setdefault("full", round(retained * count / max(len(full["lines"]), 1)))
                row.setdefault("dropped", len(full["lines"]) < count)
                row[variant] = _tokens(result["viewport"])
                row[variant + " errors"] = (sum(line in shown for line in errors), len(errors))
                caller.call("terminal_close", token=token, session_id=sid)
            rows.append(row)
        caller.close()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    head = ["output", "lines", "all of it", *VARIANTS, "saved", "error lines shown (before / after)"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    names = list(VARIANTS)
    before, after = names[0], names[-1]
    for row in rows:
        full = ("~" if row["dropped"] else "") + f"{row['full']:,}"
        saved = 1 - row[after] / row[before] if row[before] else 0.0
        kept = f"{row[before + ' errors'][0]} / {row[after + ' errors'][0]} of {row[after + ' errors'][1]}"
        cells = [row["scenario"], f"{row['lines']:,}", full, *(f"{row[v]:,}" for v in VARIANTS), f"{saved:.0%}", kept]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    print(table(run()))
