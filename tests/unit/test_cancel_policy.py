"""The cancel policy in process: which interrupt a cancel sends the shell in front, and when. The shell is a real
process in a group of its own (a SIGINT ends it); what the terminal and the readiness evidence say is scripted."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from typing import Any, cast

import pytest

from ptyd import protocol as p
from ptyd.backends.session.cancel import CancelPolicy, CancelState


class Terminal:
    """The session's channel and what the foreground looks like: the shell's group in front, reading or not."""

    def __init__(self, shell: subprocess.Popen[bytes], *, queued: bool, untouched: bool) -> None:
        self.shell, self.queued, self.untouched = shell, queued, untouched
        self.waiting = False  # the shell waits for its next key (a blocking read of the terminal)
        self.helped = False  # ...while another thread of it works for it (fish's highlighter)
        self.marks: list[bytes] = []

    # the channel
    def input_queued(self) -> bool:
        return self.queued

    def discard_input(self) -> None:
        self.queued = False

    # the foreground group
    def verified_pgid(self) -> int:
        return self.shell.pid

    def describe(self, exited: bool) -> p.Foreground:
        return p.Foreground(pid=self.shell.pid, pgid=self.shell.pid, name="bash")

    def idle_at_input(self, pgid: int, *, at_rest: bool = False) -> bool:
        return self.waiting and not (at_rest and self.helped)

    # the readiness tracker
    def input_untouched(self) -> bool:
        return self.untouched

    def input_dropped(self) -> None:
        pass

    def mark_write(self, data: bytes) -> None:
        self.marks.append(data)


@pytest.fixture
def shell() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def policy(term: Terminal) -> CancelPolicy:
    fake = cast(Any, term)
    return CancelPolicy(lambda: term.shell.pid, fake, fake, lambda: False, fake, lambda: True)


def test_a_shell_that_read_part_of_the_dropped_line_is_interrupted_once_it_waits_for_a_key(
    shell: subprocess.Popen[bytes],
) -> None:
    # bash's readline, sent SIGINT between two keys (it read one and has not drawn it), prints ^C and acts on it
    # only at its next key: the next send's first character went ("leep 30"). So the signal waits for the wait.
    term = Terminal(shell, queued=True, untouched=False)
    cancel, state = policy(term), CancelState()
    cancel.cancel(state)
    assert term.queued is False  # what it had not read is gone at once
    assert state.interrupted == {}
    assert cancel.owes_interrupt(state)  # a wait seen now is not the send's end: the part read is still there
    state.cancelled_at = time.monotonic()  # however long this took: within the wait for rest
    cancel.follow(state)
    assert shell.poll() is None
    assert cancel.owes_interrupt(state)
    term.waiting = term.helped = True  # fish waits while its highlighter works, then wakes to draw: a SIGINT is lost
    state.cancelled_at = time.monotonic()
    cancel.follow(state)
    assert shell.poll() is None
    term.helped = False
    cancel.follow(state)
    assert shell.wait(timeout=10) == -2  # SIGINT
    assert state.interrupted == {shell.pid: "bash"}
    assert term.marks == [b""]  # readiness now waits for the shell to take the signal
    assert not cancel.owes_interrupt(state)


def test_a_shell_never_seen_at_rest_is_interrupted_all_the_same(shell: subprocess.Popen[bytes]) -> None:
    # Busy, or its waits cannot be seen (no ptrace access): the part it read must not stay on its line.
    term = Terminal(shell, queued=True, untouched=False)
    cancel, state = policy(term), CancelState()
    cancel.cancel(state)
    assert cancel.owes_interrupt(state)
    state.cancelled_at = time.monotonic() - 1.5  # past the wait for rest, within the cancel's window
    cancel.follow(state)
    assert shell.wait(timeout=10) == -2
    assert not cancel.owes_interrupt(state)


def test_a_shell_that_read_none_of_the_dropped_line_is_not_interrupted(shell: subprocess.Popen[bytes]) -> None:
    term = Terminal(shell, queued=True, untouched=True)
    cancel, state = policy(term), CancelState()
    term.waiting = True
    cancel.cancel(state)
    cancel.follow(state)
    assert shell.poll() is None
    assert state.interrupted == {}
    assert term.marks == []
    assert not cancel.owes_interrupt(state)


def test_a_shell_back_at_its_prompt_after_reading_the_whole_line_is_not_interrupted(
    shell: subprocess.Popen[bytes],
) -> None:
    # Nothing was queued: the shell read the line and ran it (a builtin) or is about to fork; seen waiting for
    # input again, it is at its prompt with nothing to interrupt.
    term = Terminal(shell, queued=False, untouched=False)
    cancel, state = policy(term), CancelState()
    term.waiting = True
    cancel.cancel(state)
    state.cancelled_at = time.monotonic() - 1.0  # past the delay a fork takes
    cancel.follow(state)
    assert shell.poll() is None
    assert state.interrupted == {}
    assert not cancel.owes_interrupt(state)
