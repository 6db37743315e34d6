"""The frames between the daemon and an engine worker: a 4-byte length, then a msgpack message.

Every message names its session (a number the daemon gives it) and most carry ``end``: the session's count of
work sent, in output bytes plus one for each other change (a resize, a restore). The worker acknowledges the
``end`` of the last message it has rendered; the daemon's readiness waits on that count.
"""

from __future__ import annotations

import struct

import msgspec

from ptyd.terminal.replay import TerminalState
from ptyd.terminal.styled import StyledScreen

HEADER = struct.Struct("<I")
MAX_FRAME = 64 << 20  # a snapshot of a 1000x1000 screen stays well below


class Base(msgspec.Struct, array_like=True, tag=True):
    pass


# --- daemon -> worker -------------------------------------------------------------------------------------


class Open(Base, tag="open"):
    sid: int
    engine: str  # "ghostty" or "pyte"
    cols: int
    rows: int
    end: int  # the count this session starts at (a reopen after a crash starts at the snapshot's)


class Restore(Base, tag="restore"):
    sid: int
    end: int
    state: TerminalState  # the screen to take over (its ``lines`` are empty: the transcript is the daemon's)


class Feed(Base, tag="feed"):
    sid: int
    end: int
    data: bytes
    more: bool  # more output is on its way: a partial last line may be held for it
    flush: bool = False  # release what was held (the daemon has nothing more for it)
    muted: bool = False  # a replay of output acknowledged already: its rows and answers were delivered
    answered: bool = False  # the daemon answered its queries (its worker was not up yet): its answers are dropped


class Resize(Base, tag="resize"):
    sid: int
    end: int
    cols: int
    rows: int
    muted: bool = False  # a replay: rows a shrinking screen pushes off were delivered


class Settle(Base, tag="settle"):
    sid: int


class Snap(Base, tag="snap"):
    sid: int


class Close(Base, tag="close"):
    sid: int


class Paint(Base, tag="paint"):
    """The screen as styled cells, for a screenshot: answered with ``Painted`` after the ack of what came before."""

    sid: int


ToWorker = Open | Restore | Feed | Resize | Settle | Snap | Close | Paint


# --- worker -> daemon -------------------------------------------------------------------------------------


class Row(msgspec.Struct, array_like=True, frozen=True, omit_defaults=True):
    """One changed row of the active screen (room for per-row attributes: add fields with defaults, which an
    array-like struct leaves off the wire when they are trailing and default)."""

    y: int
    text: str
    wrapped: bool = False  # soft-wrapped: the row continues on the next one (a changed flag alone sends the row)


class Ack(Base, tag="ack"):
    sid: int
    end: int  # everything up to here is rendered
    # Rows that left the top of the main screen, in order: a block of them joined by "\n" (one object to encode and
    # decode, not one a row; a list when a row holds a "\n"), or an int: rows skipped. ``scrolled_rows`` splits.
    scrolled: list[str | list[str] | int]
    rows: list[Row]  # rows of the active screen that changed since the last ack
    main: list[str] | None  # the main screen under the alternate one, when it changed
    main_changed: bool
    cols: int
    lines: int
    cursor: tuple[int, int, bool]  # x, y, hidden
    main_cursor_y: int
    title: str
    alt: bool
    app_cursor_keys: bool
    replies: list[bytes]  # answers to queries, in order, for the daemon to write to the program
    error: str | None = None  # the engine raised (not crashed): what it said
    # (index among the rows of ``scrolled``'s lists, counted across them, width in cells) of those that
    # soft-wrapped onto the next row: sparse, most rows end where the program ended them.
    scrolled_wraps: list[tuple[int, int]] = msgspec.field(default_factory=list)
    main_wraps: list[int] = msgspec.field(default_factory=list)  # rows of ``main`` that soft-wrapped (with it)


def joined_rows(rows: list[str]) -> str | list[str]:
    """A block of scrolled rows for an ``Ack``: one string, unless a row holds the separator."""
    text = "\n".join(rows)
    return text if text.count("\n") == len(rows) - 1 else rows


def scrolled_rows(block: str | list[str]) -> list[str]:
    """The rows of one block of ``Ack.scrolled`` (not a skip)."""
    return block.split("\n") if isinstance(block, str) else block


class Snapshot(Base, tag="snapshot"):
    sid: int
    end: int
    state: TerminalState


class Painted(Base, tag="painted"):
    sid: int
    end: int
    screen: StyledScreen


class Hello(Base, tag="hello"):
    pid: int
    native: bool  # the native engine imports in this worker


ToDaemon = Ack | Snapshot | Painted | Hello

_encoder = msgspec.msgpack.Encoder()
to_worker = msgspec.msgpack.Decoder(ToWorker)
to_daemon = msgspec.msgpack.Decoder(ToDaemon)


def frame(message: Base) -> bytes:
    body = _encoder.encode(message)
    return HEADER.pack(len(body)) + body


def frame_into(message: Base, buffer: bytearray) -> None:
    """Append ``message``'s frame to ``buffer``, encoded in place (output is not copied once more)."""
    start = len(buffer)
    _encoder.encode_into(message, buffer, start + HEADER.size)
    HEADER.pack_into(buffer, start, len(buffer) - start - HEADER.size)


def frames(buffer: bytearray) -> list[memoryview]:
    """Complete frames at the start of ``buffer``, taken out of it (views of one copy of them)."""
    spans: list[tuple[int, int]] = []
    pos = 0
    size = len(buffer)
    while size - pos >= HEADER.size:
        (length,) = HEADER.unpack_from(buffer, pos)
        if length > MAX_FRAME:
            raise ValueError(f"engine worker frame of {length} bytes")
        if size - pos - HEADER.size < length:
            break
        spans.append((pos + HEADER.size, pos + HEADER.size + length))
        pos += HEADER.size + length
    if not pos:
        return []
    taken = memoryview(bytes(buffer[:pos]))
    del buffer[:pos]
    return [taken[start:end] for start, end in spans]
