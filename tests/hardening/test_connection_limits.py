"""Connections as a resource: a burst of clients is queued, not refused; idle and hoarded connections cannot lock
the others out (ptyctl included).

Each crowd is a process of its own (``crowd_client.py``), so that several crowds are several peers, as several
clients would be.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import Daemon

pytestmark = pytest.mark.usefixtures("unharmed")

CROWD = Path(__file__).with_name("crowd_client.py")


class Crowd:
    """``count`` connections from a process of their own."""

    def __init__(self, daemon: Daemon, count: int, mode: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(CROWD), str(daemon.socket), str(count), mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def say(self, line: str = "\n") -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line)
        self.proc.stdin.flush()

    def hear(self) -> Any:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the crowd ended with {self.proc.wait()}"
        return json.loads(line)

    def end(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def test_500_simultaneous_connects_are_all_served(module_daemon: Daemon) -> None:
    # asyncio's own backlog (100) applied before: 16-42 of 500 saw EAGAIN. listen_backlog is 1,024.
    crowds = [Crowd(module_daemon, 125, "burst") for _ in range(4)]
    try:
        for crowd in crowds:
            assert crowd.hear() == {"ready": True}
        for crowd in crowds:
            crowd.say("go\n")
        results = [crowd.hear() for crowd in crowds]
    finally:
        for crowd in crowds:
            crowd.end()
    print(f"500 connects at once: {results}")
    assert sum(r["refused"] for r in results) == 0
    assert sum(r["served"] for r in results) == 500
