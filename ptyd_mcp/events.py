"""Resumable streams over streamable HTTP: the MCP SDK's ``EventStore``, in memory and bounded.

Every SSE event of a request's stream is kept under an id; a host whose stream dropped (a `terminal_send` waits up
to its timeout, and a proxy or a laptop lid may cut the connection meanwhile) reconnects with ``Last-Event-ID`` and
gets what it missed, then the rest as it comes. The SDK sends each stream's priming event (an id, no data, and
``retry``) to hosts of protocol 2025-11-25, as SEP-1699 asks. Ids are ``STREAM/N``: the stream an id belongs to is
read off it. The oldest streams' events are dropped past ``HTTP_EVENTS_KEPT`` events or ``HTTP_EVENT_BYTES_KEPT``
bytes; an id whose events are gone replays nothing.

One store serves every MCP session of the server, and the SDK names a request's stream by its JSON-RPC id, which
every host numbers from 0 or 1: two hosts' request 3 shared stream "3", and a host resuming it was replayed the
other's answer. So each session's transport gets its own view (``SessionEvents``): its streams are kept as
``SESSION:STREAM`` and a Last-Event-ID of another session replays nothing (``per_session``).
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from typing import Any, final

import anyio
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

from ptyd_mcp.config import HTTP_EVENT_BYTES_KEPT, HTTP_EVENTS_KEPT, HTTP_RESUME_LIVE_WAIT_S


@final
class MemoryEventStore(EventStore):
    def __init__(self, max_events: int = HTTP_EVENTS_KEPT, max_bytes: int = HTTP_EVENT_BYTES_KEPT) -> None:
        self._max_events = max_events
        self._max_bytes = max_bytes
        # stream -> [(number, message or None for a priming event, its size)], streams oldest first
        self._streams: OrderedDict[StreamId, list[tuple[int, JSONRPCMessage | None, int]]] = OrderedDict()
        self._numbers = itertools.count(1)
        self._events = 0
        self._bytes = 0

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        number = next(self._numbers)
        size = len(message.model_dump_json(by_alias=True, exclude_unset=True)) if message is not None else 0
        events = self._streams.setdefault(stream_id, [])
        self._streams.move_to_end(stream_id)  # a stream that is still talking is the newest
        events.append((number, message, size))
        self._events += 1
        self._bytes += size
        self._trim()
        return f"{stream_id}/{number}"

    def _trim(self) -> None:
        while len(self._streams) > 1 and (self._events > self._max_events or self._bytes > self._max_bytes):
            _, dropped = self._streams.popitem(last=False)
            self._events -= len(dropped)
            self._bytes -= sum(size for _, _, size in dropped)

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        stream_id, _, number = last_event_id.rpartition("/")
        events = self._streams.get(stream_id)
        if events is None or not number.isdigit():
            return None
        after = int(number)
        for n, message, _ in events:
            if n > after and message is not None:
                await send_callback(EventMessage(message, f"{stream_id}/{n}"))
        return stream_id


@final
class SessionEvents(EventStore):
    """One MCP session's view of the shared store: its stream ids prefixed by the session's id.

    It also closes the SDK's replay window: after a stream's events are replayed, the SDK stores a priming event and
    only then registers the stream as live; an answer stored in between was neither replayed nor forwarded, and the
    host waited for it forever (a send's answer arriving as its host resumed: seen once in CI). Until the resumed
    stream is live, storing an answer for it waits (``HTTP_RESUME_LIVE_WAIT_S`` at most): the SDK forwards it live."""

    def __init__(self, store: EventStore, session_id: str, transport: Any = None) -> None:
        self._store = store
        self._prefix = f"{session_id}:"
        self._transport = transport  # the session's StreamableHTTPServerTransport: its live streams
        self._resuming: set[StreamId] = set()  # replayed, not yet seen live

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = await self._store.store_event(self._prefix + stream_id, message)
        if message is not None and stream_id in self._resuming:  # not the priming event: the SDK awaits that one
            await self._until_live(stream_id)
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        if not last_event_id.startswith(self._prefix):  # another session's id, or none of ours
            return None
        stream_id = await self._store.replay_events_after(last_event_id, send_callback)
        if stream_id is None:
            return None
        stream_id = stream_id.removeprefix(self._prefix)  # the SDK's own name for it
        if self._transport is not None:
            self._resuming.add(stream_id)
        return stream_id

    async def _until_live(self, stream_id: StreamId) -> None:
        live = self._transport._request_streams
        with anyio.move_on_after(HTTP_RESUME_LIVE_WAIT_S):
            while stream_id not in live:  # noqa: ASYNC110 - the SDK's dict of live streams has no event to wait on
                await anyio.sleep(0.001)
        self._resuming.discard(stream_id)


def per_session(server: Any, store: EventStore) -> None:
    """Give each session ``server``'s HTTP app admits its own view of ``store`` (call after ``streamable_http_app``).
    The SDK passes one store to every transport it makes; its session manager's ``_admit_session`` is where a
    session's transport is made, and the transport's ``_request_streams`` are its live streams (mcp 2.3.0, pinned;
    tests/mcp_server/test_resumable_http.py fails if either moves)."""
    manager = server._session_manager
    admit = manager._admit_session

    def admit_with_own_events(*args: Any, **kwargs: Any) -> Any:
        transport = admit(*args, **kwargs)
        if transport is not None and transport._event_store is store:
            transport._event_store = SessionEvents(store, transport.mcp_session_id, transport)
        return transport

    manager._admit_session = admit_with_own_events
