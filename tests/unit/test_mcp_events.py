"""ptyd-mcp's event store for resumable HTTP streams: what is replayed after an id, and what its bounds drop."""

from __future__ import annotations

import anyio
from mcp.server.streamable_http import EventMessage
from mcp_types import JSONRPCNotification

from ptyd_mcp.events import MemoryEventStore


def note(n: int) -> JSONRPCNotification:
    return JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"n": n})


def replay(store: MemoryEventStore, last: str) -> tuple[str | None, list[tuple[str | None, int]]]:
    seen: list[tuple[str | None, int]] = []

    async def send(event: EventMessage) -> None:
        params = event.message.params or {}  # type: ignore[union-attr]
        seen.append((event.event_id, params["n"]))

    stream = anyio.run(store.replay_events_after, last, send)
    return stream, seen


def test_what_came_after_the_id_is_replayed_in_order_without_the_priming_event() -> None:
    store = MemoryEventStore()

    async def fill() -> list[str]:
        ids = [await store.store_event("a", None)]
        for n in range(3):
            ids.append(await store.store_event("a", note(n)))
            await store.store_event("b", note(100 + n))  # another stream's: never replayed here
        return ids

    ids = anyio.run(fill)
    stream, seen = replay(store, ids[0])
    assert stream == "a"
    assert seen == [(ids[1], 0), (ids[2], 1), (ids[3], 2)]
    assert replay(store, ids[2])[1] == [(ids[3], 2)]


def test_the_oldest_streams_go_first_past_the_bound() -> None:
    store = MemoryEventStore(max_events=4)

    async def fill() -> tuple[str, str]:
        old = await store.store_event("old", None)
        await store.store_event("old", note(1))
        new = await store.store_event("new", None)
        for n in range(3):
            await store.store_event("new", note(n))
        return old, new

    old, new = anyio.run(fill)
    assert replay(store, old) == (None, [])
    assert replay(store, new)[1] == [(f"new/{i}", i - 4) for i in range(4, 7)]


def test_a_malformed_id_replays_nothing() -> None:
    assert replay(MemoryEventStore(), "no-slash") == (None, [])
    assert replay(MemoryEventStore(), "a/b") == (None, [])
