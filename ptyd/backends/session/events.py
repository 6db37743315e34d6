"""Events of one session for its subscribers: the program starting to wait for input outside any send, and
completed output lines as they appear. Costs nothing while nobody listens."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any, final

from ptyd import protocol as p
from ptyd.backends.os.channel import PtyChannel
from ptyd.backends.readiness.tracker import ReadinessTracker
from ptyd.terminal.engine import TerminalEngine
from ptyd.terminal.viewport import bound

Listener = Callable[[p.TerminalEvent], None]
OUTPUT_EVENT_INTERVAL_S = 0.03  # output events are batched over this long
SCREEN_EVENT_INTERVAL_S = 0.05  # screen events at most this often: 20 redraws a second is live to a person
WATCH_PROBE_MAX_S = 0.05  # the input-wait watch backs off to probing this often...
WATCH_GIVE_UP_S = 10.0  # ...and stops after this long without output (the next output restarts it)


@final
class SessionWatch:
    def __init__(
        self,
        session_id: str,
        tracker: ReadinessTracker,
        channel: PtyChannel,
        terminal: TerminalEngine,
        busy: Callable[[], bool],
        max_bytes: int,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._session_id = session_id
        self._tracker = tracker
        self._channel = channel
        self._terminal = terminal
        self._busy = busy
        self._max_bytes = max_bytes
        self._listener: Listener | None = None
        self._want_output = False
        self._want_screen = False
        self._output_line = 0
        self._input_task: asyncio.Task[None] | None = None
        self._output_task: asyncio.Task[None] | None = None
        self._screen_task: asyncio.Task[None] | None = None

    def set_listener(self, listener: Listener | None, output: bool, screen: bool = False) -> None:
        if output and not self._want_output:
            self._output_line = self._terminal.cursor_line
        self._listener = listener
        self._want_output = output and listener is not None
        self._want_screen = screen and listener is not None
        if listener is None:
            self.stop()

    def emit(self, kind: p.EventKind, **fields: Any) -> None:
        if self._listener is not None:
            self._listener(p.TerminalEvent(subscription_id="", session_id=self._session_id, seq=0, kind=kind, **fields))

    def output_arrived(self) -> None:
        if self._listener is None:
            return
        if self._want_output and self._output_task is None:
            self._output_task = self._loop.create_task(self._pump_output())
        if self._want_screen and self._screen_task is None:
            self._screen_task = self._loop.create_task(self._pump_screen())
        if self._input_task is None and not self._busy():
            self._input_task = self._loop.create_task(self._watch_input())

    def send_started(self) -> None:
        if self._input_task is not None:
            self._input_task.cancel()
            self._input_task = None

    def stop(self) -> None:
        for task in (self._input_task, self._output_task, self._screen_task):
            if task is not None:
                task.cancel()
        self._input_task = self._output_task = self._screen_task = None

    async def _watch_input(self) -> None:
        try:
            self._tracker.begin(wrote_input=b"")
            interval = 0.001
            while not self._busy() and time.monotonic() - self._channel.last_output < WATCH_GIVE_UP_S:
                await asyncio.sleep(interval)
                interval = min(interval * 2, WATCH_PROBE_MAX_S)
                if self._busy() or self._channel.closed:
                    return
                if self._tracker.check().ready:
                    self._channel.drain()
                    await self._channel.rendered()
                    password = self._tracker.password_prompt(self._tracker.target())
                    self.emit("input_wait", password_prompt=password)
                    return
        finally:
            if self._input_task is asyncio.current_task():
                self._input_task = None

    async def _pump_output(self) -> None:
        try:
            while self._want_output and not self._channel.closed:
                mark = self._channel.received
                await asyncio.sleep(OUTPUT_EVENT_INTERVAL_S)
                await self._channel.rendered()
                self._flush_output()
                if self._channel.received == mark:
                    return
        finally:
            if self._output_task is asyncio.current_task():
                self._output_task = None

    async def _pump_screen(self) -> None:
        """A 'screen' event once the output that arrived is rendered, then one per interval while more arrives."""
        try:
            while self._want_screen and not self._channel.closed:
                mark = self._channel.received
                await self._channel.rendered()
                self.emit("screen")
                await asyncio.sleep(SCREEN_EVENT_INTERVAL_S)
                if self._channel.received == mark:
                    return
        finally:
            if self._screen_task is asyncio.current_task():
                self._screen_task = None

    def _flush_output(self) -> None:
        term = self._terminal
        end = term.cursor_line
        start = max(self._output_line, term.scrollback.first)
        dropped = start > self._output_line
        self._output_line = max(end, self._output_line)
        if end <= start:
            return
        text, cut = bound([], None, term.transcript(start, end), start, self._max_bytes)
        lines = p.LineRange(start_line=start, end_line=end)
        self.emit("output", output=text + "\n", lines=lines, truncated=cut or dropped)

    async def close(self) -> None:
        tasks = [t for t in (self._input_task, self._output_task, self._screen_task) if t is not None]
        self.stop()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
