"""The dashboard's one link to the daemon: one event subscription and one session list for every browser, and
each session's screen read once per change and pushed to every page that watches (never polled per page)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, final

from ptyd_client import core
from ptyd_client.aio import AsyncClient
from ptyd_client.errors import ConnectionLost, DaemonUnavailable, PtydError
from ptyd_client.events import AsyncEventStream

log = logging.getLogger("ptyd.web")

LIST_INTERVAL_S = 1.0  # the session list (status, foreground program, last activity) is re-read this often...
LIST_MIN_INTERVAL_S = 0.2  # ...and on events, at most this often (50 busy sessions must not mean 50 lists a turn)
SCREEN_MIN_INTERVAL_S = 0.1  # one session's screen is read at most this often, however fast it changes
# ...and its picture (terminal_screenshot: colours, ~0.1-0.2 s of the daemon's time at 80x24) at most this often:
# a busy session costs the daemon a few pictures a second, whatever the number of pages.
PICTURE_MIN_INTERVAL_S = 0.5
PICTURE_FONT_SIZE = 12  # pixels per em: a thumbnail scales it down, the zoomed view shows it as it is
RECONNECT_S = 1.0  # a daemon that went away is asked again this often
PAGE_QUEUE = 256  # messages queued for one page; a page that does not read is dropped (it reconnects)


@final
class Page:
    """One browser's event stream."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[tuple[str, Any] | None] = asyncio.Queue(PAGE_QUEUE)

    def put(self, message: tuple[str, Any] | None) -> bool:
        try:
            self.queue.put_nowait(message)
        except asyncio.QueueFull:
            return False
        return True


@final
class Hub:
    def __init__(self, socket_path: Path, token: Callable[[], str]) -> None:
        self.socket_path = socket_path
        self._token = token  # read anew on each connect: a restarted daemon has a new operator token
        self.client: AsyncClient | None = None
        self.connected = asyncio.Event()
        self.sessions: dict[str, dict[str, Any]] = {}
        self.screens: dict[str, dict[str, Any]] = {}
        self.pages: set[Page] = set()
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        self._list_wanted = asyncio.Event()
        self._last_read: dict[str, float] = {}
        self._activity: dict[str, int] = {}  # session id -> Unix ms of the last change this hub heard of
        self.pictures = True  # the daemon draws screenshots (off once it answers extra_missing)
        self._pictured: dict[str, float] = {}  # session id -> when its picture was last read
        self._pictures: dict[str, str] = {}  # session id -> its last picture, a data: URL
        self._stale: set[str] = set()  # sessions changed since their last picture, read again when it is due
        self._timers: set[str] = set()  # ...for which that look is scheduled

    # --- pages ---------------------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        return {"connected": self.connected.is_set(), "sessions": list(self.sessions.values()), "screens": self.screens}

    def join(self) -> Page:
        page = Page()
        page.put(("state", self.state()))
        self.pages.add(page)
        self._wake.set()  # screens that changed while nobody watched are read now
        return page

    def leave(self, page: Page) -> None:
        self.pages.discard(page)

    def _broadcast(self, kind: str, data: Any) -> None:
        for page in list(self.pages):
            if not page.put((kind, data)):
                self.pages.discard(page)
                with contextlib.suppress(asyncio.QueueEmpty):
                    page.queue.get_nowait()
                page.put(None)  # ends its stream; the browser reconnects and gets the whole state

    # --- the daemon ----------------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            try:
                await self._serve()
            except (DaemonUnavailable, ConnectionLost, PtydError, OSError) as exc:
                log.warning("the daemon at %s: %s; asking again in %.0f s", self.socket_path, exc, RECONNECT_S)
            finally:
                self.connected.clear()
                if self.client is not None:
                    with contextlib.suppress(Exception):
                        await self.client.close()
                    self.client = None
                self._broadcast("state", self.state())
            await asyncio.sleep(RECONNECT_S)  # the retry cadence, not a wait for a condition

    async def _serve(self) -> None:
        token = self._token()
        async with AsyncClient(self.socket_path, token) as client:
            self.client = client
            stream = await client.terminal_subscribe(None, screen=True)
            try:
                await self._refresh_list()
                self._dirty.update(self.sessions)
                self.connected.set()
                self._broadcast("state", self.state())
                tasks = [
                    asyncio.create_task(self._events(stream)),
                    asyncio.create_task(self._lists()),
                    asyncio.create_task(self._screens()),
                ]
                try:
                    done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
                    for task in done:
                        task.result()
                finally:
                    for task in tasks:
                        task.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
            finally:
                await stream.close()

    async def _events(self, stream: AsyncEventStream) -> None:
        async for event in stream:
            sid = event["session_id"]
            if event["kind"] == "session_closed":
                self.sessions.pop(sid, None)
                self.screens.pop(sid, None)
                self._forget(sid)
                self._broadcast("closed", sid)
                continue
            if sid not in self.sessions or event["kind"] in ("session_exit", "send_settled", "input_wait"):
                self._list_wanted.set()
            if event["kind"] in ("screen", "output"):
                self._activity[sid] = int(time.time() * 1000)  # the next list read carries it to the pages
            self._dirty.add(sid)
            self._wake.set()

    async def _lists(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._list_wanted.wait(), LIST_INTERVAL_S)
            self._list_wanted.clear()
            await self._refresh_list()
            await asyncio.sleep(LIST_MIN_INTERVAL_S)  # the bound on list reads, not a wait for a condition

    async def _refresh_list(self) -> None:
        assert self.client is not None
        sessions = {s["session_id"]: dict(s) for s in (await self.client.terminal_list())["sessions"]}
        for sid, info in sessions.items():  # what the screen events said (null: quiet since this hub started)
            info["last_activity_ms"] = self._activity.get(sid)
        for sid in sessions.keys() - self.sessions.keys():
            self._dirty.add(sid)
            self._wake.set()
        for sid in self.sessions.keys() - sessions.keys():
            self.screens.pop(sid, None)
            self._activity.pop(sid, None)
            self._forget(sid)
            self._broadcast("closed", sid)
        if sessions != self.sessions:
            self.sessions = sessions
            self._broadcast("sessions", list(sessions.values()))

    async def _screens(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self.pages:  # nobody watches: the changes wait for the next page (join wakes this)
                continue
            now = time.monotonic()
            due = [s for s in self._dirty if now - self._last_read.get(s, 0.0) >= SCREEN_MIN_INTERVAL_S]
            later = self._dirty.difference(due)
            self._dirty = set(later)
            await asyncio.gather(*(self._read_screen(sid) for sid in due))
            if later:
                await asyncio.sleep(SCREEN_MIN_INTERVAL_S)  # the per-session bound on reads
                self._wake.set()

    async def _read_screen(self, sid: str) -> None:
        assert self.client is not None
        self._last_read[sid] = time.monotonic()
        try:
            screen = dict(await self.client.terminal_screen(sid))
        except PtydError:  # closed meanwhile: the list says so next
            return
        screen["session_id"] = sid
        if self.pictures:
            screen["picture"] = await self._picture(sid, changed=self._text_of(sid) != self._text(screen))
            screen["picture_current"] = sid not in self._stale  # else an older picture, until the next is due
        if self.screens.get(sid) != screen:
            self.screens[sid] = screen
            self._broadcast("screen", screen)

    @staticmethod
    def _text(screen: dict[str, Any]) -> Any:
        return {k: v for k, v in screen.items() if k not in ("picture", "picture_current")}

    def _text_of(self, sid: str) -> Any:
        known = self.screens.get(sid)
        return self._text(known) if known is not None else None

    async def _picture(self, sid: str, *, changed: bool) -> str | None:
        """The session's screen in colour; read again once PICTURE_MIN_INTERVAL_S passed since the last one (a
        change sooner is read then: the session is marked for another look)."""
        assert self.client is not None
        last = self._pictured.get(sid)
        now = time.monotonic()
        if last is not None and now - last < PICTURE_MIN_INTERVAL_S:
            if (changed or sid in self._stale) and sid not in self._timers:  # one look again, once it is due
                self._stale.add(sid)
                self._timers.add(sid)
                asyncio.get_running_loop().call_later(PICTURE_MIN_INTERVAL_S - (now - last), self._again, sid)
            return self._pictures.get(sid)
        self._pictured[sid] = now
        self._stale.discard(sid)
        try:
            shot = await self.client.terminal_screenshot(sid, PICTURE_FONT_SIZE)
        except PtydError as exc:
            if exc.kind == "extra_missing":  # the daemon draws no pictures: text alone, as before
                log.warning("the daemon draws no screenshots (%s): screens are shown as text", exc)
                self.pictures = False
            return self._pictures.get(sid)
        self._pictures[sid] = "data:image/png;base64," + shot["png"]
        return self._pictures[sid]

    def _again(self, sid: str) -> None:
        self._timers.discard(sid)
        if sid in self._stale:  # a closed session's look fails quietly (_read_screen)
            self._dirty.add(sid)
            self._wake.set()

    def _forget(self, sid: str) -> None:
        for table in (self._pictured, self._pictures, self._last_read):
            table.pop(sid, None)
        self._stale.discard(sid)

    async def recordings(self) -> dict[str, Any]:
        await asyncio.wait_for(self.connected.wait(), 5)
        assert self.client is not None
        return dict(await self.client.terminal_recordings())


def operator_token(socket_path: Path) -> str:
    return core.read_operator_token(socket_path)
