"""procfs.signals_pending: what the tracker reads to tell a signal a program ignored from one it has yet to take."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from ptyd.backends.os import procfs

READY = "; print(flush=True); import time; time.sleep(30)"
BLOCKS_USR1 = "import signal; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})" + READY
IGNORES_USR1 = "import signal; signal.signal(signal.SIGUSR1, signal.SIG_IGN)" + READY


def _started(code: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.readline()  # the mask or the disposition is set
    return proc


def _pending_within(pid: int, seconds: float) -> bool | None:
    deadline = time.monotonic() + seconds
    value = procfs.signals_pending(pid)
    while value is not True and time.monotonic() < deadline:
        time.sleep(0.01)
        value = procfs.signals_pending(pid)
    return value


def test_a_blocked_signal_is_pending_and_an_ignored_one_is_dropped() -> None:
    blocked, ignored = _started(BLOCKS_USR1), _started(IGNORES_USR1)
    try:
        assert procfs.signals_pending(blocked.pid) is False
        blocked.send_signal(signal.SIGUSR1)
        ignored.send_signal(signal.SIGUSR1)
        assert _pending_within(blocked.pid, 5) is True
        assert procfs.signals_pending(ignored.pid) is False
    finally:
        for proc in (blocked, ignored):
            proc.kill()
            proc.wait()
            assert proc.stdout is not None
            proc.stdout.close()
    assert procfs.signals_pending(blocked.pid) is None  # gone
