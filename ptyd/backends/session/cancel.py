"""The cancel policy of a send: drop what the program has not read, then SIGINT the command, once per program.

A shell whose unread input was dropped cannot be running the line; the SIGINT discards what it had read of it, once
the shell waits for its next key with nothing else of it at work (1 s at most): bash's readline, interrupted
between two keys (after it read one, before it drew it), prints ^C and acts on the signal only at its next key,
dropping the next send's first character ("leep 30"), so until then the send is not ready (``owes_interrupt``). One
that had read none of it is not interrupted: the line is gone whole.
A command in a group of its own is interrupted at once; if it was still the
shell's forked child when the signal came (bash loses a SIGINT between fork and exec), it is interrupted again
once it runs the program. While the shell itself holds the foreground it may have read the line and be about to
fork (a SIGINT then can make bash exit), so the shell is interrupted only once that window has passed with the
shell still in front (a builtin loop).

Where the terminal does not turn Ctrl-C into a signal (ISIG off, or VINTR another character or none: what is in
front reads keys), Ctrl-C is pressed instead, as a person would: a relay (``script``, ssh, tmux) forwards it to
the terminal its program has, whose own line discipline interrupts the command there, and a program that reads
it as a key acts on it (jshell stops the snippet, vim stays). A SIGINT to such a group ended the relay with
everything behind it, or jshell's execution engine with every definition in it.
"""

from __future__ import annotations

import contextlib
import os
import signal as signals
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import final

from ptyd import protocol as p
from ptyd.backends.os.channel import PtyChannel
from ptyd.backends.readiness.foreground import ForegroundGroup
from ptyd.backends.readiness.tracker import ReadinessTracker
from ptyd.errors import InvalidArgument

LEFT_RUNNING = ("timeout", "inferred_idle")  # a send that ended so may have left its command running in front
CANCEL_FOLLOW_S = 2.0  # how long a cancel follows the send's command into a group that starts after it
CTRL_C = b"\x03"  # pressed where the terminal reads Ctrl-C as a key
SHELL_INTERRUPT_DELAY_S = 0.05  # a cancel waits this long for the command to leave the shell's group
SHELL_REST_WAIT_S = 1.0  # ...and this long for a shell that read part of a dropped line to rest (then signals it)


@dataclass(slots=True)
class CancelState:
    cancelled_at: float | None = None
    input_dropped: bool = False  # a cancel dropped input the program had not read
    input_untouched: bool = False  # ...and the shell had read none of it: nothing to interrupt there
    shell_owed: bool = False  # ...it had read part of it, and is interrupted once it waits for its next key
    interrupted: dict[int, str] = field(default_factory=dict)  # groups sent SIGINT, and the program then in front
    pressed: bool = False  # ...Ctrl-C pressed instead of their signal: the terminal reads it as a key


@final
class CancelPolicy:
    def __init__(
        self,
        top_pid: Callable[[], int],
        foreground: ForegroundGroup,
        channel: PtyChannel,
        exited: Callable[[], bool],
        tracker: ReadinessTracker,
        signals_ctrl_c: Callable[[], bool | None],
    ) -> None:
        self._top = top_pid
        self._foreground = foreground
        self._channel = channel
        self._exited = exited
        self._tracker = tracker  # readiness then needs the program to have woken after the signal (or key)
        self._signals_ctrl_c = signals_ctrl_c  # the session's terminal turns Ctrl-C into SIGINT (None: unknown)

    def cancel(self, state: CancelState) -> None:
        if self._channel.input_queued():
            # Not read yet: dropping it (as ^C drops typeahead) cancels the command before it exists. The
            # program may hold the part it did read (readline reads a byte at a time); the SIGINT clears it.
            self._channel.discard_input()
            state.input_dropped = True
            if self._tracker.input_untouched():
                # Its program had read none of it: dropping it cancelled the line whole. A shell in front is not
                # interrupted then (``follow``): bash's readline may act on a SIGINT only at its next key, and
                # dropped the first character of the next send ("leep 30: command not found").
                state.input_untouched = True
                self._tracker.input_dropped()
        state.cancelled_at = time.monotonic()
        self.follow(state)

    def follow(self, state: CancelState) -> None:
        """Called on every probe while the send is active: interrupts what newly came to the front."""
        since = _since(state)
        if since is None or since >= CANCEL_FOLLOW_S:
            return
        with contextlib.suppress(InvalidArgument):
            pgid = self._foreground.verified_pgid()
            front = self._foreground.describe(self._exited())
            program = front.name if front is not None else ""
            if state.interrupted.get(pgid) == program:
                return
            if pgid == self._top() and state.input_untouched:
                return  # the line was dropped before the shell read any of it: nothing it started to interrupt
            if pgid == self._top() and state.input_dropped and not state.interrupted:
                # Between two keys of the part it read (or drawing them), the SIGINT is not acted on. A shell not
                # seen at rest by then (busy, or its waits hidden: no ptrace access) is interrupted as it is.
                rests = since >= SHELL_REST_WAIT_S or self._foreground.idle_at_input(pgid, at_rest=True)
                state.shell_owed = not rests
                if state.shell_owed:
                    return
            elif pgid == self._top():
                if state.interrupted or since < SHELL_INTERRUPT_DELAY_S:
                    return
                if self._foreground.idle_at_input(pgid):
                    return  # back at its prompt: nothing to interrupt
            state.interrupted[pgid] = program
            with contextlib.suppress(ProcessLookupError):
                state.pressed = self._interrupt(pgid)

    def owes_interrupt(self, state: CancelState) -> bool:
        """The shell in front read part of the line the cancel dropped and waits to be interrupted (``follow``):
        a wait it is seen in now would leave that part on its prompt."""
        since = _since(state)
        return state.shell_owed and since is not None and since < CANCEL_FOLLOW_S

    def _interrupt(self, pgid: int) -> bool:
        """Ctrl-C as the terminal would take it: a SIGINT to the group in front, or the key where it reads keys.
        Whether the key was pressed; ProcessLookupError when the group is gone."""
        if self._signals_ctrl_c() is False:
            self._tracker.mark_write(CTRL_C)
            self._channel.write(CTRL_C)
            return True
        self._tracker.mark_write(b"")
        os.killpg(pgid, signals.SIGINT)
        return False

    def requested(self, state: CancelState) -> p.TerminalCancelResult:
        """What cancelling the active send did at once (the policy goes on following it while it is active)."""
        if state.interrupted:
            pgid, program = next(iter(state.interrupted.items()))
            return p.TerminalCancelResult(
                cancelled=True,
                interrupted=True,
                pgid=pgid,
                signal=None if state.pressed else "SIGINT",
                key="C-c" if state.pressed else None,
                program=program or None,
                message=f"{_what(state.pressed, pgid)} ({program or 'unknown'}) of the active send; "
                "terminal_wait returns its result.",
            )
        dropped = "its input the program had not read was dropped; " if state.input_dropped else ""
        return p.TerminalCancelResult(
            cancelled=True,
            message=f"The active send is cancelled: {dropped}a command it starts is sent SIGINT. "
            "terminal_wait returns its result.",
        )

    def interrupt_left_running(self, last_reason: p.WaitReason | None) -> p.TerminalCancelResult:
        """No send is active: interrupt what the last one left running in front (it timed out, or went quiet
        without reading: ``yes``, a server, a long build), as its cancel would have. A program the last send
        left waiting for input, or a shell back at its prompt, is not interrupted: the answer says what to do."""
        if self._exited():
            return _nothing("The session's program has exited: terminal_close it, or terminal_open a new session.")
        if last_reason not in LEFT_RUNNING:
            waiting = "No send has run yet" if last_reason is None else f"The last send ended {last_reason}"
            return _nothing(
                f"{waiting}, so nothing was left running. To interrupt the program in front anyway, terminal_signal "
                "it SIGINT; to go on, terminal_send."
            )
        try:
            pgid = self._foreground.verified_pgid()
        except InvalidArgument:
            return _nothing("The terminal has no foreground process group; terminal_send with empty input shows it.")
        front = self._foreground.describe(self._exited())
        program = front.name if front is not None else None
        if pgid == self._top() and self._foreground.idle_at_input(pgid):
            return _nothing(
                "What the last send left running has ended: the shell is back at its prompt. terminal_send with "
                "empty input shows the screen."
            )
        try:
            pressed = self._interrupt(pgid)
        except ProcessLookupError:
            return _nothing("The program in front ended meanwhile; terminal_send with empty input shows the screen.")
        return p.TerminalCancelResult(
            cancelled=False,
            interrupted=True,
            pgid=pgid,
            signal=None if pressed else "SIGINT",
            key="C-c" if pressed else None,
            program=program,
            message=f"No send was active; the last one ended {last_reason} with {program or 'a program'} still in "
            f"front: {_what(pressed, pgid, first=False)}. terminal_send with empty input waits until it is ready "
            "and shows what it did; if it ignores it, terminal_signal SIGTERM.",
        )


def _since(state: CancelState) -> float | None:
    """Seconds since the send was cancelled (None: it was not)."""
    return None if state.cancelled_at is None else time.monotonic() - state.cancelled_at


def _what(pressed: bool, pgid: int, *, first: bool = True) -> str:
    """What the interrupt was, for the message (``first``: as its first words)."""
    if pressed:
        said = f"pressed Ctrl-C for process group {pgid}, whose terminal reads it as a key"
    else:
        said = f"sent SIGINT to process group {pgid}"
    return said[:1].upper() + said[1:] if first else said


def _nothing(hint: str) -> p.TerminalCancelResult:
    return p.TerminalCancelResult(cancelled=False, message="Nothing was interrupted.", hint=hint)
