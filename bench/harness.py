"""What every scenario shares: a real daemon in a private directory, process accounting, and summary statistics.

The daemon is started the way tests/conftest.py starts it (``python -m ptyd --socket DIR/ptyd.sock --config
DIR/config.toml`` in a 0700 directory, ``PTYD_*`` variables removed), optionally under cProfile.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, final

from bench.client import Caller, connect

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "[\\#]bench$ "  # PS1 of every shell in the bench: the command number makes each prompt distinct
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
T = TypeVar("T")


@contextlib.contextmanager
def private_dir(prefix: str = "ptyd-bench-") -> Iterator[Path]:
    """A fresh 0700 directory (the daemon refuses world-writable ones), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as name:
        path = Path(name)
        path.chmod(0o700)
        yield path


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (not its children), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def engine_workers(pid: int) -> list[int]:
    """The engine worker processes of daemon ``pid`` (``engine_process = "worker"``)."""
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    out = []
    for kid in kids:
        try:
            if b"ptyd.terminal.workers.main" in Path(f"/proc/{kid}/cmdline").read_bytes():
                out.append(int(kid))
        except OSError:
            continue
    return out


def settle_workers(pid: int, timeout: float = 30.0) -> None:
    """Wait until daemon ``pid``'s engine workers (and the spare it starts once one is up) have started and are
    idle: a figure measured meanwhile counts their start (~1 s of CPU each) in its CPU and runs on fewer cores.
    Idle: the same workers, and no CPU spent by any, over two polls a quarter second apart."""
    deadline = time.monotonic() + timeout
    seen: list[tuple[list[int], float]] = []
    while time.monotonic() < deadline:
        workers = engine_workers(pid)
        spent = 0.0
        for worker in workers:
            with contextlib.suppress(OSError):
                spent += cpu_seconds(worker)
        seen = [*seen[-1:], (workers, spent)]
        if workers and len(seen) == 2 and seen[0] == seen[1]:
            return
        time.sleep(0.25)


def with_workers(measure: Callable[[int], float], pid: int) -> float:
    """``measure`` of the daemon plus its engine workers (CPU seconds, RSS): what the daemon costs in all."""
    total = measure(pid)
    for worker in engine_workers(pid):
        with contextlib.suppress(OSError):
            total += measure(worker)
    return total


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` alone (its children are other processes)."""
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE


@final
class DaemonProcess:
    """A ptyd daemon of the bench's own: start, connect, account, stop."""

    def __init__(self, directory: Path, config: str = "", profile: Path | None = None) -> None:
        self.directory = directory
        self.socket = directory / "ptyd.sock"
        self.config_path = directory / "config.toml"
        # Unsandboxed unless a scenario says otherwise, as the tools compared against are; the sandbox's own cost
        # is measured by the scale scenario, sandboxed and not in one daemon.
        self.config_path.write_text(config if "sandbox_default" in config else f'sandbox_default = "none"\n{config}')
        self.log_path = directory / "daemon.log"
        self.profile = profile
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, *, settle: bool = True) -> None:
        """Start the daemon and wait until it answers and (``settle``) its engine workers are up and idle."""
        args = ["--socket", str(self.socket), "--config", str(self.config_path)]
        if self.profile is not None:
            argv = [sys.executable, str(ROOT / "bench" / "profile_daemon.py"), str(self.profile), *args]
        else:
            argv = [sys.executable, "-m", "ptyd", *args]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=log,
                cwd=ROOT,
                env={k: v for k, v in os.environ.items() if not k.startswith("PTYD_")},
            )
        deadline = time.monotonic() + 20
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited with {self.proc.returncode}:\n{self.log()}")
            try:
                caller = connect(self.socket)
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"daemon did not start:\n{self.log()}") from None
                time.sleep(0.02)
                continue
            caller.call("daemon_info")
            caller.close()
            if settle and 'engine_process = "daemon"' not in self.config_path.read_text():
                settle_workers(self.pid)
            return

    def connect(self) -> Caller:
        return connect(self.socket)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM: the daemon closes every session and exits (writing its profile, under ``--profile``)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def __enter__(self) -> DaemonProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(samples: Sequence[float]) -> dict[str, Any]:
    """Median, p95 and p99 of ``samples`` (seconds or any unit), with their count."""
    return {
        "n": len(samples),
        "median": percentile(samples, 50),
        "p95": percentile(samples, 95),
        "p99": percentile(samples, 99),
    }


def register(caller: Caller, name: str) -> str:
    token: str = caller.call("agent_register", name=name)["token"]
    return token


def shell_env(**extra: str) -> dict[str, str]:
    """The environment every benchmarked shell gets: the same prompt, no history file."""
    return {"PS1": PROMPT, "HISTFILE": "/dev/null", **extra}


@dataclass
class Context:
    """What a scenario gets: the run's private directory, the shared daemon, and how long to make it."""

    directory: Path
    daemon: DaemonProcess
    quick: bool
    python: str  # the interpreter the benchmarked programs run (the system python3)
    profile_dir: Path | None = None  # run the scenario's own daemons under cProfile, writing here
    # A daemon with its engine in its own process (``engine_process = "daemon"``), beside the shared one (engine
    # workers, the default): figures 3 and 3b show both.
    in_daemon: DaemonProcess | None = None


def rotated(items: Sequence[T], i: int) -> list[T]:
    """``items`` starting at position ``i``: alternate which subject goes first in each iteration."""
    k = i % len(items)
    return [*items[k:], *items[:k]]
