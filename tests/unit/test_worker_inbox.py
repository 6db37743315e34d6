"""How an engine worker chooses what to render next (``workers/inbox``): a slice of one session at a time, each
session's messages in their order, the session with the fewest output bytes waiting first (an interactive
session's echo is rendered after at most one slice of a flood), and a session left waiting long goes first."""

from __future__ import annotations

from ptyd.terminal.workers import messages as m
from ptyd.terminal.workers.inbox import FAIR_S, SLICE_BYTES, Inbox
from ptyd.terminal.workers.main import warm


def _inbox(messages: list[m.ToWorker], now: float = 0.0) -> Inbox:
    inbox = Inbox()
    for msg in messages:
        inbox.put(msg, now)
    return inbox


def _drain(inbox: Inbox, now: float = 0.0) -> list[list[m.ToWorker]]:
    slices = []
    while inbox:
        slices.append(inbox.take(now))
    return slices


def test_sessions_with_fewer_bytes_go_first_and_each_keeps_its_order() -> None:
    flood = [m.Feed(sid=1, end=n * 1000, data=b"y\n" * 500, more=True) for n in range(1, 4)]
    echo = [m.Feed(sid=2, end=5, data=b"true\r\n", more=False), m.Settle(sid=2)]
    opened = [m.Open(sid=3, engine="pyte", cols=80, rows=24, end=0), m.Resize(sid=3, end=1, cols=100, rows=30)]
    batch = [flood[0], echo[0], flood[1], opened[0], echo[1], flood[2], opened[1]]
    assert _drain(_inbox(batch)) == [opened, echo, flood]


def test_equal_sessions_keep_their_arrival_order() -> None:
    first, second = m.Feed(sid=7, end=1, data=b"a", more=False), m.Feed(sid=4, end=1, data=b"b", more=False)
    assert _drain(_inbox([first, second])) == [[first], [second]]


def test_a_flood_is_rendered_a_slice_at_a_time_and_an_echo_goes_between() -> None:
    piece = SLICE_BYTES // 4
    flood = [m.Feed(sid=1, end=n, data=b"y" * piece, more=True) for n in range(1, 13)]
    inbox = _inbox([*flood, m.Settle(sid=1)])
    first = inbox.take(0.0)
    assert first == flood[:4]  # one slice: exactly SLICE_BYTES of output
    echo = m.Feed(sid=2, end=1, data=b"ls\r\n", more=False)
    inbox.put(echo, 0.001)
    assert inbox.take(0.001) == [echo]  # the echo that arrived meanwhile comes before the flood's next slice
    assert _drain(inbox, 0.002) == [flood[4:8], [*flood[8:], m.Settle(sid=1)]]  # the settle comes with its feed


def test_a_message_larger_than_a_slice_is_taken_whole() -> None:
    big = m.Feed(sid=1, end=1, data=b"x" * (SLICE_BYTES * 2), more=False)
    after = m.Feed(sid=1, end=2, data=b"y", more=False)
    assert _drain(_inbox([big, after])) == [[big], [after]]


def test_a_session_left_waiting_goes_first_whatever_its_size() -> None:
    flood = [m.Feed(sid=1, end=n, data=b"y" * SLICE_BYTES, more=True) for n in range(1, 3)]
    inbox = _inbox(flood, now=0.0)
    for n in range(5):  # small sessions keep arriving: each is smaller than the flood
        inbox.put(m.Feed(sid=10 + n, end=1, data=b"a", more=False), now=0.0)
    assert inbox.take(0.001)[0].sid == 10  # within FAIR_S, the smallest first
    assert inbox.take(FAIR_S + 0.001) == [flood[0]]  # the flood has waited FAIR_S: its turn
    assert inbox.take(FAIR_S + 0.002)[0].sid == 11  # its rest waits again, from then


def test_the_warm_up_leaves_nothing_behind_and_a_host_works_after_it() -> None:
    from ptyd.terminal.workers.host import EngineHost

    warm()
    host = EngineHost()
    host.handle(m.Open(sid=0, engine="pyte", cols=20, rows=3, end=0))
    host.handle(m.Feed(sid=0, end=3, data=b"hi\r\n", more=False))
    (ack,) = host.finish()
    assert ack.end == 3
    assert ack.rows[0].text == "hi"
