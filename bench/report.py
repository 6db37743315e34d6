"""Figures, targets and failures as the scenarios produce them; printed as tables, written as JSON."""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.harness import summary


@dataclass
class Row:
    subject: str
    n: int
    median: float
    p95: float
    ratio: float | None = None  # median over the reference's median (for rates: subject rate over reference rate)
    p99: float = math.nan
    note: str = ""


@dataclass
class Figure:
    """One table: rows measured in the same run, each compared with the row named ``reference``."""

    title: str
    unit: str  # "ms", "MB/s", "calls/s", "KiB" ...
    reference: str
    rows: list[Row] = field(default_factory=list)
    higher_is_better: bool = False
    show_p99: bool = False

    def add(self, subject: str, samples: Sequence[float], note: str = "", scale: float = 1.0) -> Row:
        s = summary(samples)
        row = Row(subject, s["n"], s["median"] * scale, s["p95"] * scale, None, s["p99"] * scale, note)
        self.rows.append(row)
        return row

    def unavailable(self, subject: str, why: str) -> None:
        self.rows.append(Row(subject, 0, math.nan, math.nan, None, math.nan, why))

    def finish(self) -> Figure:
        """Fill in each row's ratio to the reference row."""
        ref = next((r for r in self.rows if r.subject == self.reference), None)
        for row in self.rows:
            if ref is not None and ref.median and not math.isnan(row.median):
                row.ratio = row.median / ref.median
        return self

    def row(self, subject: str) -> Row:
        return next(r for r in self.rows if r.subject == subject)


@dataclass
class Target:
    name: str
    goal: str
    measured: str
    met: bool


@dataclass
class Results:
    figures: list[Figure] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def target(self, name: str, goal: str, measured: str, met: bool) -> None:
        self.targets.append(Target(name, goal, measured, met))


def fmt(value: float | None, digits: int = 3) -> str:
    if value is None or math.isnan(value):
        return "-"
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    return f"{value:,.{decimals}f}"


def format_figure(figure: Figure) -> str:
    headers = ["", "n", f"median {figure.unit}", f"p95 {figure.unit}"]
    if figure.show_p99:
        headers.append(f"p99 {figure.unit}")
    headers += [f"x {figure.reference}", "note"]
    table = [headers]
    for r in figure.rows:
        cells = [r.subject, str(r.n) if r.n else "-", fmt(r.median), fmt(r.p95)]
        if figure.show_p99:
            cells.append(fmt(r.p99))
        cells += [fmt(r.ratio) if r.ratio is not None else "-", r.note]
        table.append(cells)
    widths = [max(len(row[i]) for row in table) for i in range(len(headers))]
    lines = [f"## {figure.title}"]
    for i, row in enumerate(table):
        lines.append("| " + " | ".join(cell.ljust(widths[j]) for j, cell in enumerate(row)) + " |")
        if i == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def format_results(results: Results) -> str:
    parts = [format_figure(f) for f in results.figures]
    if results.targets:
        lines = ["## Targets", "| target | goal | measured | |", "|---|---|---|---|"]
        lines += [f"| {t.name} | {t.goal} | {t.measured} | {'met' if t.met else 'MISSED'} |" for t in results.targets]
        parts.append("\n".join(lines))
    if results.failures:
        parts.append("## Failures\n" + "\n".join(f"- {f}" for f in results.failures))
    return "\n\n".join(parts)


def machine() -> dict[str, Any]:
    """What the figures depend on; quoted next to them in BASELINE.md."""
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    tmux = subprocess.run(["tmux", "-V"], capture_output=True, text=True, check=False).stdout.strip()
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "tmux": tmux,
        "packages": packages(),
        "loadavg_at_start": os.getloadavg(),
    }


def commit() -> str:
    """The commit measured, ``+dirty`` when the work tree differs from it (what BASELINE.md names)."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def packages() -> dict[str, str]:
    """The versions of what the daemon runs on, for the machine table."""
    found = {}
    for name in ("uvloop", "msgspec", "pyte", "pyghostty"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def write_json(results: Results, path: Path, meta: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        **meta,
        "figures": [asdict(f) for f in results.figures],
        "targets": [asdict(t) for t in results.targets],
        "failures": results.failures,
        **results.extra,
    }
    # NaN is not JSON: unavailable cells become null.
    path.write_text(json.dumps(_nan_to_none(data), indent=2) + "\n")


def _nan_to_none(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_nan_to_none(v) for v in value]
    return value
