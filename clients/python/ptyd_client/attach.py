"""``ptyctl attach``: drive a session from this terminal in raw mode; Ctrl-] detaches and leaves it running.

Keystrokes go out as ``terminal_send`` with ``timeout_ms=0`` (written at once, no readiness wait), the screen is
polled and redrawn, and this terminal's size is forwarded (on attach and on SIGWINCH). The session's own size is
put back on detach, so the agent that owns it finds it as it was. The tty is restored on every way out.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
import termios
import tty
from collections.abc import Coroutine
from typing import TextIO

from ptyd_client import render
from ptyd_client.aio import AsyncClient
from ptyd_client.errors import DaemonUnavailable, PtydError, SessionBusy, SessionExited, SessionNotFound

DETACH_KEY = b"\x1d"  # Ctrl-], as in telnet
DETACH_NAME = "Ctrl-]"
REFRESH_S = 0.1  # screen poll while nothing is typed
BUSY_RETRY_MS = 200  # how long to wait on another client's send before offering the keys again


class Attachment:
    def __init__(self, client: AsyncClient, session_id: str, fd_in: int, out: TextIO) -> None:
        self.client = client
        self.id = session_id
        self.fd_in = fd_in
        self.out = out
        self.pending = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._keys = asyncio.Event()
        self._redraw = asyncio.Event()
        self._sending = asyncio.Lock()  # the key forwarder and the screen refresher both send
        self._detaching = False
        self._resize_needed = True
        self._done: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def finish(self, reason: str | BaseException) -> None:
        if self._done.done():
            return
        if isinstance(reason, BaseException):
            self._done.set_exception(reason)
        else:
            self._done.set_result(reason)

    # --- input ---------------------------------------------------------------------------------------

    def _on_input(self) -> None:
        try:
            data = os.read(self.fd_in, 4096)
        except OSError:
            data = b""
        if not data:
            self._stop_reading()
            self._detaching = True
        elif DETACH_KEY in data:
            data = data[: data.index(DETACH_KEY)]
            self._stop_reading()
            self._detaching = True
        self.pending += self._decoder.decode(data)
        self._keys.set()

    def _stop_reading(self) -> None:
        asyncio.get_running_loop().remove_reader(self.fd_in)

    async def _forward_keys(self) -> None:
        while True:
            await self._keys.wait()
            self._keys.clear()
            while self.pending:
                text, self.pending = self.pending, ""
                try:
                    async with self._sending:
                        await self.client.terminal_send(self.id, text, timeout_ms=0)
                except SessionBusy:
                    # Another client's send (the agent's) is active. A Ctrl-C is delivered at once as the
                    # signal the terminal's own ^C would be; other keys wait for that send to settle.
                    if "\x03" in text:
                        await self.client.terminal_signal(self.id, "SIGINT")
                        text = text.replace("\x03", "")
                    self.pending = text + self.pending
                    await self.client.terminal_wait(self.id, timeout_ms=BUSY_RETRY_MS)
                self._redraw.set()
            if self._detaching:
                self.finish(f"detached from {self.id} (it is still running)")
                return

    # --- screen --------------------------------------------------------------------------------------

    def _size(self) -> os.terminal_size:
        try:
            return os.get_terminal_size(self.out.fileno())
        except OSError:
            return os.terminal_size((80, 24))

    async def _refresh(self) -> None:
        last = ""
        while True:
            size = self._size()
            if self._resize_needed:
                self._resize_needed = False
                await self.client.terminal_resize(self.id, max(size.columns, 2), max(size.lines - 1, 2))
            info = await self.client.terminal_status(self.id)
            if info["status"]["kind"] == "exited":
                self.finish(f"{self.id} {render.status_word(info['status'])}")
                return
            screen = await self.client.terminal_screen(self.id)
            cursor = (screen["cursor_x"], screen["cursor_y"]) if screen["cursor_visible"] else None
            footer = f"ptyctl attach: {DETACH_NAME} detaches | {render.session_line(info)}"
            drawn = render.frame(screen["lines"], size.columns, size.lines, footer=footer, cursor=cursor)
            if drawn != last:
                self.out.write(drawn)
                self.out.flush()
                last = drawn
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._redraw.wait(), REFRESH_S)
            self._redraw.clear()

    def _on_winch(self) -> None:
        self._resize_needed = True
        self._redraw.set()

    # --- the whole attachment ------------------------------------------------------------------------

    async def _guarded(self, work: Coroutine[None, None, None]) -> None:
        try:
            await work
        except SessionNotFound:
            self.finish(f"{self.id} was closed")
        except SessionExited:
            self.finish(f"{self.id} has exited")
        except Exception as exc:  # reported by run(), after the tty is restored
            self.finish(exc)

    async def run(self) -> str:
        loop = asyncio.get_running_loop()
        original = await self.client.terminal_status(self.id)  # a bad id fails before the tty is touched
        saved = termios.tcgetattr(self.fd_in)
        tasks: list[asyncio.Task[None]] = []
        try:
            tty.setraw(self.fd_in, termios.TCSANOW)
            self.out.write(render.ENTER_SCREEN)
            loop.add_reader(self.fd_in, self._on_input)
            loop.add_signal_handler(signal.SIGWINCH, self._on_winch)
            for sig in (signal.SIGTERM, signal.SIGHUP):
                loop.add_signal_handler(sig, self.finish, f"detached from {self.id} ({signal.Signals(sig).name})")
            for work in (self._forward_keys(), self._refresh()):
                tasks.append(loop.create_task(self._guarded(work)))
            return await self._done
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            loop.remove_reader(self.fd_in)
            for sig in (signal.SIGWINCH, signal.SIGTERM, signal.SIGHUP):
                loop.remove_signal_handler(sig)
            # Each step on its own: after a hangup the tty is gone, and the session's size still goes back.
            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(self.fd_in, termios.TCSADRAIN, saved)
            with contextlib.suppress(OSError, ValueError):
                self.out.write(render.LEAVE_SCREEN)
                self.out.flush()
            with contextlib.suppress(PtydError, DaemonUnavailable):
                await self.client.terminal_resize(self.id, original["cols"], original["rows"])


async def attach(client: AsyncClient, session_id: str, fd_in: int, out: TextIO) -> str:
    """Attach this terminal to the session until detached; return why it ended."""
    return await Attachment(client, session_id, fd_in, out).run()
