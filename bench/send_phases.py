"""Scenario 4b, where a send's milliseconds go: figure 1's send of ``true`` to bash, quiet and beside ``FLOODS``
sessions printing ``seq inf`` (figure 4's load at its largest level), each phase timed inside a daemon of its own
whose methods are wrapped to stamp the clock as the send passes (``bench/trace_send.py``: nothing of ptyd changes;
the stamps cost a little). The phases overlap (the probe runs while the worker renders): they do not add up to the
total. Issue 29 asks for a send beside 50 floods within 10 ms at p99, or the gap stated with a profile of where
each millisecond goes: this is the profile, in the same run as figure 4.
"""

from __future__ import annotations

from bench.harness import Context
from bench.report import Figure, Results
from bench.trace_send import columns, trace

FLOODS = 50
COUNTS = ("checks (count)", "acks (count)")


def run(ctx: Context, results: Results) -> None:
    n, floods = (20, 5) if ctx.quick else (150, FLOODS)
    figure = Figure(
        f"4b. Where a send's milliseconds go: engine workers, quiet and beside {floods} floods",
        "ms",
        reference="quiet: total",
        show_p99=True,
    )
    for name, load in (("quiet", 0), (f"{floods} floods", floods)):
        traced = trace("worker", n, load)
        phases = columns(traced.rows)
        counts = ", ".join(f"{k.split()[0]} {sum(phases[k]) / len(phases[k]):.1f}" for k in COUNTS if phases.get(k))
        for phase, values in phases.items():
            if phase in COUNTS:
                continue
            note = ""
            if phase == "total":
                cpu = f"CPU per send: daemon {traced.daemon_ms:.2f} ms, workers {traced.workers_ms:.2f} ms"
                note = f"{cpu}; per send {counts}" if counts else cpu
            figure.add(f"{name}: {phase}", values, note=note)
    results.figures.append(figure.finish())
