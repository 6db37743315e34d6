"""Rows that leave an engine's screen, on their way to the daemon's ``Scrollback`` (issue 29): the worker's relay
gathers one block per ack whatever slices the engine appended in, the wire carries a block as one joined string,
and the daemon gets back exactly the rows, skips and soft-wrap flags it got before, with the same accounting."""

from __future__ import annotations

import random

import pytest

from ptyd.terminal.engines import native_available, open_terminal
from ptyd.terminal.scrollback import Scrollback, line_cost, memory_size, row_start
from ptyd.terminal.workers import messages as m
from ptyd.terminal.workers.host import RelayScrollback


def _rows_and_wraps(ack_scrolled: list[str | list[str] | int], wraps: list[tuple[int, int]]) -> list[object]:
    """What the daemon appends for an ack, block by block, as ``RemoteTerminal.acked`` splits it."""
    out: list[object] = []
    w, offset = 0, 0
    for block in ack_scrolled:
        if isinstance(block, int):
            out.append(block)
            continue
        rows = m.scrolled_rows(block)
        end = offset + len(rows)
        mine = []
        while w < len(wraps) and wraps[w][0] < end:
            mine.append((wraps[w][0] - offset, wraps[w][1]))
            w += 1
        out.append((rows, mine))
        offset = end
    return out


def test_slices_between_skips_travel_as_one_block_with_their_wraps() -> None:
    relay = RelayScrollback()
    relay.extend(["a1", "a2"], [(1, 80)])
    relay.extend(["b1", "", "b3"], [(0, 80), (2, 80)])
    relay.skip(500)
    relay.extend(["c1"], [(0, 80)])
    relay.extend(["c2", "c3"], [(1, 80)])
    scrolled, wraps = relay.take()
    decoded = m.to_daemon.decode(m.frame(_ack(scrolled, wraps))[m.HEADER.size :])
    assert isinstance(decoded, m.Ack)
    assert decoded.scrolled == ["a1\na2\nb1\n\nb3", 500, "c1\nc2\nc3"]
    assert _rows_and_wraps(decoded.scrolled, decoded.scrolled_wraps) == [
        (["a1", "a2", "b1", "", "b3"], [(1, 80), (2, 80), (4, 80)]),
        500,
        (["c1", "c2", "c3"], [(0, 80), (2, 80)]),
    ]
    assert relay.take() == ([], [])


def test_a_row_holding_the_separator_keeps_its_block_a_list() -> None:
    rows = ["one", "two\nstill two", ""]
    assert m.joined_rows(rows) == rows
    assert m.scrolled_rows(m.joined_rows(rows)) == rows


@pytest.mark.parametrize("rows", [[""], ["", ""], ["x"], ["├── é", "plain", "🙂 wide", ""]])
def test_joined_rows_split_back_exactly(rows: list[str]) -> None:
    assert isinstance(m.joined_rows(rows), str)
    assert m.scrolled_rows(m.joined_rows(rows)) == rows


def test_a_joined_block_travels_as_it_came_between_the_others() -> None:
    # A fast-forward's middle is joined already: the relay neither splits it nor merges it into a list block.
    relay = RelayScrollback()
    relay.extend(["a1", "a2"], [(1, 80)])
    relay.extend_joined("m1\nm2\n\nm4")
    relay.extend(["b1"], [(0, 80)])
    relay.muted = True
    relay.extend_joined("muted\nrows")
    relay.muted = False
    scrolled, wraps = relay.take()
    assert scrolled == ["a1\na2", "m1\nm2\n\nm4", "b1"]
    assert _rows_and_wraps(scrolled, wraps) == [
        (["a1", "a2"], [(1, 80)]),
        (["m1", "m2", "", "m4"], []),
        (["b1"], [(0, 80)]),
    ]
    assert relay.total == 9


def test_a_muted_relay_sends_no_block() -> None:
    relay = RelayScrollback()
    relay.muted = True
    relay.extend(["old"], [(0, 80)])
    relay.muted = False
    relay.extend(["new"])
    assert relay.take() == (["new"], [])
    assert relay.total == 2


@pytest.mark.parametrize(
    "lines",
    [[], ["ascii"] * 3, ["├── é", "plain", "🙂", "", "ÿ latin-1"], ["日本語"] * 4],
)
def test_memory_size_is_the_sum_of_line_costs(lines: list[str]) -> None:
    assert memory_size(lines) == sum(map(line_cost, lines))


def test_scrollback_bytes_stay_the_sum_of_what_it_retains() -> None:
    sb = Scrollback(50, 3000)
    for n in range(40):
        sb.extend([f"├── {n} {'é' * (n % 7)}" if n % 3 else f"line {n}" for _ in range(n % 9 + 1)])
        retained = sb.lines(sb.first, sb.total)
        assert len(retained) == sb.retained <= 50
        assert sb.bytes == memory_size(retained) <= 3000


def _ack(scrolled: list[str | list[str] | int], wraps: list[tuple[int, int]]) -> m.Ack:
    return m.Ack(
        sid=1,
        end=1,
        scrolled=scrolled,
        rows=[],
        main=None,
        main_changed=False,
        cols=80,
        lines=24,
        cursor=(0, 0, False),
        main_cursor_y=0,
        title="",
        alt=False,
        app_cursor_keys=False,
        replies=[],
        scrolled_wraps=wraps,
    )


@pytest.mark.skipif(not native_available(), reason="the native engine does not import here")
def test_ghostty_finds_wrapped_rows_among_a_flood_of_short_ones() -> None:
    """Rows shorter than half the width are passed over at C speed; a wide-character row that wraps is not."""
    term = open_terminal(40, 5, scrollback_lines=1000, scrollback_bytes=1 << 20, on_reply=lambda _: None)
    text = "".join(f"{n}\r\n" for n in range(30)) + "日" * 25 + "\r\n" + "x" * 50 + "\r\n" + "ab\r\n" * 10
    term.feed(text.encode())
    term.process(float("inf"))
    wrapped = sorted(term.wraps(0, term.total_lines))
    assert [term.transcript(line, line + 1)[0][:3] for line in wrapped] == ["日日日", "xxx"]


def test_row_start_finds_every_row_of_a_joined_block() -> None:
    for rows in (["a"], ["", ""], ["x" * n for n in range(60)], [f"{n}" * (n % 300) for n in range(400)]):
        text = "\n".join(rows)
        for n in range(len(rows)):
            assert row_start(text, n) == len("\n".join(rows[:n])) + (1 if n else 0)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("max_lines", "max_bytes"), [(50, 1 << 20), (10_000, 4000), (30, 2500), (7, 300)])
def test_joined_blocks_keep_what_lists_keep(seed: int, max_lines: int, max_bytes: int) -> None:
    """The same appends, as lists and as joined blocks: the same lines, numbers, wraps and bytes at every step."""
    rng = random.Random(seed)
    lists, joined = Scrollback(max_lines, max_bytes), Scrollback(max_lines, max_bytes)
    for step in range(120):
        kind = rng.random()
        if kind < 0.05:
            lists.skip(max_lines + 3)
            joined.skip(max_lines + 3)
            continue
        count = rng.choice([1, 2, 5, 40, 300]) if kind < 0.9 else max_lines + rng.randrange(1, 20)
        wide = rng.random() < 0.2
        rows = [f"{step}:{n}" + ("é" if wide and n % 3 == 0 else "") + "x" * rng.randrange(0, 90) for n in range(count)]
        if rng.random() < 0.2:
            rows[0] = ""
        wraps = [(n, 80) for n in range(count) if rng.random() < 0.1]
        lists.extend(list(rows), wraps)
        joined.extend_joined("\n".join(rows), wraps)
        assert (joined.first, joined.total, joined.bytes) == (lists.first, lists.total, lists.bytes)
        assert joined.lines(0, joined.total) == lists.lines(0, lists.total)
        assert joined.wraps(0, joined.total) == lists.wraps(0, lists.total)
        mid = (joined.first + joined.total) // 2
        assert joined.lines(mid, mid + 17) == lists.lines(mid, mid + 17)
        assert joined.bytes == memory_size(joined.lines(0, joined.total)) <= max_bytes
