"""The benchmark suite runs end to end (``bench/run.py --quick``): every scenario produces its figures, every
output tail it checks is exact, ``make baseline`` can write BASELINE.md and the README table from its JSON, and it
leaves no tmux server or daemon behind. Timings are never asserted."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(660)]


def _bench_processes() -> set[int]:
    """tmux servers and shells the bench started: their command lines name its private directory."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"ptyd-bench-" in cmdline and entry.name.isdigit() and int(entry.name) != os.getpid():
            found.add(int(entry.name))
    return found


def test_quick_bench_has_every_figure_exact_tails_and_leaves_no_process(tmp_path: Path) -> None:
    before = _bench_processes()
    out = tmp_path / "bench.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTYD_")}
    done = subprocess.run(
        [sys.executable, "bench/run.py", "--quick", "--json", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,  # ~300 s on 2 busy cores (load average 6-9)
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    results = json.loads(out.read_text())
    assert results["failures"] == []
    titles = [figure["title"] for figure in results["figures"]]
    for number in "12345678":
        assert any(title.startswith(f"{number}.") for title in titles), titles
    for figure in results["figures"]:
        for row in figure["rows"]:
            if row["subject"].startswith("ptyd"):
                assert row["n"] > 0, (figure["title"], row)
                assert row["median"] is not None, (figure["title"], row)
                assert math.isfinite(row["median"]), (figure["title"], row)
    throughput = [f for f in results["figures"] if f["title"].startswith("3.")]
    assert throughput
    assert all("tails exact" in f["rows"][0]["note"] for f in throughput)
    flooded = next(f for f in results["figures"] if f["title"].startswith("4. Scale: send"))
    assert any(row["subject"].startswith("tmux, while") and row["n"] for row in flooded["rows"]), flooded
    phases = next(f for f in results["figures"] if f["title"].startswith("4b."))  # where a send's ms go
    assert {"quiet: total", "5 floods: total"} <= {row["subject"] for row in phases["rows"] if row["n"]}, phases
    memory = next(f for f in results["figures"] if f["title"].startswith("8."))
    assert {"open/close 2, workers", "flood 2, workers"} <= {row["subject"] for row in memory["rows"]}, memory
    assert _bench_processes() - before == set()

    baseline, readme = tmp_path / "BASELINE.md", tmp_path / "README.md"
    shutil.copy(ROOT / "bench" / "BASELINE.md", baseline)
    shutil.copy(ROOT / "README.md", readme)
    regenerated = subprocess.run(
        [sys.executable, "-m", "bench.baseline", str(out), "--baseline", str(baseline), "--readme", str(readme)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert regenerated.returncode == 0, regenerated.stderr
    assert "### 8. Memory" in baseline.read_text()
    assert "while 4 of 40 sessions print" in readme.read_text()
