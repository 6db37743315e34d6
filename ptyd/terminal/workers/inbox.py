"""What an engine worker has been sent and not yet rendered, by session, and which session it renders next.

The worker takes everything the daemon sent as soon as it can (the socket holds megabytes of floods when many
sessions print), and renders a slice of one session at a time: the session with the fewest bytes waiting first,
so an interactive session's echo is rendered after at most one slice of a flood, not after every flood frame
queued ahead of it. A session left waiting FAIR_S goes first whatever its size, so no flood starves.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import final

from ptyd.terminal.workers import messages as m

SLICE_BYTES = 64 << 10  # output rendered of one session before the next is chosen (~1 ms on the native engine)
FAIR_S = 0.05  # a session waiting this long is served before any smaller one


@dataclass(slots=True)
class _Queue:
    since: float  # when its oldest message arrived
    messages: deque[m.ToWorker] = field(default_factory=deque)
    size: int = 0  # output bytes waiting


def _size(msg: m.ToWorker) -> int:
    return len(msg.data) if isinstance(msg, m.Feed) else 0


@final
class Inbox:
    def __init__(self) -> None:
        self._queues: dict[int, _Queue] = {}  # in order of arrival

    def __bool__(self) -> bool:
        return bool(self._queues)

    def put(self, msg: m.ToWorker, now: float | None = None) -> None:
        queue = self._queues.get(msg.sid)
        if queue is None:
            queue = self._queues[msg.sid] = _Queue(time.monotonic() if now is None else now)
        queue.messages.append(msg)
        queue.size += _size(msg)

    def take(self, now: float | None = None) -> list[m.ToWorker]:
        """The next session's messages in their order, up to SLICE_BYTES of output (at least one message)."""
        if not self._queues:
            return []
        now = time.monotonic() if now is None else now
        sid, queue = next(iter(self._queues.items()))  # the longest waiting
        if now - queue.since < FAIR_S:
            sid, queue = min(self._queues.items(), key=lambda item: item[1].size)
        taken: list[m.ToWorker] = []
        room = SLICE_BYTES
        while queue.messages:
            size = _size(queue.messages[0])
            if taken and size > max(room, 0):  # what has no output (a settle, a resize) always comes along
                break
            taken.append(queue.messages.popleft())
            room -= size
            queue.size -= size
        del self._queues[sid]
        if queue.messages:  # the rest waits again, from now, behind the others
            queue.since = now
            self._queues[sid] = queue
        return taken
