"""How an engine worker orders a batch (``workers/main.by_session``): each session's messages in their order, the
sessions with the fewest output bytes first, so an interactive session's echo is acknowledged before a flood's
megabyte that came in the same read."""

from __future__ import annotations

from ptyd.terminal.workers import messages as m
from ptyd.terminal.workers.main import by_session, warm


def test_sessions_with_fewer_bytes_go_first_and_each_keeps_its_order() -> None:
    flood = [m.Feed(sid=1, end=n * 1000, data=b"y\n" * 500, more=True) for n in range(1, 4)]
    echo = [m.Feed(sid=2, end=5, data=b"true\r\n", more=False), m.Settle(sid=2)]
    opened = [m.Open(sid=3, engine="pyte", cols=80, rows=24, end=0), m.Resize(sid=3, end=1, cols=100, rows=30)]
    batch = [flood[0], echo[0], flood[1], opened[0], echo[1], flood[2], opened[1]]
    assert by_session(batch) == [opened, echo, flood]


def test_equal_sessions_keep_their_arrival_order() -> None:
    first, second = m.Feed(sid=7, end=1, data=b"a", more=False), m.Feed(sid=4, end=1, data=b"b", more=False)
    assert by_session([first, second]) == [[first], [second]]


def test_the_warm_up_leaves_nothing_behind_and_a_host_works_after_it() -> None:
    from ptyd.terminal.workers.host import EngineHost

    warm()
    host = EngineHost()
    host.handle(m.Open(sid=0, engine="pyte", cols=20, rows=3, end=0))
    host.handle(m.Feed(sid=0, end=3, data=b"hi\r\n", more=False))
    (ack,) = host.finish()
    assert ack.end == 3
    assert ack.rows[0].text == "hi"
