"""Resumable streams over streamable HTTP: the MCP SDK's ``EventStore``, in memory and bounded.

Every SSE event of a request's stream is kept under an id; a host whose stream dropped (a `terminal_send` waits up
to its timeout, and a proxy or a laptop lid may cut the connection meanwhile) reconnects with ``Last-Event-ID`` and
gets what it missed, then the rest as it comes. The SDK sends each stream's priming event (an id, no data, and
``retry``) to hosts of protocol 2025-11-25, as SEP-1699 asks. Ids are ``STREAM/N``: the stream an id belongs to is
read off it. The oldest streams' events are dropped past ``HTTP_EVENTS_KEPT`` events or ``HTTP_EVENT_BYTES_KEPT``
bytes; an id whose events are gone replays nothing.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from typing import final

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

from ptyd_mcp.config import HTTP_EVENT_BYTES_KEPT, HTTP_EVENTS_KEPT


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
