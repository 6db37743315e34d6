"""Rewrite what bench/BASELINE.md and the README's performance table quote from a run (``make baseline``).

    .venv/bin/python -m bench.baseline [bench/results/latest.json]

Each generated part sits between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->`` and is replaced whole; the
prose around the markers is left as it is. In BASELINE.md: ``run`` (the commit, date, duration and load average),
``machine``, ``figures`` and ``targets``; in README.md: ``performance``. A missing marker is an error, not a
silent skip, so that a renamed heading cannot leave a stale table behind.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bench.report import Figure, Row, fmt, format_figure

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "bench" / "BASELINE.md"
README = ROOT / "README.md"
DEFAULT_JSON = ROOT / "bench" / "results" / "latest.json"
Data = dict[str, Any]


class MarkerMissing(Exception):
    """A file lacks the pair of markers a generated part goes between."""


def replace_section(text: str, name: str, body: str) -> str:
    """``text`` with what lies between ``name``'s markers replaced by ``body``."""
    pattern = re.compile(rf"(<!-- bench:{re.escape(name)} -->\n).*?(<!-- /bench:{re.escape(name)} -->)", re.S)
    if not pattern.search(text):
        raise MarkerMissing(f"no <!-- bench:{name} --> ... <!-- /bench:{name} --> pair")
    return pattern.sub(lambda m: m.group(1) + body.rstrip("\n") + "\n" + m.group(2), text, count=1)


def _figure(data: dict[str, Any]) -> Figure:
    def number(value: float | None) -> float:
        return math.nan if value is None else value

    rows = [
        Row(r["subject"], r["n"], number(r["median"]), number(r["p95"]), r["ratio"], number(r["p99"]), r["note"])
        for r in data["rows"]
    ]
    fields = {k: data[k] for k in ("title", "unit", "reference", "higher_is_better", "show_p99")}
    return Figure(**fields, rows=rows)


def _load(values: Iterable[float] | None) -> str:
    return " ".join(f"{v:.2f}" for v in values) if values else "not recorded"


def run_section(data: Data) -> str:
    quick = " **(a `--quick` run: small sizes, few iterations)**" if data.get("quick") else ""
    return (
        f"Measured on commit `{data.get('commit', 'unknown')}`, {data.get('date', 'date not recorded')}{quick}: "
        f"the run took {data.get('elapsed_s', 0):.0f} s, client `{data.get('client')}`. Load average (1, 5, "
        f"15 min) {_load(data['machine'].get('loadavg_at_start'))} at the start, "
        f"{_load(data.get('loadavg_at_end'))} at the end.\n"
    )


def machine_section(data: Data) -> str:
    m = data["machine"]
    packages = ", ".join(f"{k} {v}" for k, v in m.get("packages", {}).items())
    rows = [
        ("`nproc`", m.get("nproc")),
        ("CPU", m.get("cpu")),
        ("kernel", m.get("kernel")),
        ("Python", f"CPython {m.get('python')}" + (f"; {packages}" if packages else "")),
        ("tmux", m.get("tmux") or "not installed"),
        ("ptyd", f"commit {data.get('commit', 'unknown')}"),
        ("client", data.get("client")),
    ]
    return "| | |\n|---|---|\n" + "".join(f"| {k} | {v} |\n" for k, v in rows)


def figures_section(data: Data) -> str:
    parts = [format_figure(_figure(f)).replace("## ", "### ", 1) for f in data["figures"]]
    return "\n\n".join(parts) + "\n"


def targets_section(data: Data) -> str:
    lines = ["| target | goal | measured | |", "|---|---|---|---|"]
    lines += [
        f"| {t['name']} | {t['goal']} | {t['measured']} | {'met' if t['met'] else 'MISSED'} |" for t in data["targets"]
    ]
    if data.get("failures"):
        lines += ["", "Failures in this run:", ""] + [f"- {f.splitlines()[0]}" for f in data["failures"]]
    return "\n".join(lines) + "\n"


# The README's table: one row per claim, each read off the run's figures.


def _figures(data: Data, prefix: str) -> list[Data]:
    return [f for f in data["figures"] if f["title"].startswith(prefix)]


def _row(figure: Data | None, match: Callable[[str], bool]) -> Data | None:
    if figure is None:
        return None
    return next((r for r in figure["rows"] if match(r["subject"]) and r["median"] is not None), None)


def _is(subject: str) -> Callable[[str], bool]:
    return lambda s: s == subject


def _native(subject: str) -> bool:
    return subject.startswith("ptyd (") and subject != "ptyd (pyte)"


def _span(values: list[float], unit: str = "", digits: int = 2) -> str:
    if not values:
        return "-"
    low, high = min(values), max(values)
    text = fmt(low, digits) if fmt(low, digits) == fmt(high, digits) else f"{fmt(low, digits)}-{fmt(high, digits)}"
    return text + unit


def _ratio(a: Data | None, b: Data | None, key: str = "median") -> float | None:
    if a is None or b is None or not a[key] or not b[key]:
        return None
    return float(a[key]) / float(b[key])


def _x(value: float | None) -> str:
    return "-" if value is None else f"{fmt(value, 2)}x"


def _ms(row: Data | None, key: str = "median") -> str:
    return "-" if row is None or row[key] is None else f"{fmt(row[key], 2)} ms"


def _round_trip(data: Data) -> tuple[str, str, str]:
    figure = next(iter(_figures(data, "1.")), None)
    ptyd, tmux, wait = (_row(figure, _is(s)) for s in ("ptyd", "tmux", "fixed_wait"))
    return (
        "round trip of `true`",
        f"{_ms(ptyd)} p50",
        f"{_x(ptyd['ratio'] if ptyd else None)} the raw floor, {_x(_ratio(ptyd, tmux))} tmux, "
        f"{_x(_ratio(ptyd, wait))} a 500 ms idle wait",
    )


def _readiness(data: Data) -> tuple[str, str, str]:
    figures = _figures(data, "2.")
    ptyd = [r["p95"] for f in figures if (r := _row(f, _is("ptyd")))]
    tmux = [r["p95"] for f in figures if (r := _row(f, _is("tmux")))]
    return (
        "readiness (prompt printed to send returned)",
        f"{_span(ptyd, ' ms')} p95",
        f"tmux {_span(tmux, ' ms')} p95, and it is told the prompt text; ptyd is not",
    )


def _throughput(data: Data, program: str) -> tuple[str, str, str]:
    figures = _figures(data, f"3. Throughput: {program} ")
    sizes = "/".join(m.group(1) for f in figures if (m := re.search(r" (\d+) MB", f["title"])))
    ptyd = [r["ratio"] for f in figures if (r := _row(f, _is("ptyd")))]
    inside = [r["ratio"] for f in figures if (r := _row(f, lambda s: s.startswith("ptyd in-daemon")))]
    tmux = [r["ratio"] for f in figures if (r := _row(f, _is("tmux")))]
    note = f"tmux {_span(tmux, 'x')} raw" + (f"; engine in the daemon {_span(inside, 'x')} raw" if inside else "")
    tail = ", viewport and scrollback tail exact" if program == "seq" else ""
    return f"`{program}` {sizes} MB{tail}", f"{_span(ptyd, 'x')} raw", note


RENDERING = {
    "progress": "progress bar {size} (CR redraws, braille, box drawing, colour)",
    "tree": "`tree`-style listing {size} (box drawing, non-ASCII names)",
    "top": "`top`-style redraw {size} (cursor addressing)",
}


def _rendering(data: Data, kind: str) -> tuple[str, str, str]:
    figure = next(iter(_figures(data, f"3b. Rendering: {kind} ")), None)
    size = m.group(1) if figure and (m := re.search(r" ([0-9.]+ MB)", figure["title"])) else "?"
    native = _row(figure, _native)
    inside = _row(figure, lambda s: s.startswith("ptyd in-daemon"))
    tmux, pyte = _row(figure, _is("tmux")), _row(figure, _is("ptyd (pyte)"))
    rate = "-" if native is None else f"{fmt(native['median'], 2)} MB/s, {_x(native['ratio'])} raw"
    notes = [f"{_x(_ratio(native, tmux))} tmux"]
    if inside:
        notes.append(f"engine in the daemon {_x(inside['ratio'])} raw")
    if pyte:
        notes.append(f"pyte engine {fmt(pyte['median'], 2)} MB/s")
    return RENDERING[kind].format(size=size) + ", native engine, engine workers", rate, "; ".join(notes)


def _largest(figure: Data | None, pattern: str) -> tuple[Data | None, re.Match[str] | None]:
    """The row whose subject matches ``pattern`` with the largest first group (N)."""
    best: tuple[Data | None, re.Match[str] | None] = (None, None)
    for row in figure["rows"] if figure else []:
        m = re.fullmatch(pattern, row["subject"])
        if m and row["median"] is not None and (best[1] is None or int(m.group(1)) > int(best[1].group(1))):
            best = (row, m)
    return best


def _idle_memory(data: Data) -> tuple[str, str, str]:
    figure = next(iter(_figures(data, "4. Scale: daemon RSS")), None)
    empty, m = _largest(figure, r"empty, worker, N=(\d+)")
    ascii_, astral = _row(figure, _is("full, ASCII")), _row(figure, _is("full, 4-byte"))
    pairs = ((ascii_, "ASCII"), (astral, "4-byte text"))
    full_rows = [f"~{row['median'] / 1024:.1f} MiB ({what})" for row, what in pairs if row is not None]
    n = m.group(1) if m else "?"
    return (
        f"{n} idle shells",
        "-" if empty is None else f"{empty['median']:.0f} KiB RSS each, workers counted",
        "a full scrollback " + (", ".join(full_rows) or "-") + ", bound 4 MiB + 1 MiB",
    )


def _floods(data: Data) -> tuple[str, str, str]:
    figure = next(iter(_figures(data, "4. Scale: send")), None)
    loaded, m = _largest(figure, r"worker, N=(\d+), (\d+) printing")
    if loaded is None or m is None:
        return "`true` beside floods", "-", "-"
    n, floods = m.group(1), m.group(2)
    raw = _row(figure, _is(f"raw, while {floods} print (worker)"))
    tmux = _row(figure, _is(f"tmux, while {floods} print"))
    quiet = _row(figure, _is(f"worker, N={n}, quiet"))
    return (
        f"`true` while {floods} of {n} sessions print `seq inf`",
        f"{_ms(loaded, 'p99')} p99",
        f"raw PTY {_ms(raw, 'p99')}, tmux {_ms(tmux, 'p99')} p99 under the same floods; {_ms(quiet, 'p99')} p99 quiet",
    )


def _memory_rounds(data: Data) -> tuple[str, str, str]:
    figure = next(iter(_figures(data, "8.")), None)
    worst: dict[str, float] = {}
    counts: dict[str, tuple[int, int]] = {}
    for row in figure["rows"] if figure else []:
        m = re.fullmatch(r"(open/close|flood) (\d+), workers", row["subject"])
        if m and row["ratio"] is not None:
            worst[m.group(1)] = max(worst.get(m.group(1), 0.0), row["ratio"])
            counts[m.group(1)] = (int(m.group(2)), row["n"])
    if not worst:
        return "engine workers' memory over rounds", "-", "-"
    parts = [f"{k} rounds of {counts[k][1]}: {fmt(v, 3)}x" for k, v in worst.items()]
    return (
        "engine workers' RSS after rounds of opening and closing sessions",
        "; ".join(parts),
        "the worst round over the first (goals 1.1x, 1.2x with floods)",
    )


def _cold(data: Data) -> tuple[str, str, str]:
    figure = next(iter(_figures(data, "7.")), None)
    da1, cpr = _row(figure, _is("ptyd, fresh daemon, DA1")), _row(figure, _is("ptyd, fresh daemon, CPR"))
    tmux = _row(figure, _is("tmux, fresh server, DA1"))
    return (
        "a fresh daemon's first DA1 and CPR answers",
        f"{_ms(da1, 'p95')}, {_ms(cpr, 'p95')} p95",
        f"tmux's first window {_ms(tmux, 'p95')} p95 (DA1)",
    )


def readme_section(data: Data) -> str:
    rows = [
        _round_trip(data),
        _readiness(data),
        _throughput(data, "seq"),
        _throughput(data, "cat"),
        *(_rendering(data, kind) for kind in RENDERING),
        _idle_memory(data),
        _floods(data),
        _memory_rounds(data),
        _cold(data),
    ]
    lines = ["| scenario | ptyd | vs references |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines) + "\n"


def regenerate(data: Data, baseline: Path = BASELINE, readme: Path = README) -> None:
    text = baseline.read_text()
    for name, make in (
        ("run", run_section),
        ("machine", machine_section),
        ("figures", figures_section),
        ("targets", targets_section),
    ):
        text = replace_section(text, name, make(data))
    baseline.write_text(text)
    readme.write_text(replace_section(readme.read_text(), "performance", readme_section(data)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.baseline", description=__doc__.splitlines()[0])
    parser.add_argument("json", type=Path, nargs="?", default=DEFAULT_JSON, help=f"a run's results ({DEFAULT_JSON})")
    parser.add_argument("--baseline", type=Path, default=BASELINE, help="the BASELINE.md to rewrite")
    parser.add_argument("--readme", type=Path, default=README, help="the README.md to rewrite")
    args = parser.parse_args(argv)
    try:
        regenerate(json.loads(args.json.read_text()), args.baseline, args.readme)
    except (OSError, MarkerMissing) as exc:
        print(f"bench.baseline: {exc}", file=sys.stderr)
        return 1
    print(f"rewrote {args.baseline} and {args.readme} from {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
