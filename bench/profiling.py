"""Reading a daemon's cProfile output (``--profile DIR``): the functions that cost the most, as text."""

from __future__ import annotations

import io
import pstats
from pathlib import Path


def top(path: Path, limit: int = 25) -> str:
    """The ``limit`` costliest functions of the profile at ``path``, by own time and by cumulative time."""
    if not path.exists():
        return f"(no profile at {path}: the daemon did not exit through SIGINT)"
    out = io.StringIO()
    stats = pstats.Stats(str(path), stream=out)
    stats.strip_dirs()
    out.write(f"### {path.name}: by own time\n")
    stats.sort_stats("tottime").print_stats(limit)
    out.write(f"### {path.name}: by cumulative time\n")
    stats.sort_stats("cumulative").print_stats(limit)
    text = out.getvalue()
    path.with_suffix(".txt").write_text(text)
    return text
