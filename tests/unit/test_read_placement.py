"""bench/read_placement.py's pipelines render every line the program wrote, whoever reads the PTY: their rates are
comparable only if their work is the same."""

from __future__ import annotations

import pytest

from bench.read_placement import ROWS, run


@pytest.mark.parametrize("mode", ["split", "worker", "worker-thread"])
def test_every_pipeline_scrolls_off_every_line_but_a_screenful(mode: str) -> None:
    lines = 3000
    _, scrolled = run(mode, ["seq", "1", str(lines)])
    # The last line ends in a newline: the cursor waits on the screen's last row, under the last ROWS - 1 lines.
    assert scrolled == lines - (ROWS - 1)
