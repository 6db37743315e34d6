"""A worker's memory: given back after sessions close (worker side), and measured by the daemon (``pool``).

A closed session's native terminal is freed at the next entry into the engine (``engines.ghostty.lifetime``); a
worker frees it as soon as it has nothing left to render instead, then asks the allocator to return what it
freed (``malloc_trim``: glibc keeps freed memory in its arenas, and a worker's terminals are pages of hundreds of
KiB). The daemon reads each worker's resident size from /proc and replaces a worker past its ceiling
(``engine_worker_rss_mb``): whatever holds the memory, a new process holds none of it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import sys
from typing import Any

_libc: Any = None
with contextlib.suppress(OSError, AttributeError):
    _name = ctypes.util.find_library("c")
    if _name:
        _libc = ctypes.CDLL(_name)
        _libc.malloc_trim  # noqa: B018 - glibc only: absent elsewhere (musl), then nothing is trimmed

PAGE = 4096


def give_back() -> None:
    """Free the native terminals of closed sessions now, and return free memory to the system."""
    lifetime = sys.modules.get("ptyd.terminal.engines.ghostty.lifetime")
    if lifetime is not None:
        lifetime.free_dropped()
    if _libc is not None:
        with contextlib.suppress(AttributeError):
            _libc.malloc_trim(0)


def rss_bytes(pid: int) -> int | None:
    """Process ``pid``'s resident size, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return None
