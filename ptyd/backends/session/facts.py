"""What a send's result reports of the session's processes (the foreground group, the ports they listen on, the
limits' counters), read once the program was seen ready: while a worker still renders the prompt, when that wait
is what the result waits for, so that the /proc reads cost the round trip nothing; else when the result is built.

A program found waiting for input stays so until it is given some: what it is, and what its group holds, are the
same a moment later. The reads are read again at the result if the terminal's foreground group changed, or the
session's program exited, since (``ProcessFacts.hold``), or if they were not read for this settle at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ptyd import protocol as p
from ptyd.backends.os.sandbox.limits import Counters
from ptyd.backends.readiness.foreground import ForegroundGroup
from ptyd.backends.session.listening import listening


class FactSource(Protocol):
    """The session, as far as its facts go (a LocalSession)."""

    @property
    def exited(self) -> bool: ...
    def members(self) -> list[int]: ...
    def limit_counters(self) -> Counters: ...


@dataclass(frozen=True, slots=True)
class ProcessFacts:
    pgid: int | None  # the terminal's foreground group when they were read
    exited: bool  # ...and whether the session's program had exited
    foreground: p.Foreground | None
    listening: list[p.ListeningPort]
    counters: Counters

    def hold(self, pgid: int | None, exited: bool) -> bool:
        """Still what a result built now would read: the same group in front, and the program's exit unchanged."""
        return pgid == self.pgid and exited == self.exited


def read_facts(session: FactSource, foreground: ForegroundGroup) -> ProcessFacts:
    exited = session.exited
    return ProcessFacts(
        pgid=foreground.pgid(),
        exited=exited,
        foreground=foreground.describe(exited),
        listening=listening(session.members()),
        counters=session.limit_counters(),
    )
