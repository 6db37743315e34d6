"""ReadinessTracker: decides, probe by probe, whether the program took a send's input and now waits for more.

Two facts make a program ready. It took the input: the tty's input queue is empty (the innermost terminal's
too, behind a local relay) and there is evidence that it read after the write (output, unless it may be the
terminal's own echo; a changed foreground group; or the group having read data since, per ``/proc/PID/io``). Right
after a write the input may still sit in the tty's flip buffer while the program waits exactly as before, and a
canonical-mode reader is woken by every piece of a line still incomplete: that old wait must not count. And it
waits to read its terminal (``blocked_read``), asked of the kernel for the innermost foreground group (``relay``),
once the local relays in between have copied its last output here:

- a blocking read, or select/poll with a long timeout: at once; while another thread of the program runs (fish's
  highlighting, which the waiting thread draws when it is done), once that has held ``HELPER_SETTLE_S``;
- an event loop (epoll) on the tty: once that has held ``EVENT_LOOP_SETTLE_S`` with no output;
- a short-timeout poll (htop redrawing every 1.5 s): once the program has been through one whole timeout, woke,
  used little CPU, and is back in the same kind of wait (htop, which only redraws, is in its poll again);
- after a key that longer keys begin with (a lone ESC): not before the program's key-sequence timeout, the first
  short timed wait it entered after reading the key, ran out and woke it (vim then leaves insert mode);
- after a line given to an event loop (node's REPL awaiting a timer reads the terminal all along): once it drew
  its prompt again (at once, no hold), or has nothing of its own pending (a new timer, a child) (``loops``); the
  same after a line given to a program that reads the terminal in a thread of its own (jshell), which after a
  prompt must draw one;
- behind an opaque relay (ssh): on the far shell's signed prompt mark followed by ``MARK_QUIET_S`` of quiet, else
  once the far side answered, drew a prompt (or a full-screen program) and went quiet for ``relay_quiet_s``.

The tracker only decides: every fact it reads, the clock included, comes from its ``Evidence`` (``evidence``;
the kernel's and the session's in ``live``), so each case above is a row of ``tests/unit/test_tracker.py``.
"""

from __future__ import annotations

import re
import termios
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, final

from ptyd import protocol as p
from ptyd.backends.readiness import blocked_read, loops
from ptyd.backends.readiness.blocked_read import Wait
from ptyd.backends.readiness.evidence import Evidence
from ptyd.backends.readiness.foreground import RunCounts, ran_since
from ptyd.backends.readiness.relay import Target
from ptyd.terminal.reports import ends_in_query

EVENT_LOOP_SETTLE_S = 0.04  # how long an event loop's wait on the tty must hold before it counts
MARK_QUIET_S = 0.03  # after a prompt mark, how long output must pause (the prompt itself follows the mark)
RELAY_FORWARD_S = 0.005  # behind local relays: how long they must sleep, no output arriving, before settling
RELAY_KEPT_S = 0.05  # ...and before input the program behind them never read counts as kept by the relay
SHORT_POLL_MIN_S = 0.05  # a short-poll cycle counts only after at least this long
SHORT_POLL_CPU_SHARE = 0.2  # ...and if the group ran or wanted to run for less than this share of it
LOOP_TIMER_SLACK_S = 0.1  # an event loop's timer due this much sooner than before a line is one the line armed
REFRESH_POLL_S = 0.25  # a timed wait this long, entered after answering on screen, is an idle refresh timer
HELPER_SETTLE_S = 0.25  # a direct wait while another thread of the program runs: how long it must hold
SIGNAL_UNSEEN_S = 0.15  # after a cancel's signal: the same direct wait this long with nothing pending: it was ignored
# The last visible character of a line a prompt ends with: shells, REPLs, debuggers, "Password:", "[y/N]".
PROMPT_END = re.compile(r"[$#%>:?\])»\u276f\u279c\u03bb]\s*$")  # and fancy prompt glyphs
PASSWORD_TEXT = re.compile(r"(pass(word|phrase|code)?|pin|secret|token)\b[^\n]*[:?]\s*$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Verdict:
    ready: bool
    basis: p.ReadyBasis | None = None
    relay: str | None = None


NOT_READY = Verdict(False)


@dataclass(frozen=True, slots=True)
class WriteMark:
    """The state at the last write (input, a signal, or an answer to a terminal query), replaced whole by the
    next: what "since the write" compares with."""

    expect_answer: bool = False  # input was written: a relay's far side must answer before it can be ready
    received: int = 0  # output received by then
    target: tuple[int, int] | None = None  # (terminal, group) that was to read it
    reads: bool = False  # taking it shows as having read since (input), else as having run (a signal)
    activity: Mapping[Any, int] = field(default_factory=dict)  # the group's reads (or runs) then
    output_is_evidence: bool = True  # output after the write shows the program read it (not an echo, a relay's)
    after_signal: bool = False  # the mark was a signal's, not written input
    relay_read: tuple[int, int] | None = None  # the innermost local relay, and its rchar then
    written_at: float = 0.0  # when the send's own input (or the signal) was written; an answer keeps it
    ambiguous: bool = False  # the input ended in a key a longer one begins with (a lone ESC)
    line_prompt: tuple[int, str] | None = None  # a line given to an event loop: the prompt's line, shape
    # ...and the shape of its own prompt, not a continuation's: the last a line was given at, the same group reading
    home_prompt: str = ""
    loop_due: float | None = None  # ...and when the timer of its wait then was due (None: no timer)
    # The last key written was a lone Ctrl-C (a cancel's key): what the program draws next answers it. An answer
    # to a terminal query written since is not a key: it keeps this.
    interrupt: bool = False


@final
class ReadinessTracker:
    def __init__(self, evidence: Evidence, relay_quiet_s: float) -> None:
        self._evidence = evidence
        self._relay_quiet_s = relay_quiet_s
        self._mark = WriteMark()
        # What is seen during a send, after its write:
        self.taken = True
        self._weak: tuple[float, tuple[int, int]] | None = None  # an event-loop wait: since when, and its mark
        self._poll: tuple[float, RunCounts, int, float] | None = None  # a short poll: since, runs, cpu, timeout
        self._prompt_mark_at: float | None = None
        self._forwarded: tuple[float, tuple[int, int]] | None = None  # relays seen asleep: since, and the mark
        self._key_wait: tuple[RunCounts, float] | None = None  # the timed wait entered after an ambiguous key
        self.last_target: Target | None = None  # what the last check() saw
        self._checked_at = 0.0  # when last_target was seen

    # --- what the program is doing -----------------------------------------------------------------------

    def target(self) -> Target | None:
        """The group that reads the input: the foreground group, or the one behind local relays."""
        return self._evidence.target()

    def password_prompt(self, target: Target | None) -> bool:
        """The target waits for input with echo off: canonical (getpass, sudo, ssh-keygen, ``read -s``), or raw
        with a password question on the cursor line (a readline-style prompt, or one behind ssh)."""
        if target is None or target.wait.kind == Wait.NONE:
            return False
        _, lflag = self._evidence.flags(target)
        if lflag is None or lflag & termios.ECHO:
            return False
        if blocked_read.secret_prompt(lflag):
            return True
        return not self._evidence.alt_screen() and bool(PASSWORD_TEXT.search(self._evidence.cursor_text()))

    def password_prompt_now(self) -> bool:
        """``password_prompt`` for status calls, which must stay cheap: the terminal's flags and the cursor line
        rule most cases out (a shell at its prompt, a full-screen program) before the program is probed. Behind
        a local relay (this terminal raw), a secret prompt is seen here only by its text; a send's result probes."""
        ev = self._evidence
        lflag = ev.local_flags()
        if lflag is None or lflag & termios.ECHO:
            return False
        if not blocked_read.secret_prompt(lflag) and (ev.alt_screen() or not PASSWORD_TEXT.search(ev.cursor_text())):
            return False
        return self.password_prompt(self.target())

    # --- one send ----------------------------------------------------------------------------------------

    def interrupt_unanswered(self) -> bool:
        """The last write was a cancel's Ctrl-C to a program that reads the terminal all along (jshell, a REPL
        behind a relay), and its answer, a prompt on a later line, is not on screen yet: input written now would be
        judged against the screen before that prompt, which would then pass for the input's answer."""
        mark = self._mark
        return mark.interrupt and mark.line_prompt is not None and self._evidence.cursor_line() <= mark.line_prompt[0]

    def begin(self, wrote_input: bytes, *, after_interrupt: bool = False) -> None:
        """A send starts. ``after_interrupt``: it first waits for the program to answer the Ctrl-C before it
        (its input is pressed once it has: ``interrupt_unanswered``), so the Ctrl-C's prompt is what it waits for."""
        self.taken = True
        self._prompt_mark_at = None
        self._weak = self._poll = None
        self._key_wait = None
        line_prompt = self._mark.line_prompt if after_interrupt else None
        self._mark = replace(
            self._mark, expect_answer=False, after_signal=False, ambiguous=False, line_prompt=line_prompt
        )
        if wrote_input:
            self.mark_write(wrote_input)

    def mark_write(self, data: bytes = b"", *, answer: bool = False) -> None:
        """From now on a wait counts only once the program is seen to have woken (see the module doc). An
        ``answer`` to a terminal query keeps what the send's own input left open (an ambiguous key, a line)."""
        ev, before = self._evidence, self._mark
        self.taken = False
        received = ev.received()
        self._prompt_mark_at = None
        self._weak = self._poll = None
        self._forwarded = None
        # Evidence of taking input is having read something since; after a signal (data empty), having run.
        reads = bool(data)
        written_at, ambiguous, line_prompt, loop_due = before.written_at, before.ambiguous, None, None
        home_prompt = before.home_prompt
        if answer:
            line_prompt, loop_due = before.line_prompt, before.loop_due
        else:
            written_at, ambiguous = ev.now(), loops.ambiguous(data)
            self._key_wait = None
        pgid = ev.foreground()
        same = self._same_plain_group(pgid)
        relayed = False
        relay_read: tuple[int, int] | None = None
        if same is not None and pgid is not None:
            # The same group as at the last probe, with no relay in front: no need to look for one again.
            key: tuple[int, int] | None = (ev.own_tty(), pgid)
            activity = self._activity(reads, same, pgid)
            lflag = ev.local_flags()
            target, seen_at = self.last_target, self._checked_at
        else:
            target, seen_at = ev.target(), ev.now()
            key = _key(target)
            activity = self._activity(reads, target.pids, target.pgid) if target is not None else {}
            lflag = ev.flags(target)[1] if target is not None else None
            relayed = target is not None and bool(target.relays)
            if relayed and data and target is not None:
                read = ev.relay_read(target.relays[-1])
                relay_read = (target.relays[-1], read) if read is not None else None
        if (
            not answer
            and data[-1:] in (b"\r", b"\n", b"\x03")  # a line, or Ctrl-C pressed (a cancel): answered alike
            and target is not None
            and _reads_all_along(target)
            and not ev.alt_screen()
        ):
            # A line for an event loop's REPL: it answers by drawing this prompt again (see _loop_answered).
            line_prompt = (ev.cursor_line(), loops.prompt_shape(ev.cursor_text()))
            if before.target != key:
                home_prompt = ""  # another program's prompt, or none seen yet
            if line_prompt[1] and not loops.continuation(line_prompt[1]):
                home_prompt = line_prompt[1]
            timeout = target.wait.timeout
            loop_due = None if timeout is None else seen_at + timeout
            if loop_due is not None and loop_due <= ev.now():
                # Seen at an earlier look (the group unchanged since): that timer has fired. node's own, 8 s after
                # it starts, passed for the 3 s one a line armed 10 s on, and the line settled at once.
                loop_due = None
        # A canonical terminal with echo on echoes what it receives, before the program reads it: output is no
        # evidence then, while a written line is still on its way through the line discipline (the tty's queue
        # counts complete lines only, so a half-processed line reads as empty).
        echoing = lflag is not None and lflag & termios.ECHO and lflag & termios.ICANON
        output_is_evidence = not (echoing and data[-1:] in (b"\n", b"\r", b"\x04"))
        if relayed and activity:
            # Behind local relays, output arriving now may be what they were still copying from before the write;
            # the program's own reads, which can be seen here, are the evidence.
            output_is_evidence = False
        self._mark = WriteMark(
            expect_answer=True,
            received=received,
            target=key,
            reads=reads,
            activity=activity,
            output_is_evidence=output_is_evidence,
            # After a signal, even a direct wait must hold a moment: bash, interrupted at its prompt, echoes ^C and
            # reads the terminal again for an instant before its own handler takes it to a new prompt.
            after_signal=not data,
            relay_read=relay_read,
            written_at=written_at,
            ambiguous=ambiguous,
            line_prompt=line_prompt,
            home_prompt=home_prompt,
            loop_due=loop_due,
            interrupt=before.interrupt if answer else data == b"\x03",
        )

    def _activity(self, reads: bool, pids: list[int], pgid: int) -> Mapping[Any, int]:
        return self._evidence.rchar(pids, pgid) if reads else self._evidence.run_counts(pids, pgid)

    def _same_plain_group(self, pgid: int | None) -> list[int] | None:
        """The candidates of ``pgid`` when it is the group the last probe found reading this terminal directly."""
        last = self.last_target
        if pgid is None or last is None or last.pts_index is not None or last.relay is not None or last.pgid != pgid:
            return None
        return self._evidence.candidates(pgid)

    def input_untouched(self) -> bool:
        """The program the last input was written to has read none of it: its group's reads did not grow since,
        and nothing it printed showed it took any (asked by a cancel after dropping what was still queued)."""
        mark, ev = self._mark, self._evidence
        if not mark.expect_answer or not mark.reads or mark.target is None or not mark.activity:
            return False
        if mark.output_is_evidence and ev.received() > mark.received:
            return False
        return not _grew(mark.activity, ev.rchar(list(mark.activity), mark.target[1]))

    def input_dropped(self) -> None:
        """The input last written was dropped before the program read any of it (``input_untouched``): it waits
        in the wait it was in before the write, which is ready as an empty send's is."""
        self.taken = True
        self._mark = replace(self._mark, expect_answer=False)

    def prompt_mark(self) -> None:
        """The shell's signed prompt mark arrived (it precedes the prompt it announces)."""
        self._prompt_mark_at = self._evidence.now()

    def check(self) -> Verdict:
        """Is the program ready for more input now?"""
        ev = self._evidence
        queued = ev.input_queued()
        pgid = ev.foreground()
        # Evidence is read before the wait, or a wait seen before the program read would pass for one after it.
        # With the same group in front as last time and no relay, that order is cheap; otherwise look twice.
        same = self._same_plain_group(pgid) if not (self.taken or queued) else None
        read_first = same is not None and _grew(self._mark.activity, self._activity(self._mark.reads, same, pgid or 0))
        target = self.last_target = ev.target()
        self._checked_at = ev.now()
        if target is None:
            return NOT_READY
        if queued:
            # Seen queued on its own terminal, the program's next wait is a new one. A relay reads this terminal,
            # so there the input is not even on the program's terminal yet.
            self.taken = self.taken or target.pts_index is None
            return NOT_READY
        if target.pts_index is not None and ev.flags(target)[0]:
            self.taken = True  # still queued on the relay's terminal
            return NOT_READY
        mark = self._mark
        if not self.taken and (
            read_first or (mark.output_is_evidence and ev.received() > mark.received) or _key(target) != mark.target
        ):
            self.taken = True
        elif (
            not self.taken
            and same is None
            and _grew(mark.activity, self._activity(mark.reads, target.pids, target.pgid))
        ):
            self.taken = True
            target = self.last_target = ev.target()  # the wait seen above may predate the evidence
            if target is None:
                return NOT_READY
        if target.relay is not None:
            return self._through_relay(target)
        kind = target.wait.kind
        if not self.taken and self._signal_dropped(target):
            self.taken = True
        if not self.taken:
            if self._kept_by_relay(target) and self._relays_forwarded(target, RELAY_KEPT_S):
                return Verdict(True, "kernel")
            self.taken = kind == Wait.NONE  # seen out of its wait: the next wait is a new one
            return NOT_READY
        if self._mark.ambiguous and not self._key_sequence_over(target):
            return NOT_READY
        # A direct wait holds a moment after a signal (below), and while another thread of the program works for
        # it: fish's main thread polls the terminal while a helper highlights the line just typed, then wakes to
        # draw it, and a Ctrl-C (a SIGINT to fish) arriving while it draws is lost (fish turns the signal into the
        # key only when it interrupts that poll). A helper that never rests costs each send the hold.
        helped = target.wait.helped and target.wait.leader  # a reader thread's other threads are the program's work
        direct_hold = HELPER_SETTLE_S if helped else EVENT_LOOP_SETTLE_S if self._mark.after_signal else 0
        if kind not in (Wait.EVENT_LOOP, Wait.TIMED) and not (kind == Wait.DIRECT and direct_hold):
            self._weak = None
        if kind not in (Wait.TIMED, Wait.NONE):
            # A short poll's cycle survives the program being seen awake (that is the cycle: it woke, redrew and
            # went back); another kind of wait starts over.
            self._poll = None
        waiting = (
            (kind == Wait.DIRECT and (not direct_hold or self._held(target, direct_hold)))
            or (kind == Wait.EVENT_LOOP and (self._answered_at_once(target) or self._held(target)))
            or (kind == Wait.TIMED and self._timed_wait_over(target))
        )
        if not waiting or not self._relays_forwarded(target):
            return NOT_READY
        if self._mark.line_prompt is not None and _reads_all_along(target) and not self._loop_answered(target):
            return NOT_READY
        # What the program wrote just before it waited (its prompt, a query it waits to have answered) may still
        # be in the kernel's flip buffer: the session's drain before a wait counts reads it (a read of an empty
        # tty runs that pending work first), renders it and answers the queries.
        return Verdict(True, "kernel")

    def _signal_dropped(self, target: Target) -> bool:
        """A cancel's signal the program never woke for: nothing is pending, so it ignored the signal and the kernel
        dropped it (seen with bash at its prompt, about one cancel in forty right after a send). Seen as the same
        direct wait a while after the signal: the program is where it was, waiting for input, and run counts will
        never show it taking the signal."""
        if not self._mark.after_signal or target.wait.kind != Wait.DIRECT:
            return False
        if self._evidence.now() - self._mark.written_at < SIGNAL_UNSEEN_S:
            return False
        return self._evidence.signal_pending(target.pids, target.pgid) is False

    def _key_sequence_over(self, target: Target) -> bool:
        """After a key that longer keys begin with, the program's first timed wait short enough for a key-sequence
        timeout is that timeout: the program decides what the key was (and draws it) only once it runs out. It
        is over when the program woke from it with the whole timeout gone since the write (nothing else was
        written: the timeout woke it). A program that waits without a timeout (or a long one) after the key
        does not hold it: the usual rules apply at once."""
        wait = target.wait
        if wait.kind == Wait.NONE:
            return False  # busy with the key, or between waits
        ev = self._evidence
        now = ev.now()
        if self._key_wait is None:
            if wait.kind != Wait.TIMED or wait.timeout is None or wait.timeout > loops.KEY_SEQUENCE_MAX_S:
                self._mark = replace(self._mark, ambiguous=False)
                return True
            self._key_wait = (ev.run_counts(target.pids, target.pgid), wait.timeout)
            return False
        runs, timeout = self._key_wait
        if now - self._mark.written_at < timeout or not ran_since(runs, ev.run_counts(target.pids, target.pgid)):
            return False
        # Timed out and awake: from here its waits are judged as any others, the short-poll cycle from scratch.
        self._mark = replace(self._mark, ambiguous=False)
        self._weak = self._poll = None
        return False

    def _answered_at_once(self, target: Target) -> bool:
        """An event loop given a line drew its prompt again (``_prompt_back``) and has no timer about to fire: its
        wait needs no quiet hold (node answers ``1+1`` in under a millisecond and waited 40-80 ms for the hold). One
        about to fire (node's, 15 ms after each answer; a ``setTimeout`` the line set) is left to fire first: what it
        does may print, and a look at the wait before it fired sees only that timer, so the next line's timer would
        be measured against it (``_loop_answered``), and an ``await`` of 700 ms settled early."""
        timeout = target.wait.timeout
        return self._prompt_back() and (timeout is None or timeout >= LOOP_TIMER_SLACK_S)

    def _prompt_back(self) -> bool:
        """An event loop given a line drew a prompt of its own on a later line: the REPL answered and reads its next
        line (node, IPython, an asyncio app). The prompt it had then, its continuation prompt (the line opened a
        block), or its own after a continuation (the line closed one)."""
        mark = self._mark
        if mark.line_prompt is None:
            return False
        line, shape = mark.line_prompt
        ev = self._evidence
        if not shape or ev.cursor_line() <= line:
            return False
        now, home = loops.prompt_shape(ev.cursor_text()), mark.home_prompt
        return now == shape or (bool(home) and (now == home or (shape == home and loops.continuation(now))))

    def _loop_answered(self, target: Target) -> bool:
        """An event loop given a line has answered when it drew its prompt again, on a later line (a REPL: node,
        IPython, an asyncio app), or, with no prompt to go by, when nothing of its own is pending: no timer due
        that it did not have before the line (its wait's timeout, an armed timerfd) and no child process running.
        A reader thread's program (jshell) works where nothing of that shows (in other threads, sleeping or
        computing): it has answered when it drew a prompt on a later line, its own or another question's; only
        with no prompt before the line does it count as answered with nothing pending."""
        ev = self._evidence
        assert self._mark.line_prompt is not None
        if self._prompt_back():
            return True
        line, shape = self._mark.line_prompt
        later = ev.cursor_line() > line
        wait = target.wait
        if not wait.leader:
            quiet = ev.now() - ev.last_output() >= MARK_QUIET_S  # the question is drawn whole
            if later and quiet and PROMPT_END.search(ev.cursor_text()):
                return True
            if shape:
                return False
        if wait.call is None:
            return False
        if wait.timeout is not None:
            # The deadline of a timer armed before the line (node's, for 8 s after it starts) is where it was; one
            # the line armed is sooner. Both deadlines are seen from outside, late by up to a probe's lag.
            due_before = self._mark.loop_due
            if due_before is None or ev.now() + wait.timeout < due_before - LOOP_TIMER_SLACK_S:
                return False
        if _event_loop(target) and ev.timer_armed(wait.pid, wait.call.args[0]):
            return False
        return not ev.running_child(target.pids, target.pgid)

    def _kept_by_relay(self, target: Target) -> bool:
        """A local relay that is a program of its own (mc, whose subshell is behind it) may keep the keys: it read
        since the write and drew something, while the program behind it waits on its terminal with nothing queued
        and did not read.
        Held for RELAY_KEPT_S (a forwarded key reaches the inner terminal a worker's turn after the relay's write),
        the relay's own wait on this terminal is the one that counts. A command running behind a relay (``sleep``
        with typed-ahead keys) is in no wait, so never passes."""
        at_write = self._mark.relay_read
        if at_write is None or not target.relays or target.relays[-1] != at_write[0] or target.wait.kind == Wait.NONE:
            return False
        if self._evidence.received() == self._mark.received:
            return False  # it answered nothing on screen: it may be holding the keys for its program
        read = self._evidence.relay_read(at_write[0])
        return read is not None and read > at_write[1]

    def _relays_forwarded(self, target: Target, hold: float = RELAY_FORWARD_S) -> bool:
        """Behind local relays, the program's last output (its prompt) reaches this terminal only once every relay
        copied it. A write reaches the relay's side through the kernel's flip buffer, a worker's turn later, so
        each relay must be seen asleep in its wait, and stay so with no output arriving, for ``hold``."""
        if not target.relays:
            return True
        ev = self._evidence
        if not all(ev.relay_asleep(pid) for pid in target.relays):
            self._forwarded = None
            return False
        mark = (ev.received(), target.pgid)
        now = ev.now()
        if self._forwarded is None or self._forwarded[1] != mark:
            self._forwarded = (now, mark)
            return False
        return now - self._forwarded[0] >= hold

    def _held(self, target: Target, hold: float = EVENT_LOOP_SETTLE_S) -> bool:
        now = self._evidence.now()
        mark = (self._evidence.received(), target.pgid)
        if self._weak is None or self._weak[1] != mark:
            self._weak = (now, mark)
            return False
        return now - self._weak[0] >= hold

    def _timed_wait_over(self, target: Target) -> bool:
        """A timed wait counts once the program came back to it with little work done: it acts on its own when
        the wait times out (vim after a lone ESC, readline's key-sequence timeout). One it entered after answering
        the input on screen, with a timeout long enough for a refresh timer (htop's 1.5 s, an asyncio app's
        0.5 s), is its idle wait: held with no output, it counts like an event loop's. One entered after a terminal
        query that nothing answered waits for that answer."""
        output = self._evidence.received() > self._mark.received
        if output and ends_in_query(self._evidence.output_tail()):
            self._weak = self._poll = None
            return False  # nothing was written since: the query waits for an answer that will not come
        timeout = target.wait.timeout
        if self._answered_at_once(target):
            return True  # an event loop given a line answered it (its epoll waits out a timer of its own: node's)
        if timeout is not None and timeout >= REFRESH_POLL_S and output:
            return self._held(target)
        self._weak = None
        return self._short_poll_cycled(target)

    def _short_poll_cycled(self, target: Target) -> bool:
        ev = self._evidence
        now = ev.now()
        runs = ev.run_counts(target.pids, target.pgid)
        cpu = ev.busy_ns(target.pids, target.pgid)  # runnable counts: load is not idleness
        if self._poll is None:
            self._poll = (now, runs, cpu, target.wait.timeout or 0.0)
            return False
        since, runs_then, cpu_then, timeout = self._poll
        elapsed = now - since
        if elapsed < max(timeout, SHORT_POLL_MIN_S) or not ran_since(runs_then, runs):
            return False
        return (cpu - cpu_then) / 1e9 < SHORT_POLL_CPU_SHARE * elapsed

    def _through_relay(self, target: Target) -> Verdict:
        if not self.taken:
            return NOT_READY
        ev = self._evidence
        quiet = ev.now() - ev.last_output()
        if self._prompt_mark_at is not None and (
            (quiet >= MARK_QUIET_S and ev.cursor_text().strip()) or quiet >= self._relay_quiet_s
        ):
            return Verdict(True, "shell_integration", target.relay)  # the prompt the mark announced is drawn
        if self._mark.expect_answer and ev.received() == self._mark.received:
            return NOT_READY  # the far side has not answered yet
        if quiet < self._relay_quiet_s:
            return NOT_READY
        if ev.alt_screen() or PROMPT_END.search(ev.cursor_text()):
            return Verdict(True, "relay_quiet", target.relay)
        return NOT_READY


def _event_loop(target: Target) -> bool:
    """The target waits on its terminal in an epoll set: an event loop, which may be at work meanwhile."""
    call = target.wait.call
    return call is not None and blocked_read.TABLE is not None and call.nr in blocked_read.TABLE.epoll


def _reads_all_along(target: Target) -> bool:
    """The target's wait on its terminal says nothing of its work on a line: an event loop's, or a reader
    thread's."""
    return _event_loop(target) or (target.wait.kind != Wait.NONE and not target.wait.leader)


def _grew(before: Mapping[Any, int], now: Mapping[Any, int]) -> bool:
    return any(value > before.get(key, value) for key, value in now.items())


def _key(target: Target | None) -> tuple[int, int] | None:
    return None if target is None else (target.tty_rdev, target.pgid)
