"""procfs.busy_ns: what the short-poll rule reads to tell a program that computes between its polls from one that
only waits, on a loaded machine too (where a spinner gets a fraction of a CPU but is runnable all the time)."""

from __future__ import annotations

import subprocess
import sys
import time

from ptyd.backends.os import procfs

SPIN = "import os; os.sched_setaffinity(0, {0}); print(flush=True)\nwhile True: pass"


def _busy_and_cpu(pid: int) -> tuple[int, int]:
    busy = cpu = 0
    for tid in procfs.tasks(pid):
        with open(f"/proc/{pid}/task/{tid}/schedstat") as schedstat:
            cpu += int(schedstat.read().split()[0])
        busy += procfs.busy_ns(pid, tid) or 0
    return busy, cpu


def test_a_spinner_sharing_its_cpu_is_busy_all_the_time_and_a_sleeper_is_not() -> None:
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE) for _ in range(3)]
    sleeps = "print(flush=True); import time; time.sleep(30)"
    sleeper = subprocess.Popen([sys.executable, "-c", sleeps], stdout=subprocess.PIPE)
    try:
        for proc in (*spinners, sleeper):
            assert proc.stdout is not None
            proc.stdout.readline()  # pinned to CPU 0 (three of them: each runs a third of the time) and spinning
        pid = spinners[0].pid
        (busy0, cpu0), (idle0, _) = _busy_and_cpu(pid), _busy_and_cpu(sleeper.pid)
        start = time.monotonic()
        time.sleep(0.6)
        (busy1, cpu1), (idle1, _) = _busy_and_cpu(pid), _busy_and_cpu(sleeper.pid)
        wall = (time.monotonic() - start) * 1e9
        assert (cpu1 - cpu0) < 0.75 * wall  # it shares its CPU: on it a fraction of the time
        assert (busy1 - busy0) > 0.85 * wall  # ...and runnable the rest: busy
        assert (idle1 - idle0) < 0.05 * wall
    finally:
        for proc in (*spinners, sleeper):
            proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
