"""The readiness verdict, one row per incident the tracker's comments record, against a scripted session.

Each row is a script of what the program does (it reads, runs, waits, prints; the clock moves) and what the
tracker must say at each look. The real-program corpus (test_readiness.py, test_relays.py, test_answers.py, ...)
stays the net for the evidence itself; these rows pin the decisions, in microseconds each.
"""

from __future__ import annotations

import ast
import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from ptyd.backends.readiness import blocked_read, loops
from ptyd.backends.readiness import tracker as tracker_module
from ptyd.backends.readiness.blocked_read import TtyWait
from ptyd.backends.readiness.evidence import Evidence
from ptyd.backends.readiness.tracker import (
    EVENT_LOOP_SETTLE_S,
    HELPER_SETTLE_S,
    MARK_QUIET_S,
    RELAY_FORWARD_S,
    RELAY_KEPT_S,
    SIGNAL_UNSEEN_S,
    ReadinessTracker,
    Verdict,
)

from .fake_evidence import (
    CANONICAL,
    NOT_WAITING,
    RAW,
    SECRET,
    FakeEvidence,
    Proc,
    Relay,
    direct,
    event_loop,
    helped,
    reader_thread,
    timed,
)

RELAY_QUIET_S = 0.3
TICK = 0.001  # a look just past a bound: the fake clock is exact, float sums are not

pytestmark = pytest.mark.skipif(blocked_read.TABLE is None, reason="no syscall table for this machine's architecture")


@dataclass
class Session:
    ev: FakeEvidence
    tracker: ReadinessTracker

    def reader(self) -> Proc:
        """The process whose wait decides: the foreground group's leader, or the one behind a local relay."""
        relay = self.ev.relay
        return self.ev.procs[self.ev.inner if relay is not None and relay.opaque is None else self.ev.fg or 0]


Step = Callable[[Session], Any]


# --- what the program does ---------------------------------------------------------------------------------


def send(data: bytes) -> Step:
    """A send writes its input (empty: it only waits)."""
    return lambda s: s.tracker.begin(wrote_input=data)


def press(data: bytes) -> Step:
    """Keys go out outside a send's start: a cancel's Ctrl-C, or a send's input held back and pressed now."""
    return lambda s: s.tracker.mark_write(data)


def send_after_interrupt() -> Step:
    """A send typed right after a Ctrl-C the program has not answered: the driver holds its input back (keys
    pressed once the program is ready) and waits for the Ctrl-C's answer first."""

    def step(s: Session) -> None:
        assert s.tracker.interrupt_unanswered()
        s.tracker.begin(wrote_input=b"", after_interrupt=True)

    return step


def dropped_unread() -> Step:
    """A cancel drops the send's input still queued; the program had read none of it."""

    def step(s: Session) -> None:
        assert s.tracker.input_untouched()
        s.tracker.input_dropped()

    return step


def touched() -> Step:
    """A cancel drops what is still queued of the send's input, but the program had read some of it."""
    return lambda s: _assert(not s.tracker.input_untouched())


def _assert(condition: bool) -> None:
    assert condition


def answer(data: bytes) -> Step:
    """The daemon answers a terminal query the program asked."""
    return lambda s: s.tracker.mark_write(data, answer=True)


def signal() -> Step:
    """A cancel's signal went to the foreground group."""
    return lambda s: s.tracker.mark_write()


def reads(n: int) -> Step:
    """The program reads ``n`` bytes (and so ran)."""

    def step(s: Session) -> None:
        s.reader().rchar += n
        s.reader().runs += 1

    return step


def runs(cpu_s: float = 0.0) -> Step:
    """The program is scheduled once, using ``cpu_s`` of CPU."""

    def step(s: Session) -> None:
        s.reader().runs += 1
        s.reader().busy_ns += int(cpu_s * 1e9)

    return step


def waits_(wait: Callable[[int], TtyWait]) -> Step:
    """The reading program enters a wait (``direct``, ``event_loop``, ``timed``, or is busy: NOT_WAITING)."""

    def step(s: Session) -> None:
        pid = s.ev.inner if s.ev.relay is not None and s.ev.relay.opaque is None else s.ev.fg or 0
        s.ev.wait = wait(pid)

    return step


def busy(_: int) -> TtyWait:
    return NOT_WAITING


def prints(data: bytes, *, line: int | None = None, text: str | None = None) -> Step:
    """Output arrives; the cursor ends on ``line`` with ``text`` before it."""

    def step(s: Session) -> None:
        s.ev.output(data)
        s.ev.line = s.ev.line if line is None else line
        s.ev.text = s.ev.text if text is None else text

    return step


def then(**changes: Any) -> Step:
    """Set facts of the session directly (the foreground group, flags, queued input, a timer, ...)."""

    def step(s: Session) -> None:
        for name, value in changes.items():
            setattr(s.ev, name, value)

    return step


def proc(pid: int, **changes: Any) -> Step:
    def step(s: Session) -> None:
        for name, value in changes.items():
            setattr(s.ev.procs[pid], name, value)

    return step


def relay(**changes: Any) -> Step:
    def step(s: Session) -> None:
        assert s.ev.relay is not None
        for name, value in changes.items():
            setattr(s.ev.relay, name, value)

    return step


def foreground(pgid: int, wait: Callable[[int], TtyWait] = direct) -> Step:
    """Another group takes the terminal (a command the shell started, or the shell back from one)."""

    def step(s: Session) -> None:
        s.ev.procs.setdefault(pgid, Proc(pgid))
        s.ev.fg = pgid
        s.ev.wait = wait(pgid)

    return step


def between_looks(*steps: Step) -> Step:
    """During the next check, just after it saw the program's wait: the program moves on meanwhile."""

    def step(s: Session) -> None:
        def hook() -> None:
            for inner in steps:
                inner(s)

        s.ev.after_target = hook

    return step


def after(seconds: float) -> Step:
    return lambda s: s.ev.advance(seconds)


def prompt_mark() -> Step:
    return lambda s: s.tracker.prompt_mark()


# --- what the tracker must say -----------------------------------------------------------------------------


def not_ready() -> Step:
    def step(s: Session) -> None:
        assert s.tracker.check() == Verdict(False)

    return step


def ready(basis: str = "kernel", relay: str | None = None) -> Step:
    def step(s: Session) -> None:
        assert s.tracker.check() == Verdict(True, basis, relay)  # type: ignore[arg-type]

    return step


def password(expected: bool, *, now: bool | None = None) -> Step:
    """What a send's result (``password_prompt``) and a status call (``password_prompt_now``) say."""

    def step(s: Session) -> None:
        assert s.tracker.password_prompt(s.tracker.target()) is expected
        assert s.tracker.password_prompt_now() is (expected if now is None else now)

    return step


# --- the table ---------------------------------------------------------------------------------------------


@dataclass
class Row:
    incident: str
    steps: list[Step]
    setup: dict[str, Any] = field(default_factory=dict)


def local_relay(**setup: Any) -> dict[str, Any]:
    """``script`` (pid 150, group 100 on our terminal) with a shell (group 300) on its pty."""
    procs = {100: Proc(100), 150: Proc(100), 300: Proc(300)}
    return {"procs": procs, "relay": Relay(150), "wait": direct(300), **setup}


def ssh(**setup: Any) -> dict[str, Any]:
    return {"relay": Relay(100, opaque="ssh"), "wait": event_loop(100), **setup}


def node(**setup: Any) -> dict[str, Any]:
    return {"wait": event_loop(100), "line": 3, "text": "> ", **setup}


def jshell_running() -> dict[str, Any]:
    """jshell running a snippet: its reader thread waits on the terminal, its engine (a child) works."""
    return {
        "wait": reader_thread(100),
        "line": 4,
        "text": "jshell> Thread.sleep(60000)",
        "procs": {100: Proc(100, child=True)},
    }


ROWS = [
    # --- tracker.py, module doc: taking the input --------------------------------------------------------
    Row(
        "the wait seen right after the write is the old one: the input is still in the flip buffer",
        [send(b"ls\r"), not_ready(), not_ready(), reads(3), ready()],
    ),
    Row(
        "a line dropped before the program read any of it: it waits where it was, ready as after an empty send",
        [send(b"sleep 30\r"), not_ready(), dropped_unread(), ready()],
    ),
    Row(
        "a line the program read part of is not untouched, nor one whose answer it printed",
        [send(b"sleep 30\r"), reads(3), touched(), send(b"x\r"), prints(b"?\r\n"), touched()],
    ),
    Row(
        "a canonical terminal echoes a line before the program reads it: that output is no evidence",
        [send(b"hello\n"), prints(b"hello\r\n"), not_ready(), reads(6), ready()],
        {"lflag": CANONICAL},
    ),
    Row(
        "in raw mode the program draws what it read: output is evidence",
        [send(b"x"), prints(b"x"), ready()],
    ),
    Row(
        "a changed foreground group took the input",
        [send(b"vim\r"), not_ready(), foreground(200), ready()],
    ),
    Row(
        "the evidence is read before the wait: a read just after the wait was seen does not vouch for it",
        [send(b"ls\r"), not_ready(), between_looks(reads(3)), not_ready(), ready()],
    ),
    Row(
        "a read seen after the wait was looked at sends the tracker to look at the wait again",
        [send(b"make\r"), between_looks(reads(5), waits_(busy)), not_ready(), waits_(direct), ready()],
    ),
    Row(
        "input seen queued on the program's own terminal: the next wait is a new one",
        [send(b"ls\r"), then(queued=3), not_ready(), then(queued=0), ready()],
    ),
    Row(
        "a program seen out of its wait took the input: the next wait is a new one",
        [send(b"make\r"), waits_(busy), not_ready(), waits_(direct), ready()],
    ),
    Row(
        "an empty send only waits: a program in a direct wait is ready at once",
        [send(b""), ready()],
    ),
    # --- waits: the kinds of wait ------------------------------------------------------------------------
    Row(
        "an event loop's wait counts once it held EVENT_LOOP_SETTLE_S with no output",
        [
            send(b"x"),
            reads(1),
            not_ready(),
            after(EVENT_LOOP_SETTLE_S - TICK),
            not_ready(),
            after(2 * TICK),
            ready(),
        ],
        {"wait": event_loop(100)},
    ),
    Row(
        "output restarts an event loop's hold",
        [
            send(b"x"),
            reads(1),
            not_ready(),
            after(0.03),
            prints(b"x"),
            not_ready(),
            after(EVENT_LOOP_SETTLE_S - TICK),
            not_ready(),
            after(2 * TICK),
            ready(),
        ],
        {"wait": event_loop(100)},
    ),
    Row(
        "node sits ~15 ms in epoll_wait after .exit: not ready until the shell has the terminal again",
        [send(b".exit\r"), reads(6), not_ready(), after(0.015), not_ready(), foreground(200), ready()],
        node(),
    ),
    Row(
        "a short poll counts once the program went through a whole timeout, woke and used little CPU",
        [send(b"j"), reads(1), not_ready(), after(0.1 - TICK), runs(), not_ready(), after(2 * TICK), ready()],
        {"wait": timed(100, 0.1)},
    ),
    Row(
        "a short poll that did not wake since is not through a cycle",
        [send(b"j"), reads(1), not_ready(), after(0.2), not_ready()],
        {"wait": timed(100, 0.1)},
    ),
    Row(
        "a short poll whose program keeps the CPU busy is work, not idleness",
        [send(b"j"), reads(1), not_ready(), after(0.1 + TICK), runs(cpu_s=0.05), not_ready()],
        {"wait": timed(100, 0.1)},
    ),
    Row(
        "htop: a refresh poll entered after answering on screen is held like an event loop",
        [send(b"j"), reads(1), prints(b"\x1b[Hredrawn"), not_ready(), after(EVENT_LOOP_SETTLE_S + TICK), ready()],
        {"wait": timed(100, 1.5)},
    ),
    Row(
        "a timed wait after a terminal query nothing answered waits for that answer",
        [
            send(b"x"),
            reads(1),
            prints(b"\x1b[6n"),
            not_ready(),
            after(0.2),
            runs(),
            not_ready(),
            after(0.2),
            runs(),
            not_ready(),
        ],
        {"wait": timed(100, 0.1)},
    ),
    # --- loops: keys a longer key begins with ------------------------------------------------------------
    Row(
        "vim after a lone ESC: not before its key-sequence timeout ran out and woke it",
        [
            send(b"\x1b"),
            reads(1),
            waits_(lambda pid: timed(pid, 0.1)),
            not_ready(),
            after(0.05),
            not_ready(),
            after(0.05 + TICK),
            runs(),
            prints(b"-- NORMAL --"),
            waits_(direct),
            not_ready(),  # this look sees the timeout over: from the next, the usual rules
            ready(),
        ],
    ),
    Row(
        "a lone ESC to a program waiting with no timeout: the usual rules at once",
        [send(b"\x1b"), reads(1), ready()],
    ),
    Row(
        "vim -u NONE holds a lone ESC for its 1 s 'timeoutlen' (KEY_SEQUENCE_MAX_S)",
        [
            send(b"\x1b"),
            reads(1),
            waits_(lambda pid: timed(pid, loops.KEY_SEQUENCE_MAX_S)),
            not_ready(),
            after(0.5),
            runs(),
            not_ready(),
            after(0.5 + TICK),
            runs(),
            waits_(direct),
            not_ready(),
            ready(),
        ],
    ),
    Row(
        "an answer to a terminal query keeps the send's ambiguous key and its time",
        [
            send(b"\x1b"),
            after(0.05),
            answer(b"\x1b[1;1R"),
            reads(7),
            waits_(lambda pid: timed(pid, 0.1)),
            not_ready(),
            after(0.05 + TICK),
            runs(),
            waits_(direct),
            not_ready(),
            ready(),  # the timeout ran from the key, not from the answer
        ],
    ),
    # --- loops: a line given to an event loop ------------------------------------------------------------
    Row(
        "prompt_toolkit asks where the cursor is after a line: the answer keeps the line open",
        [
            send(b"await sleep(1)\r"),
            reads(15),
            prints(b"\r\n\x1b[6n", line=4, text=""),
            answer(b"\x1b[5;1R"),
            reads(6),
            prints(b"\x1b[?25h"),
            waits_(lambda pid: event_loop(pid, 0.5)),
            not_ready(),
            after(EVENT_LOOP_SETTLE_S + TICK),
            not_ready(),  # no prompt yet, and a timer the line armed
        ],
        node(),
    ),
    Row(
        "node's REPL awaiting a timer reads the terminal all along: ready once it drew its prompt again",
        [
            send(b"await sleep(500)\r"),
            reads(17),
            prints(b"await sleep(500)\r\n", line=4, text=""),
            waits_(lambda pid: event_loop(pid, 0.5)),
            not_ready(),
            after(0.1),
            not_ready(),
            after(0.4),
            prints(b"undefined\r\n> ", line=5, text="> "),
            waits_(event_loop),
            ready(),  # its prompt is back on a later line: no quiet hold
        ],
        node(),
    ),
    Row(
        "node answering a line with a timer of its own pending (a timed epoll wait): ready once its prompt is back",
        [
            send(b"1+1\r"),
            reads(4),
            prints(b"1+1\r\n", line=4, text=""),
            waits_(lambda pid: event_loop(pid, 0.9)),
            not_ready(),
            prints(b"2\r\n> ", line=6, text="> "),
            ready(),
        ],
        node(wait=event_loop(100, 0.9)),
    ),
    Row(
        "node's prompt back with its 15 ms timer about to fire: ready once it fired, so the next line's timer is "
        "measured against its old one",
        [
            send(b"1+1\r"),
            reads(4),
            prints(b"1+1\r\n2\r\n> ", line=5, text="> "),
            waits_(lambda pid: event_loop(pid, 0.015)),
            not_ready(),
            after(0.02),
            waits_(lambda pid: event_loop(pid, 7.9)),
            ready(),
            send(b"await sleep(700)\r"),
            reads(17),
            prints(b"await sleep(700)\r\n", line=6, text=""),
            waits_(lambda pid: event_loop(pid, 0.7)),
            not_ready(),
            after(EVENT_LOOP_SETTLE_S + TICK),
            not_ready(),  # armed by the line: sooner than the 7.9 s one (the 15 ms one would have hidden it)
            after(0.7),
            prints(b"'done'\r\n> ", line=8, text="> "),
            waits_(lambda pid: event_loop(pid, 7.1)),
            ready(),
        ],
        node(wait=event_loop(100, 8.0)),
    ),
    Row(
        "node given a block line by line: its continuation prompt answers the opening line, its own prompt the last",
        [
            send(b"function f() {\r"),
            reads(15),
            prints(b"function f() {\r\n... ", line=4, text="... "),
            waits_(event_loop),
            ready(),  # node reads the next line of the block: no quiet hold
            send(b"return 1\r"),
            reads(9),
            prints(b"return 1\r\n... ", line=5, text="... "),
            ready(),
            send(b"}\r"),
            reads(2),
            prints(b"}\r\n", line=6, text=""),
            not_ready(),
            prints(b"undefined\r\n> ", line=7, text="> "),
            ready(),  # back at the prompt the block began at
        ],
        node(),
    ),
    Row(
        "IPython's indented continuation prompt answers too; a blank line ends the block at its own prompt",
        [
            send(b"for i in range(2):\r"),
            reads(19),
            prints(b"for i in range(2):\r\n   ...: ", line=4, text="   ...: "),
            waits_(event_loop),
            ready(),
            send(b"\r"),
            reads(1),
            prints(b"\r\n0\r\n1\r\n\r\nIn [4]: ", line=8, text="In [4]: "),
            ready(),
        ],
        node(text="In [3]: "),
    ),
    Row(
        "a line given at a continuation prompt with no prompt of the program's own seen before: held as before",
        [
            send(b"}\r"),
            reads(2),
            prints(b"}\r\nundefined\r\n> ", line=5, text="> "),
            waits_(event_loop),
            not_ready(),  # given at a continuation prompt, and no prompt of this program's seen before
            after(EVENT_LOOP_SETTLE_S + TICK),
            ready(),
        ],
        node(text="... "),
    ),
    Row(
        "an event loop's prompt drawn again on its own line (a redraw, not an answer) is held like any wait",
        [
            send(b"1+\r"),
            reads(3),
            prints(b"\r> 1+", line=3, text="> 1+"),
            waits_(event_loop),
            not_ready(),
            prints(b"\r> ", line=3, text="> "),
            not_ready(),
        ],
        node(),
    ),
    Row(
        "an event loop with no prompt to go by: answered once no timer is armed and no child runs",
        [
            send(b"go\r"),
            reads(3),
            prints(b"go\r\n", line=1),
            then(timer=True),
            not_ready(),
            after(EVENT_LOOP_SETTLE_S + TICK),
            not_ready(),
            then(timer=False),
            proc(100, child=True),
            not_ready(),
            proc(100, child=False),
            ready(),
        ],
        node(line=0, text=""),
    ),
    Row(
        "node's own 8 s timer, armed before the line, is not one the line armed",
        [
            send(b"1+1\r"),
            reads(4),
            prints(b"1+1\r\n2\r\n", line=2),
            after(EVENT_LOOP_SETTLE_S + TICK),
            waits_(lambda pid: event_loop(pid, 8.0 - EVENT_LOOP_SETTLE_S)),
            not_ready(),
            after(EVENT_LOOP_SETTLE_S + TICK),
            ready(),
        ],
        node(line=0, text="", wait=event_loop(100, 8.0)),
    ),
    Row(
        "node idle past its own 8 s timer: the timer an earlier look saw has fired, the one the line arms is its own",
        [
            send(b""),
            not_ready(),
            after(EVENT_LOOP_SETTLE_S + TICK),
            ready(),  # seen waiting with node's 8 s timeout
            after(10.0),
            send(b"await sleep(3000)\r"),
            reads(18),
            prints(b"\r\n", line=1, text=""),
            waits_(lambda pid: event_loop(pid, 3.0)),
            not_ready(),
            after(EVENT_LOOP_SETTLE_S + TICK),
            not_ready(),
            after(3.0),
            prints(b"undefined\r\n> ", line=2, text="> "),
            waits_(event_loop),
            ready(),  # its prompt is back on a later line: no quiet hold
        ],
        node(line=0, text="> ", wait=event_loop(100, 8.0)),
    ),
    Row(
        "a timer due sooner than before the line is the line's: not answered yet",
        [
            send(b"await sleep(1000)\r"),
            reads(18),
            prints(b"\r\n", line=1),
            waits_(lambda pid: event_loop(pid, 1.0)),
            not_ready(),
            after(EVENT_LOOP_SETTLE_S + TICK),
            not_ready(),
            after(1.0),
            prints(b"undefined\r\n", line=2),
            waits_(lambda pid: event_loop(pid, 8.0 - 1.0 - EVENT_LOOP_SETTLE_S)),
            not_ready(),
            after(EVENT_LOOP_SETTLE_S + TICK),
            ready(),
        ],
        node(line=0, text="", wait=event_loop(100, 8.0)),
    ),
    Row(
        "jshell reads the terminal in a thread of its own all along: its line is answered by the prompt drawn again",
        [
            send(b"Thread.sleep(1500)\r"),
            reads(19),
            prints(b"Thread.sleep(1500)\r\n", line=4, text=""),
            not_ready(),  # the reader thread is back in its read, the JVM's other threads and process at work
            after(1.5),
            prints(b"\r\njshell> ", line=6, text="jshell> "),
            ready(),
        ],
        {"wait": reader_thread(100), "line": 3, "text": "jshell> ", "procs": {100: Proc(100, child=True)}},
    ),
    Row(
        "a reader thread's program works on the line where nothing shows (it sleeps): answered by its prompt only",
        [
            send(b"6*7\r"),
            reads(4),
            prints(b"6*7\r\n", line=4, text=""),
            not_ready(),
            after(0.3),
            not_ready(),
            prints(b"42\r\ncalc> ", line=5, text="calc> "),
            ready(),
        ],
        {"wait": reader_thread(100), "line": 3, "text": "calc> "},
    ),
    Row(
        "a reader thread's program asks another question: answered once the question is drawn whole",
        [
            send(b"y\r"),
            reads(2),
            prints(b"y\r\nName: ", line=1, text="Name: "),
            not_ready(),
            after(MARK_QUIET_S + TICK),
            ready(),
        ],
        {"wait": reader_thread(100), "line": 0, "text": "Continue? [y/N] "},
    ),
    Row(
        "Ctrl-C pressed in jshell mid-snippet (a cancel), no prompt before it: answered by the prompt it draws",
        [
            send(b"\x03"),
            reads(1),
            not_ready(),  # its engine, a child, is still at work
            prints(b"\r\njshell> ", line=5, text="jshell> "),
            not_ready(),
            after(MARK_QUIET_S + TICK),
            ready(),
        ],
        {"wait": reader_thread(100), "line": 4, "text": "", "procs": {100: Proc(100, child=True)}},
    ),
    Row(
        "a line sent right after a cancel's Ctrl-C jshell has not answered: the Ctrl-C's prompt is not its answer",
        [
            press(b"\x03"),  # terminal_cancel, no send active: the snippet runs on
            reads(1),
            send_after_interrupt(),  # an agent's next send, at once
            not_ready(),
            prints(b"\r\n\r\njshell> ", line=6, text="jshell> "),
            not_ready(),
            after(MARK_QUIET_S + TICK),
            ready(),  # the Ctrl-C answered: the driver presses the held line now
            press(b"x\r"),
            reads(2),
            prints(b"x\r\n", line=7, text=""),
            not_ready(),
            after(MARK_QUIET_S + TICK),
            not_ready(),
            prints(b"x ==> 42\r\n\r\njshell> ", line=9, text="jshell> "),
            ready(),
        ],
        jshell_running(),
    ),
    Row(
        "a terminal query answered between a cancel's Ctrl-C and the next send: the Ctrl-C is still unanswered",
        [
            press(b"\x03"),
            reads(1),
            answer(b"\x1b[5;1R"),  # the program asked where the cursor is before it drew anything
            reads(6),
            send_after_interrupt(),
            not_ready(),
            prints(b"\r\n\r\njshell> ", line=6, text="jshell> "),
            after(MARK_QUIET_S + TICK),
            ready(),
        ],
        jshell_running(),
    ),
    Row(
        "a reader thread's process with no prompt to go by and no child: answered at once",
        [send(b"yes\r"), reads(4), prints(b"yes\r\n", line=1), ready()],
        {"wait": reader_thread(100), "line": 0, "text": ""},
    ),
    Row(
        "a reader thread is not helped by its process's other threads: those are the work the prompt answers",
        [
            send(b"1+1\r"),
            reads(4),
            waits_(lambda pid: replace(reader_thread(pid), helped=True)),
            prints(b"1+1\r\n$1 ==> 2\r\n\r\njshell> ", line=6, text="jshell> "),
            ready(),
        ],
        {"wait": reader_thread(100), "line": 3, "text": "jshell> ", "procs": {100: Proc(100, child=True)}},
    ),
    # --- signals -----------------------------------------------------------------------------------------
    Row(
        "bash at its prompt ignores a cancel's SIGINT and the kernel drops it (one cancel in forty)",
        [
            send(b""),
            signal(),
            not_ready(),
            after(SIGNAL_UNSEEN_S - TICK),
            not_ready(),
            after(2 * TICK),
            not_ready(),  # seen dropped: from here the direct wait holds as after any signal
            after(EVENT_LOOP_SETTLE_S + TICK),
            ready(),
        ],
    ),
    Row(
        "a signal still pending (blocked) was not dropped: the program has yet to take it",
        [send(b""), signal(), proc(100, pending=True), not_ready(), after(0.5), not_ready()],
    ),
    Row(
        "bash echoes ^C and reads the terminal for an instant before its handler draws a new prompt",
        [
            send(b""),
            signal(),
            runs(),
            not_ready(),
            after(0.01),
            prints(b"^C\r\n$ "),
            not_ready(),
            after(EVENT_LOOP_SETTLE_S - TICK),
            not_ready(),
            after(2 * TICK),
            ready(),
        ],
    ),
    Row(
        "fish polls the terminal while a helper thread highlights the line, then draws it: a Ctrl-C sent before it"
        " polls again is lost, so the wait counts once the helper rests",
        [
            send(b"if true; then\r"),
            reads(14),
            waits_(helped),
            not_ready(),
            prints(b"\r\n    "),
            not_ready(),
            waits_(direct),
            ready(),
        ],
    ),
    Row(
        "a helper thread that never rests holds each send's direct wait a while",
        [
            send(b"x\r"),
            reads(2),
            waits_(helped),
            not_ready(),
            after(HELPER_SETTLE_S - TICK),
            not_ready(),
            after(2 * TICK),
            ready(),
            send(b"y\r"),
            reads(2),
            not_ready(),  # the hold starts over for the next write
        ],
    ),
    Row(
        "the next send starts afresh: what a signal left open does not carry over",
        [send(b""), signal(), runs(), not_ready(), send(b""), ready()],
    ),
    # --- relay: local relays (script, sudo, mc) ----------------------------------------------------------
    Row(
        "behind a local relay, output arriving may be what it still copied from before the write",
        [
            send(b"ls\r"),
            prints(b"old prompt"),
            not_ready(),
            after(RELAY_FORWARD_S + TICK),
            not_ready(),
            reads(3),
            not_ready(),  # the relays must be seen asleep for RELAY_FORWARD_S
            after(RELAY_FORWARD_S + TICK),
            ready(),
        ],
        local_relay(),
    ),
    Row(
        "a relay seen awake has not copied its program's prompt yet",
        [
            send(b"ls\r"),
            reads(3),
            relay(asleep=False),
            not_ready(),
            after(0.1),
            not_ready(),
            relay(asleep=True),
            not_ready(),
            after(RELAY_FORWARD_S + TICK),
            ready(),
        ],
        local_relay(),
    ),
    Row(
        "mc keeps the keys for itself: it read and drew while its subshell waits and read nothing",
        [
            send(b"\t"),
            relay(rchar=1),
            prints(b"panel redrawn"),
            not_ready(),
            after(RELAY_KEPT_S - TICK),
            not_ready(),
            after(2 * TICK),
            ready(),
        ],
        local_relay(),
    ),
    Row(
        "a command behind a relay with typed-ahead keys is in no wait: the relay never keeps them",
        [send(b"x"), relay(rchar=1), prints(b"x"), waits_(busy), not_ready(), after(0.2), not_ready()],
        local_relay(),
    ),
    Row(
        "input queued on the relay's terminal: the program behind it has yet to read it, its next wait is new",
        [
            send(b"ls\r"),
            relay(queued=3),
            not_ready(),
            relay(queued=0),
            not_ready(),
            after(RELAY_FORWARD_S + TICK),
            ready(),
        ],
        local_relay(),
    ),
    Row(
        "input queued on our terminal behind a relay is not even on the program's terminal yet",
        [send(b"ls\r"), then(queued=3), not_ready(), then(queued=0), not_ready(), after(0.1), not_ready()],
        local_relay(),
    ),
    # --- relay: opaque relays (ssh) ----------------------------------------------------------------------
    Row(
        "ssh: the far side must answer, draw a prompt and stay quiet for relay_quiet_s",
        [
            send(b"ls\r"),
            reads(3),
            not_ready(),
            after(RELAY_QUIET_S + TICK),
            not_ready(),  # quiet, but the far side has not answered
            prints(b"file\r\n$ ", text="$ "),
            not_ready(),
            after(RELAY_QUIET_S - TICK),
            not_ready(),
            after(2 * TICK),
            ready("relay_quiet", "ssh"),
        ],
        ssh(),
    ),
    Row(
        "ssh: no prompt at the cursor however long the quiet (a progress line)",
        [send(b"make\r"), reads(5), prints(b"Compiling foo v1.2", text="Compiling foo v1.2"), after(2.0), not_ready()],
        ssh(),
    ),
    Row(
        "ssh: a full-screen program that went quiet is ready",
        [
            send(b"top\r"),
            reads(4),
            prints(b"\x1b[?1049h"),
            then(alt=True, text=""),
            after(RELAY_QUIET_S + TICK),
            ready("relay_quiet", "ssh"),
        ],
        ssh(),
    ),
    Row(
        "ssh: the far shell's signed prompt mark, then MARK_QUIET_S of quiet",
        [
            send(b"ls\r"),
            reads(3),
            prints(b"file\r\n"),
            prompt_mark(),
            prints(b"remote$ ", text="remote$ "),
            not_ready(),
            after(MARK_QUIET_S - TICK),
            not_ready(),
            after(2 * TICK),
            ready("shell_integration", "ssh"),
        ],
        ssh(),
    ),
    # --- password prompts --------------------------------------------------------------------------------
    Row("getpass, sudo, read -s: canonical input with echo off", [password(True)], {"lflag": SECRET}),
    Row("a shell at its prompt, raw, is no password prompt", [password(False)]),
    Row("a readline-style password prompt is known by its text", [password(True)], {"text": "Passphrase: "}),
    Row("a full-screen program is never a password prompt", [password(False)], {"text": "pin:", "alt": True}),
    Row("echo on is no password prompt", [password(False)], {"lflag": CANONICAL, "text": "Password: "}),
    Row("a program not waiting is not at a prompt", [password(False)], {"lflag": SECRET, "wait": NOT_WAITING}),
    Row(
        "behind a local relay a status call sees a secret prompt by its text only",
        [password(True, now=False), then(text="[sudo] password for me: "), password(True)],
        local_relay(lflag=RAW, inner_lflag=SECRET),
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.incident for row in ROWS])
def test_tracker(row: Row) -> None:
    ev = FakeEvidence(**copy.deepcopy(row.setup))  # a row may edit the processes it starts with
    session = Session(ev, ReadinessTracker(ev, RELAY_QUIET_S))
    for number, step in enumerate(row.steps):
        try:
            step(session)
        except AssertionError as failed:
            raise AssertionError(f"step {number} of {row.incident!r}") from failed


def test_a_write_to_the_group_seen_at_the_last_look_does_not_look_for_relays_again() -> None:
    ev = FakeEvidence()
    tracker = ReadinessTracker(ev, RELAY_QUIET_S)
    tracker.begin(b"ls\r")
    ev.procs[100].rchar += 3
    assert tracker.check().ready
    looks = ev.target_calls
    tracker.begin(b"pwd\r")  # the same plain group: the last look's target stands
    assert ev.target_calls == looks
    assert not tracker.check().ready
    ev.procs[100].rchar += 4
    assert tracker.check().ready


def test_the_table_runs_in_milliseconds() -> None:
    started = time.perf_counter()
    for row in ROWS:
        test_tracker(row)
    assert time.perf_counter() - started < 0.5  # the whole table, on a loaded machine


def test_the_tracker_reads_nothing_but_its_evidence() -> None:
    """The verdict takes no fact from anywhere else: no clock, no /proc, no channel, no termios call."""
    source = Path(tracker_module.__file__).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    forbidden = {"time", "os", "ptyd.backends.os.procfs", "ptyd.backends.os.channel", "ptyd.backends.os.spawn"}
    assert not imported & forbidden
    assert "termios.tc" not in source  # its termios use is the flag constants


def test_the_fake_answers_every_question_the_evidence_protocol_asks() -> None:
    asked = {name for name in vars(Evidence) if not name.startswith("_")}
    assert asked, "the protocol names no question"
    assert asked <= {name for name in dir(FakeEvidence) if callable(getattr(FakeEvidence, name))}
