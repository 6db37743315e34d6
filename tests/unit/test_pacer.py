"""The bulk pacer among competing floods: each refused flood gets its turn, in the order it was refused."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from ptyd.backends.os.pacing import BulkPacer

from .conftest import run


def test_competing_floods_take_turns() -> None:
    """Ten floods that always have output, each asking again the moment its turn ends (as a reader whose PTY
    is full does): the pacer serves them round-robin. When each re-armed a timer of its own, the same few won
    every window and the rest starved."""

    async def main() -> Counter[int]:
        pacer = BulkPacer(window_s=0.005, share=0.5)
        turns: Counter[int] = Counter()
        done = asyncio.get_running_loop().create_future()

        def flood(key: int) -> None:
            granted = pacer.grant(time.monotonic(), key)
            if granted <= 0:
                pacer.wait(key, lambda: flood(key))
                return
            pacer.spend(granted)  # as if it read for all of its grant
            turns[key] += 1
            if sum(turns.values()) >= 200:
                if not done.done():
                    done.set_result(None)
                return
            asyncio.get_running_loop().call_soon(flood, key)  # its PTY is full again at once

        for key in range(10):
            flood(key)
        await done
        return turns

    turns = run(main)
    assert sorted(turns) == list(range(10))
    assert min(turns.values()) >= max(turns.values()) - 2, turns  # round-robin, give or take a turn in flight


def test_a_forgotten_flood_is_never_woken() -> None:
    async def main() -> list[int]:
        pacer = BulkPacer(window_s=0.005, share=0.5)
        woken: list[int] = []
        two = asyncio.Event()

        def wake(key: int) -> None:
            woken.append(key)
            if len(woken) == 2:
                two.set()

        for key in (1, 2, 3):
            pacer.grant(time.monotonic(), key)
        pacer.spend(1.0)  # the window is spent: everyone waits
        for key in (1, 2, 3):
            assert pacer.grant(time.monotonic(), key) == 0
            pacer.wait(key, lambda key=key: wake(key))
        pacer.forget(2)
        await two.wait()  # in the order they waited: 2 would have come between them
        return woken

    assert run(main) == [1, 3]


def test_a_new_event_loop_starts_with_no_queue() -> None:
    """A loop that closed with floods queued and its wake-up pending (in-process tests run one loop each) must not
    keep the next loop's floods waiting for a timer that will never fire."""
    pacer = BulkPacer(window_s=0.005, share=0.5)

    async def refused_and_woken() -> asyncio.Event:
        woken = asyncio.Event()
        for key in (1, 2):
            pacer.grant(time.monotonic(), key)
        pacer.spend(1.0)  # the window is spent: the flood waits for the next one
        assert pacer.grant(time.monotonic(), 1) == 0
        pacer.wait(1, woken.set)
        return woken

    async def first() -> None:
        await refused_and_woken()  # the loop ends before the wake-up fires

    async def second() -> None:
        await (await refused_and_woken()).wait()

    run(first)
    run(second)


def test_a_flood_asking_alone_while_others_wait_their_turn_is_not_granted_all() -> None:
    """On a loaded machine a window may pass within one flood's turn: asking again at once, it seemed alone (no
    other flood asked in this window or the last, the others being queued) and was granted everything, turn
    after turn, while the queue waited (one flood of ten took 125 of 200 turns)."""

    async def main() -> float:
        pacer = BulkPacer(window_s=0.005, share=0.5)
        now = time.monotonic()  # no await below: the turn the wait arms is not given meanwhile
        pacer.grant(now, 1)
        pacer.grant(now, 2)
        pacer.spend(pacer.budget_s)
        assert pacer.grant(now, 2) == 0.0
        pacer.wait(2, lambda: None)
        pacer.grant(now + 0.011, 1)  # two windows later, flood 1 asks again
        granted = pacer.grant(now + 0.022, 1)  # ...and again: flood 2 still waits for its turn
        pacer.forget(2)
        return granted

    assert run(main) == 0.0
