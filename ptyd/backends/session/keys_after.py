"""When the keys a send presses after its input go out (``keys`` with ``input``): once the program took the
input and what the input started settled, not in the gap between the shell reading the line and the command
running (a C-c there kills ``touch F`` in ``touch F; sleep 30`` before it ran: 3 of 6 times, issue 26)."""

from __future__ import annotations

import time
from typing import final

from ptyd.backends.readiness.front_settle import FrontSettle
from ptyd.backends.session.send import SendOp

KEYS_HOLD_S = 0.5  # keys after input go out once the input was taken and its program ran this long unready
KEYS_SETTLE_S = 0.1  # ...or once what it started sat blocked (sleeping, waiting) this long, its processes unchanged
KEYS_PROBE_S = 0.01  # probes at least this often while keys wait: they go out soon after the program settled


@final
class KeysAfterInput:
    def __init__(self) -> None:
        self._front_settle = FrontSettle()  # how long what is in front sat unchanged

    def written(self) -> None:
        """A send's input was written: what is in front is measured from now on."""
        self._front_settle = FrontSettle()

    def settled(self, op: SendOp, front_pgid: int, pids: list[int]) -> bool:
        """The input was taken and the program is not ready: what the input started settled if a group the shell
        forked sat blocked for KEYS_SETTLE_S (``sleep 30``), or anything in front ran that long unchanged for
        KEYS_HOLD_S (a busy loop, a builtin loop the shell runs)."""
        asleep_s, in_front_s = self._front_settle.look(front_pgid, pids)
        forked = front_pgid != op.front_at_write
        if forked and asleep_s >= KEYS_SETTLE_S:
            return True
        # Busy: the same group in front that long (make -j's members come and go), or groups that keep changing
        # (a shell loop of short commands) for twice that.
        return in_front_s >= KEYS_HOLD_S or time.monotonic() - op.started >= 2 * KEYS_HOLD_S
