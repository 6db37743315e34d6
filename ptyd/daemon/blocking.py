"""The daemon's threads for blocking work: a fixed few, all started with the loop.

asyncio's default executor starts a thread whenever a call finds none idle and keeps it for good, up to the
CPU count + 4: six agents releasing at once (each removes its scratch directory off the loop) left the daemon
with four threads more than before, for the rest of its life. The work sent here is brief and rare (a keeper's
reply, the state file, a scratch directory, a screenshot), so a fixed pool, started whole, keeps the daemon's
thread count the same from its first request to its last; a burst waits a moment in the pool's queue instead.
Nothing that waits on something else (a recording's writer) may hold one of these threads.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

BLOCKING_THREADS = 4


def install(loop: asyncio.AbstractEventLoop, threads: int = BLOCKING_THREADS) -> ThreadPoolExecutor:
    """Make a pool of ``threads`` started threads the loop's default executor (``asyncio.to_thread``)."""
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="ptyd-blocking")
    # A pool starts a thread for a call that finds none idle: calls that all wait for each other start every one.
    started = threading.Barrier(threads + 1)
    for _ in range(threads):
        pool.submit(started.wait)
    started.wait()
    loop.set_default_executor(pool)
    return pool
