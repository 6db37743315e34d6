"""Questions asked of a terminal device itself (termios ioctls): the input still queued for its reader, and its
local-mode flags. Below readiness and the channel alike: both ask them."""

from __future__ import annotations

import contextlib
import fcntl
import select
import struct
import termios


def input_queued(fd: int) -> int:
    """Bytes a terminal's reader has still to read, asked on the terminal's slave side. Written input reaches the
    line discipline through the kernel's flip buffer a worker's turn later, and FIONREAD alone does not see it
    there: a poll of the tty first runs that pending work (n_tty_poll flushes it), so nothing on its way hides."""
    poller = select.poll()  # not select(): a daemon with many sessions holds fds past FD_SETSIZE
    poller.register(fd, select.POLLIN)
    with contextlib.suppress(OSError):
        poller.poll(0)
    return buffered(fd)


def buffered(fd: int) -> int:
    """Bytes the line discipline holds for the reader now: FIONREAD without ``input_queued``'s poll, which waits
    for the flip buffer's worker (so does a read of a PTY master that finds none, even a non-blocking one)."""
    try:
        raw = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return 0
    return int(struct.unpack("i", raw)[0])


def local_flags(fd: int) -> int | None:
    """A terminal's local-mode flags (ECHO, ICANON, ...), or None when unreadable."""
    try:
        return int(termios.tcgetattr(fd)[3])
    except termios.error:
        return None


def interrupts(fd: int, key: bytes) -> bool | None:
    """Whether the terminal turns ``key`` into a SIGINT (ISIG on, and ``key`` its VINTR character); None when
    unreadable. jline (jshell) keeps ISIG but disables VINTR, and reads Ctrl-C as a key."""
    try:
        attrs = termios.tcgetattr(fd)
    except termios.error:
        return None
    intr = attrs[6][termios.VINTR]
    return bool(attrs[3] & termios.ISIG) and (intr if isinstance(intr, bytes) else bytes([intr])) == key
