"""AgentView in process: which command each shell mark belongs to. Every line a send types is read by the shell in
order and starts a command (C), continues one (P: the continuation prompt), or ends at the next prompt unrun (D with
nothing running): a syntax error or an abandoned incomplete command is reported; an empty line or a comment is not."""

from __future__ import annotations

import msgspec
import pytest

from ptyd.backends.session.agent_view import AgentView
from ptyd.backends.session_state import SessionState


def ended(view: AgentView) -> list[tuple[str | None, int | None]]:
    return [(c.command, c.exit_code) for c in view.unread().commands]


def marked() -> AgentView:
    view = AgentView()
    view.command_ended(0, "/")  # the first prompt: the shell sends marks
    return view


def test_a_line_the_shell_refused_ends_with_its_status() -> None:
    view = marked()
    view.typed("echo )\n")
    view.command_ended(2, "/")
    assert ended(view) == [("echo )", 2)]
    assert not view.command_running


def test_a_refused_line_typed_behind_a_long_command_took_no_time(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    monkeypatch.setattr("ptyd.backends.session.agent_view.time.monotonic", lambda: clock[0])
    view = marked()
    view.typed("sleep 10\necho )\n")
    view.command_started()
    clock[0] += 10
    view.command_ended(0, "/")
    view.command_ended(2, "/")
    assert [c.duration_ms for c in view.unread().commands] == [10_000, 0]


def test_a_command_over_several_lines_is_one_command_and_waits_as_a_continuation() -> None:
    view = marked()
    view.typed("echo 'open\n")
    view.continued()
    assert view.continuation() == "echo 'open"
    view.typed("more\n")
    view.continued()
    assert view.continuation() == "echo 'open\nmore"
    view.typed("'\n")
    view.command_started()
    assert view.continuation() is None
    view.command_ended(0, "/")
    assert ended(view) == [("echo 'open\nmore\n'", 0)]


def test_an_incomplete_command_abandoned_is_reported_with_the_interrupts_status() -> None:
    view = marked()
    view.typed("if true; then\n")
    view.continued()
    view.forget_typed()  # the Ctrl-C send, typed at a prompt with nothing running
    view.command_ended(130, "/")
    assert ended(view) == [("if true; then", 130)]
    assert view.continuation() is None


def test_empty_lines_and_comments_end_nothing_and_keep_the_next_command_its_own() -> None:
    view = marked()
    view.typed("\n# note\nls\n")
    view.command_ended(0, "/")  # the empty line's prompt
    view.command_ended(0, "/")  # the comment's
    view.command_started()
    view.command_ended(0, "/")
    assert ended(view) == [("ls", 0)]


def test_a_refusal_queued_behind_a_block_is_told_apart_from_the_blocks_lines() -> None:
    view = marked()
    view.typed("for i in 1 2\ndo echo $i\ndone\necho )\necho after\n")
    view.continued()
    view.continued()
    view.command_started()
    view.command_ended(0, "/")
    view.command_ended(2, "/")
    view.command_started()
    view.command_ended(0, "/")
    assert ended(view) == [("for i in 1 2\ndo echo $i\ndone", 0), ("echo )", 2), ("echo after", 0)]


@pytest.mark.parametrize(
    ("typed", "commands"),
    [
        ("ls\rpwd\r", [("ls", 0), ("pwd", 1)]),  # a CR submits a line as Enter does
        ("true\nfalse\n", [("true", 0), ("false", 1)]),  # a shell with no continuation marks (an older hook)
    ],
)
def test_each_line_typed_starts_the_next_command(typed: str, commands: list[tuple[str, int]]) -> None:
    view = marked()
    view.typed(typed)
    for _, status in commands:
        view.command_started()
        view.command_ended(status, "/")
    assert ended(view) == commands


def test_a_shell_inside_the_session_runs_its_commands_while_the_ssh_command_runs_on() -> None:
    view = marked()
    view.typed("ssh far\n")
    view.command_started()
    view.command_ended(0, "/", depth=1)  # terminal_integrate's hooks draw the far shell's first prompt
    assert ended(view) == []
    view.typed("echo )\nfalse\n")
    view.command_ended(2, "/far", depth=1)
    view.command_started(depth=1)
    view.command_ended(1, "/far", depth=1)
    assert ended(view) == [("echo )", 2), ("false", 1)]
    running = view.running()
    assert running is not None
    assert running.command == "ssh far"
    view.typed("sleep 100\n")
    view.command_started(depth=1)
    assert view.running() is not None
    assert view.running().command == "sleep 100"  # the innermost
    view.command_ended(255, "/", depth=0)  # the connection dropped: the local prompt again
    assert ended(view)[-2:] == [("sleep 100", None), ("ssh far", 255)]
    assert not view.command_running


def handed_over(view: AgentView) -> AgentView:
    """``view`` as the next daemon takes it over: through the state document's encoding."""
    state = SessionState(session_id="s", type="shell", name=None, pid=1, starttime=None, cgroup=None, owner="a")
    view.to_state(state)
    back = msgspec.msgpack.decode(msgspec.msgpack.encode(state), type=SessionState)
    new = AgentView()
    new.restore(back, back.view_line or 0)
    return new


def test_a_handover_keeps_what_runs_at_each_depth_and_the_lines_typed_ahead() -> None:
    view = marked()
    view.typed("ssh far\n")
    view.command_started()  # the local ssh command (depth 0); a far shell set up inside it (depth 1)
    view.typed("sleep 5\necho after\nfor i in 1\n")
    view.command_started(depth=1)
    view = handed_over(view)
    running = view.running()
    assert running is not None
    assert running.command == "sleep 5"
    view.command_ended(0, "/", depth=1)
    view.command_started(depth=1)
    view.command_ended(0, "/", depth=1)
    view.continued()
    view = handed_over(view)
    assert view.continuation() == "for i in 1"
    view.typed("do :; done\n")
    view.command_started(depth=1)
    view.command_ended(0, "/", depth=1)
    view.command_ended(255, "/")  # the connection closed: the local prompt
    assert ended(view) == [("sleep 5", 0), ("echo after", 0), ("for i in 1\ndo :; done", 0), ("ssh far", 255)]


def test_a_state_from_before_protocol_8_knows_only_that_a_command_ran() -> None:
    state = SessionState(
        session_id="s", type="shell", name=None, pid=1, starttime=None, cgroup=None, owner="a", command_running=True
    )
    view = AgentView()
    view.restore(state, 0)
    running = view.running()
    assert running is not None
    assert running.command is None
    view.typed("echo next\n")  # the shell sent marks: a line typed now is the shell's
    view.command_ended(0, "/")
    view.command_started()
    view.command_ended(0, "/")
    assert ended(view) == [(None, 0), ("echo next", 0)]
