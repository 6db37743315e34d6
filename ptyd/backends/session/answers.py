"""Answers to terminal queries, written only to the program that asked, and only once it waits for them.

A program that asks (device attributes, cursor position) then waits on the terminal for the answer. One that
prints queries and never reads (a binary dump, ``cat`` of a log full of escapes) would leave the answers in the
tty's input queue, and the shell in front after it reads them as typed (``bash: 22cecho: command not found``).
So an answer is held until the foreground group that was in front when the query was read (or a job that group
started and put in front since: ``_started_by``) is seen waiting on the terminal (the readiness probe), checked at
once and then at growing intervals; it is dropped when another group takes the front or the asker has not waited
within ``answer_hold_ms``. Where the shell marks its prompts (shell integration), an answer to a query written
before the shell's latest prompt is dropped too: the program that asked has ended, though its output may be read
only after the shell took the terminal back, when the shell in front looks like the asker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import final

from ptyd.backends.os import procfs
from ptyd.backends.readiness.blocked_read import Wait
from ptyd.backends.readiness.foreground import ForegroundGroup

log = logging.getLogger("ptyd.session")

_PROBE_DELAYS_S = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)  # then every 0.2 s until answer_hold_ms


@final
class AnswerGate:
    def __init__(
        self,
        foreground: ForegroundGroup,
        front: Callable[[], int],
        write: Callable[[bytes], None],
        name: str,
        hold_s: float,
        read_all: Callable[[], None],
        orphaned: Callable[[], int],
    ) -> None:
        self._foreground = foreground
        self._read_all = read_all  # reads what the program wrote: a prompt mark may be in it
        self._orphaned = orphaned  # output before the shell's latest prompt mark, in bytes
        self._position = 0  # where in the output the held answers' queries were (the earliest)
        self._hold_s = hold_s
        self._deadline = 0.0  # the held answers' (from the first held)
        self._front = front  # the group in front now
        self._write = write
        self._name = name
        self._held = bytearray()
        self._asker = -1
        self._timer: asyncio.TimerHandle | asyncio.Handle | None = None
        self._soon = False  # the pending probe is the next loop turn's
        self.dropped = 0

    @property
    def holding(self) -> bool:
        """Answers wait for their asker to read: a program that blocked on one is not ready for other input."""
        return bool(self._held)

    def offer(self, data: bytes, asker: int, position: int) -> None:
        """An answer to a query read while ``asker`` was the foreground group (dropped now if another group is in
        front). The asker is known only as the group in front at the oldest output not yet rendered: a command's
        echo and its program's query rendered together (the engine in the daemon) name the shell, whose job in
        front since asked. A group the asker did not start (the shell back after a dump) is not the asker.
        ``position``: the output read before the query's (bytes), for ``orphaned``."""
        if position < self._orphaned():
            self._drop_one()
            return
        front = self._front()
        if front != asker:
            if not _started_by(front, asker):  # its program left the front: the answer would be the next one's input
                self._drop_one()
                return
            asker = front
        if self._held and asker != self._asker:
            self._drop()
        if not self._held:
            self._deadline = asyncio.get_running_loop().time() + self._hold_s
            self._position = position
        self._held += data
        self._asker = asker
        # Probed again soon (a new query: its asker may be waiting already, not at the next backed-off probe),
        # but once a loop turn however many answers a render produced.
        if not self._soon:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = asyncio.get_running_loop().call_soon(self._check, 0)
            self._soon = True

    def _check(self, attempt: int) -> None:
        self._timer = None
        self._soon = False
        if not self._held:
            return
        if self._front() != self._asker:
            self._drop()
            return
        asker = self._asker
        if asker < 0 or self._foreground.input_wait(asker) != Wait.NONE:
            # A shell seen waiting has drawn its prompt: read it first, its mark may say the asker has ended.
            self._read_all()
            if not self._held or self._asker != asker:
                return  # what that read rendered was offered meanwhile, to another asker: looked at again then
            if self._position < self._orphaned():
                self._drop()
                return
            held, self._held = bytes(self._held), bytearray()
            self._write(held)
            return
        loop = asyncio.get_running_loop()
        left = self._deadline - loop.time()
        if left <= 0:
            self._drop()
            return
        delay = min(_PROBE_DELAYS_S[min(attempt, len(_PROBE_DELAYS_S) - 1)], left)
        self._timer = loop.call_later(delay, self._check, attempt + 1)

    def _drop_one(self) -> None:
        self.dropped += 1
        log.debug("%s: dropped an answer: its asker is no longer in front", self._name)

    def _drop(self) -> None:
        self.dropped += 1
        log.debug("%s: dropped %d bytes of answers: their program did not read them", self._name, len(self._held))
        self._held.clear()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._soon = False
        self._held.clear()


def _started_by(pgid: int, asker: int, depth: int = 4) -> bool:
    """Whether group ``pgid``'s leader descends from ``asker``'s leader (a job the asking shell started)."""
    pid = pgid
    for _ in range(depth):
        stat = procfs.read_stat(pid) if pid > 1 else None
        if stat is None:
            return False
        if stat.ppid == asker:
            return True
        pid = stat.ppid
    return False
