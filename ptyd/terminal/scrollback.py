"""Rendered lines that scrolled off the top of the screen, bounded by line count and by the memory they take.

The byte bound counts what the lines cost the daemon, not their UTF-8 length: CPython stores a line with any
character beyond Latin-1 at 2 or 4 bytes a character, and every line is an object of its own. Counting UTF-8
would let 4 MiB of emoji cost 6 MiB.

A line the terminal soft-wrapped (it continues on the next line) is kept with its width in cells, sparsely (most
lines end where the program ended them), so logical lines can be joined back on reading.

Lines are numbered from the start of the session and never renumbered: ``first`` is the oldest retained line,
``total`` the number ever appended. Lines arrive in blocks (a whole fast-forwarded burst at once), so the store
keeps blocks rather than one object per line's bookkeeping; eviction trims whole blocks or the oldest block's head.
A block of ASCII lines from an engine worker is kept as it came, joined by "\n" (``extend_joined``), and split
only when read: a flood's lines are mostly evicted unread, so most never become objects of their own. It is
counted as the lines it holds would cost once split.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Sequence
from itertools import compress

LINE_OVERHEAD = 56  # an ASCII str object's header and its list slot
WIDE_LINE_OVERHEAD = 80  # the same for a str with characters beyond ASCII (a larger header)


def utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode())


def line_cost(line: str) -> int:
    """What one line costs in memory (an upper bound: 4 bytes a character unless it is ASCII)."""
    return len(line) + LINE_OVERHEAD if line.isascii() else 4 * len(line) + WIDE_LINE_OVERHEAD


def detached(lines: list[str]) -> list[str]:
    """``lines`` as an encoder may take them: msgspec keeps the UTF-8 form of each non-ASCII str it encodes inside
    that str for its life (CPython's cache), which would double what a retained line costs once it is read or
    saved (4-byte text: 11 MiB a session against a 4 MiB bound). Those are copied; ASCII is its own UTF-8."""
    return [
        line if line.isascii() else line.encode(errors="surrogatepass").decode(errors="surrogatepass") for line in lines
    ]


def row_start(text: str, n: int) -> int:
    """Where row ``n`` of ``text`` (rows joined by "\n", at least ``n + 1`` of them) starts: halving with counts,
    each over the part not yet counted (one pass over ``text`` at C speed), then a few finds."""
    lo, hi, seen = 0, len(text), 0  # seen: newlines before lo (fewer than n)
    while hi - lo > 512:
        mid = (lo + hi) // 2
        found = text.count("\n", lo, mid)
        if seen + found >= n:
            hi = mid
        else:
            lo, seen = mid, seen + found
    pos = lo - 1
    for _ in range(n - seen):
        pos = text.find("\n", pos + 1)
    return pos + 1


def memory_size(lines: list[str]) -> int:
    """The sum of ``line_cost``, at C speed."""
    joined = "".join(lines)
    if joined.isascii():
        return len(joined) + LINE_OVERHEAD * len(lines)
    # Every character at 4 bytes, less 3 for each in an ASCII line: one more join, no sum over lines (2x faster).
    ascii_lines = list(map(str.isascii, lines))
    narrow = ascii_lines.count(True)
    narrow_chars = len("".join(compress(lines, ascii_lines)))
    wide = len(lines) - narrow
    return 4 * len(joined) - 3 * narrow_chars + LINE_OVERHEAD * narrow + WIDE_LINE_OVERHEAD * wide


class Scrollback:  # not final: an engine worker relays what its engines append (``workers.host``)
    def __init__(self, max_lines: int, max_bytes: int) -> None:
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self._blocks: deque[list[str] | str] = deque()  # a str: ASCII lines joined by "\n" (``extend_joined``)
        self._sizes: deque[int] = deque()  # memory_size of each block
        self._rows: deque[int] = deque()  # lines in each block (a joined one is not counted again at each eviction)
        self.first = 0  # number of the oldest retained line
        self.total = 0  # number of lines ever appended
        self._bytes = 0
        self._wraps: list[tuple[int, int]] = []  # (line, width) of retained lines that continue on the next one

    @property
    def retained(self) -> int:
        return self.total - self.first

    @property
    def bytes(self) -> int:
        return self._bytes

    def append(self, line: str) -> None:
        self.extend([line])

    def extend(self, lines: list[str], wraps: Sequence[tuple[int, int]] = ()) -> None:
        """Append ``lines``; ``wraps``: (index in ``lines``, width in cells) of those that continue on the next."""
        if not lines:
            return
        if wraps:
            base = self.total  # the number of lines[0], whatever the bound drops below
            self._wraps.extend((base + index, width) for index, width in wraps)
        if len(lines) > self.max_lines:
            self.first += len(lines) - self.max_lines
            self.total += len(lines) - self.max_lines
            lines = lines[-self.max_lines :]
        size = memory_size(lines)
        last = self._blocks[-1] if self._blocks else None
        if isinstance(last, list) and len(last) < 256 and len(lines) < 256:
            # Merge small appends (one line per scroll) so the deque does not hold a block per line.
            last.extend(lines)
            self._sizes[-1] += size
            self._rows[-1] += len(lines)
        else:
            self._blocks.append(list(lines))
            self._sizes.append(size)
            self._rows.append(len(lines))
        self.total += len(lines)
        self._bytes += size
        self._evict()

    def extend_joined(self, text: str, wraps: Sequence[tuple[int, int]] = ()) -> None:
        """``extend`` with the lines joined by "\n" (an engine worker's block): kept joined when ASCII."""
        if not text.isascii():
            self.extend(text.split("\n"), wraps)
            return
        count = text.count("\n") + 1
        if wraps:
            base = self.total
            self._wraps.extend((base + index, width) for index, width in wraps)
        if count > self.max_lines:
            over = count - self.max_lines
            text = text[row_start(text, over) :]
            self.first += over
            self.total += over
            count = self.max_lines
        size = len(text) - (count - 1) + LINE_OVERHEAD * count  # what ``memory_size`` says of the lines
        self._blocks.append(text)
        self._sizes.append(size)
        self._rows.append(count)
        self.total += count
        self._bytes += size
        self._evict()

    def _evict(self) -> None:
        while self._blocks and (self.retained > self.max_lines or self._bytes > self.max_bytes):
            block, size, rows = self._blocks[0], self._sizes[0], self._rows[0]
            over_lines = self.retained - self.max_lines
            over_bytes = self._bytes - self.max_bytes
            if over_lines >= rows or over_bytes >= size:
                self._blocks.popleft()
                self._sizes.popleft()
                self._rows.popleft()
                self._bytes -= size
                self.first += rows
                continue
            if isinstance(block, str):
                drop = max(over_lines, 0)
                cut = row_start(block, drop)
                freed = cut - drop + LINE_OVERHEAD * drop  # the dropped lines' characters (not their "\n"s)
                if freed >= over_bytes:  # the line bound binds: the head goes without splitting
                    self._blocks[0] = block[cut:]
                    self._sizes[0] -= freed
                    self._rows[0] -= drop
                    self._bytes -= freed
                    self.first += drop
                    continue
                block = self._blocks[0] = block.split("\n")  # the byte bound binds: line by line, as below
            # Trim the head of the oldest block, enough lines for both bounds.
            drop = max(over_lines, 0)
            freed = memory_size(block[:drop]) if drop else 0
            per_line = size / len(block)
            while freed < over_bytes and drop < len(block):  # a few steps, sized by the block's average line
                step = max(1, int((over_bytes - freed) / per_line))
                size = memory_size(block[drop : drop + step])
                while step > 1 and freed + size > over_bytes:  # it would drop more than needed: fewer lines
                    step //= 2
                    size = memory_size(block[drop : drop + step])
                freed += size
                drop = min(len(block), drop + step)
            del block[:drop]
            self._sizes[0] -= freed
            self._rows[0] -= drop
            self._bytes -= freed
            self.first += drop
        if self._wraps and self._wraps[0][0] < self.first:
            del self._wraps[: bisect_left(self._wraps, (self.first, -1))]

    def wraps(self, start: int, end: int) -> dict[int, int]:
        """Lines numbered ``[start, end)`` that continue on the next line, with their widths in cells."""
        lo = bisect_left(self._wraps, (start, -1))
        hi = bisect_left(self._wraps, (end, -1))
        return dict(self._wraps[lo:hi])

    def lines(self, start: int, end: int) -> list[str]:
        """Retained lines numbered ``[start, end)``, clipped to what is retained."""
        start = max(start, self.first)
        end = min(end, self.total)
        if start >= end:
            return []
        out: list[str] = []
        # Block start numbers, from the oldest retained line.
        starts: list[int] = []
        n = self.first
        for rows in self._rows:
            starts.append(n)
            n += rows
        i = bisect_right(starts, start) - 1
        pos = start
        while pos < end and i < len(self._blocks):
            block = self._blocks[i]
            if isinstance(block, str):  # read once: split for good (it is counted as split already)
                block = self._blocks[i] = block.split("\n")
            offset = pos - starts[i]
            take = block[offset : offset + (end - pos)]
            out.extend(take)
            pos += len(take)
            i += 1
        return out

    def clear(self) -> None:
        self._blocks.clear()
        self._sizes.clear()
        self._rows.clear()
        self._wraps.clear()
        self.first = self.total
        self._bytes = 0

    def skip(self, count: int) -> None:
        """Account for ``count`` lines that were appended and dropped at once (a burst beyond the bound).

        Only called when at least ``max_lines`` newer lines follow, so everything retained would be dropped too.
        """
        self.clear()
        self.total += count
        self.first = self.total
