"""What an event loop reading the terminal is doing besides waiting for the user, and what its keys leave open.

An event loop (node, asyncio, prompt_toolkit, Textual) keeps the terminal in its epoll set while it works on a
line it was given: ``await`` of a timer in node's REPL waits in the same ``epoll_wait`` as the idle prompt,
only with a timeout. Seen from outside, its work in progress is a timer due (the wait's timeout, or an armed
timerfd in its interest list: loops that keep timers in the kernel), or a child process it waits for; its answer
is its prompt drawn again. And a key that a longer key begins with (a lone ESC: ``ESC [ A`` is Up) is held by
the program until its key-sequence timeout runs out (vim's 'ttimeoutlen', readline's keyseq-timeout, curses'
ESCDELAY), which it waits out in a timed wait entered right after reading the key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ptyd.backends.os import procfs

# The longest key-sequence timeout programs use by default: vim's 'timeoutlen' (1 s, with 'ttimeout' off, as
# under -u NONE) and curses' ESCDELAY (1 s); vim with Debian's defaults waits 100 ms, readline 500 ms.
KEY_SEQUENCE_MAX_S = 1.0
# Input that ends in a key a longer one begins with: a lone ESC, or a CSI/SS3 sequence not yet complete.
_AMBIGUOUS_TAIL = re.compile(rb"\x1b(\[[0-?]*[ -/]*|O)?\Z")
_DIGITS = re.compile(r"\d+")
# A REPL's continuation prompt, shape only: node's and Python's ``...``, IPython's ``   ...:``, ptpython's.
_CONTINUATION = re.compile(r"\s*\.{3,}[:>]?")


def ambiguous(data: bytes) -> bool:
    """The input's last key is a prefix of longer keys: the program decides what it was only on a timeout."""
    return bool(_AMBIGUOUS_TAIL.search(data))


def prompt_shape(text: str) -> str:
    """A prompt with its counters masked (IPython's ``In [7]:``, a debugger's frame number), for comparison."""
    return _DIGITS.sub("0", text).rstrip()


def continuation(shape: str) -> bool:
    """The prompt (``prompt_shape``) asks for the next line of a block."""
    return bool(_CONTINUATION.fullmatch(shape))


def timer_armed(pid: int, epfd: int) -> bool:
    """A timerfd in the epoll instance's interest list is armed (``it_value`` in its fdinfo is not zero)."""
    for fd, _ in procfs.epoll_targets(pid, epfd):
        if procfs.fd_target(pid, fd) != "anon_inode:[timerfd]":
            continue
        try:
            lines = procfs.read_file(f"/proc/{pid}/fdinfo/{fd}").splitlines()
        except OSError:
            continue
        for line in lines:
            if line.startswith(b"it_value:"):
                digits = line.split(b":", 1)[1].strip(b" ()").split(b",")
                if any(part.strip() not in (b"0", b"") for part in digits):
                    return True
    return False


def running_child(pids: Iterable[int]) -> bool:
    """One of the processes has a live child (a command it started and awaits)."""
    for pid in pids:
        for child in procfs.children(pid):
            stat = procfs.read_stat(child)
            if stat is not None and stat.state not in ("Z", "X"):
                return True
    return False
