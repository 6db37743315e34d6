"""Reading another process's memory (the readiness check's select sets, poll arrays and timeouts): all of the
range or nothing."""

from __future__ import annotations

import ctypes
import mmap
import os

from ptyd.backends.os import procfs


def test_a_range_that_runs_into_unmapped_memory_reads_as_nothing() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    page = mmap.PAGESIZE
    prot, flags = mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    base = libc.mmap(None, 2 * page, prot, flags, -1, 0)
    assert base not in (None, ctypes.c_void_p(-1).value)
    assert libc.munmap(base + page, page) == 0  # the second page is gone: a read across it comes back short
    try:
        ctypes.memmove(base + page - 8, b"12345678", 8)
        assert procfs.read_memory(os.getpid(), base + page - 8, 8) == b"12345678"
        assert procfs.read_memory(os.getpid(), base + page - 8, 16) is None
    finally:
        libc.munmap(base, page)
