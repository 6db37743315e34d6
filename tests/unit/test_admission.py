"""Admission as a table of decisions: per-peer shares, the global cap and who makes room, the unauthenticated
bound. In process, with closures standing in for connections (the daemon-level tests are in
tests/hardening/test_connection_limits.py)."""

from __future__ import annotations

import asyncio

from ptyd.config import Config
from ptyd.rpc.admission import Admission, Admitted


def test_shares_caps_and_who_makes_room() -> None:
    async def scenario() -> None:
        admission = Admission(Config(max_connections=4, max_connections_per_peer=2))
        ended: list[str] = []

        def admit(pid: int, name: str) -> Admitted | None:
            return admission.admit(pid, lambda: ended.append(name))

        a1, a2 = admit(1, "a1"), admit(1, "a2")
        assert a1 is not None
        assert a2 is not None
        assert admit(1, "a3") is None  # pid 1 holds its share
        b1, b2 = admit(2, "b1"), admit(2, "b2")
        assert b1 is not None
        assert b2 is not None
        admission.authenticated(a1)
        b2.presenting = 1  # its first call, with a token, still runs
        c1 = admit(3, "c1")  # full: the oldest idle one that never authenticated (a2) makes room
        assert c1 is not None
        assert ended == ["a2"]
        admission.authenticated(b1)
        assert admit(4, "d1") is not None
        assert ended == ["a2", "c1"]
        admission.authenticated(b2)
        assert admit(5, "e1") is not None
        assert ended == ["a2", "c1", "d1"]
        admission.release(a1)
        assert admit(1, "a4") is not None  # a slot and a share back once a connection ends

    asyncio.run(scenario())


def test_the_unauthenticated_bound() -> None:
    async def scenario() -> None:
        admission = Admission(Config(unauthenticated_connection_ms=20))
        ended: list[str] = []
        idle = admission.admit(1, lambda: ended.append("idle"))
        kept = admission.admit(1, lambda: ended.append("kept"))
        busy = admission.admit(1, lambda: ended.append("busy"))
        assert idle is not None
        assert kept is not None
        assert busy is not None
        admission.authenticated(kept)
        busy.presenting = 1
        await asyncio.sleep(0.1)  # five bounds: the timers under test are the daemon's own
        assert ended == ["idle"]  # busy's judgement waits for its call
        busy.presenting = 0
        await asyncio.sleep(0.1)
        assert ended == ["idle", "busy"]

    asyncio.run(scenario())
