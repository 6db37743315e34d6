"""AgentView's unread cursor in process: a cursor line a result showed is shown again only if it changed."""

from __future__ import annotations

from ptyd.backends.session.agent_view import AgentView
from ptyd.backends.session_state import SessionState


def delivered(view: AgentView, line: int, text: str) -> None:
    view.delivered(line, view.unread(), text)


def test_a_line_that_only_ended_is_not_shown_again() -> None:
    view = AgentView()
    delivered(view, 2, "RRR")
    assert view.start(cursor_line=3, text_now="RRR") == 3


def test_a_line_that_grew_or_is_still_the_cursor_line_is_shown_again() -> None:
    view = AgentView()
    delivered(view, 2, "RRR")
    assert view.start(cursor_line=3, text_now="RRRSSS") == 2  # it grew: whole, again
    assert view.start(cursor_line=2, text_now="RRR") == 2  # still being written
    assert view.start(cursor_line=3, text_now="") == 2  # rewritten (or dropped from the scrollback)


def test_an_empty_cursor_line_and_a_restored_view_start_where_they_were() -> None:
    view = AgentView()
    delivered(view, 4, "")
    assert view.start(cursor_line=9, text_now="") == 4  # nothing was shown of it: a blank line is output too
    delivered(view, 5, "$ ")
    state = SessionState(session_id="s", type="shell", name=None, pid=1, starttime=None, cgroup=None, owner="a")
    view.restore(state, 5)  # a new daemon does not know what was shown
    assert view.start(cursor_line=9, text_now="$ ") == 5


def test_an_older_result_delivered_late_does_not_move_the_cursor_back() -> None:
    view = AgentView()
    delivered(view, 6, "later")
    delivered(view, 3, "earlier")
    assert view.line == 6
    assert view.start(cursor_line=7, text_now="later") == 7
