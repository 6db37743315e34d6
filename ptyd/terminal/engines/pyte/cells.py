"""Character cells: which characters join the cluster already in a cell, how wide it then is, and a row as text.

Widths follow wcwidth's grapheme-cluster rules, the width modern terminals and the width libraries programs lay out
with (string-width, unicode-width, wcwidth) agree on: a UAX #29 cluster is one cell of 1 or 2 columns; VS16 makes
an emoji 2 columns; ZWJ sequences, skin-tone modifiers and flag pairs are one 2-column cell. A cluster's code
points stay together in its cell (no normalisation, zero-width characters kept), so the text reads back as the
program wrote it.
"""

from __future__ import annotations

from pyte.screens import Char, StaticDefaultDict
from wcwidth import iter_graphemes, wcswidth

ZWJ = "\u200d"
MAX_CLUSTER = 32  # code points per cell: a flood of combining marks must not grow one cell without bound


def may_join(char: str) -> bool:
    """Whether a character of non-zero width can extend the cluster before it (besides following a ZWJ)."""
    return "\U0001f1e6" <= char <= "\U0001f1ff" or "\U0001f3fb" <= char <= "\U0001f3ff"  # flags, skin tones


def joined_width(cluster: str, char: str, width: int) -> int | None:
    """The width of ``cluster + char`` if ``char`` (of wcwidth ``width``) belongs to that cell, else None.

    A zero-width character always stays with the cell before it (pyte would have dropped the rest of the text
    run); any other joins only where Unicode puts no cluster boundary and the result still fits in 2 columns.
    """
    joined = cluster + char
    if width != 0 and next(iter_graphemes(joined)) != joined:
        return None
    total = wcswidth(joined)
    if width != 0 and total > 2:
        return None
    return min(max(total, 1), 2)


def render_line(line: StaticDefaultDict[int, Char], columns: int) -> str:
    """One buffer row as text; a wide character's stub cell holds "" and so adds nothing."""
    if not line:
        return ""
    get = line.get
    last = min(max(line), columns - 1)
    return "".join([c.data if (c := get(x)) is not None else " " for x in range(last + 1)]).rstrip()
