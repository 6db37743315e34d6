"""What used to block the event loop: the state file's encode and write (now a thread, one write at a time, the
newest state wins), and the keeper's sync (now non-blocking: a keeper that is behind gets the rest later)."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from pathlib import Path

from ptyd.backends.recording.writer import Ended
from ptyd.config import Config
from ptyd.continuity.adoption import StateSaver
from ptyd.continuity.document import STATE_FILE, DaemonState, StateFile, decode
from ptyd.continuity.keeper_link import Keeper
from ptyd.daemon import blocking
from ptyd.service.service import PtyService

from .conftest import run


class SlowStateFile(StateFile):
    """A state file whose writes take as long as the test says: a disk (or a big state) that is slow."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.gate = threading.Event()
        self.written: list[int] = []  # agents in each state written, in order

    def write(self, state: DaemonState) -> int:
        self.gate.wait(10)
        self.written.append(len(state.agents))
        return super().write(state)


def test_the_state_file_is_written_off_the_loop_newest_state_last(tmp_path: Path) -> None:
    async def main() -> tuple[float, list[int], int]:
        service = PtyService(Config(), {}, "none")
        state_file = SlowStateFile(tmp_path)
        saver = StateSaver(state_file, service, None, 1.0)  # in the foreground: every change is written
        service.register("agent-1")
        saver.changed()
        await asyncio.sleep(0.01)  # the first write starts, and is stuck
        started = time.monotonic()
        for n in range(2, 6):
            service.register(f"agent-{n}")
            saver.changed()  # returns at once though the write is stuck
        returned = time.monotonic() - started
        ticks = 0
        while not state_file.gate.is_set():  # the loop runs meanwhile
            await asyncio.sleep(0.001)
            ticks += 1
            if ticks == 20:
                state_file.gate.set()
        await saver.flush()
        return returned, state_file.written, ticks

    returned, written, ticks = run(main)
    assert returned < 0.5  # five changes while a write is stuck: none waited for it (it waits 10 s)
    assert ticks >= 20
    # The first write had started with one agent; the four changes behind it collapse into one write of the last.
    assert written == [1, 5]
    saved = decode((tmp_path / STATE_FILE).read_bytes(), binary=False)
    assert len(saved.agents) == 5


def test_the_keeper_sync_never_blocks_on_a_keeper_that_is_behind() -> None:
    daemon_side, keeper_side = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    daemon_side.settimeout(5.0)  # as Keeper connections are: blocking sends would wait this long
    keeper = Keeper(Path("/nonexistent"), 0, daemon_side)
    fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(2000)]
    try:
        masters = {f"pty-{i}": fd for i, fd in enumerate(fds)}
        started = time.monotonic()
        keeper.sync(masters)  # far more than the socket buffer holds: the keeper reads nothing yet
        took = time.monotonic() - started
        first = len(keeper.stored)
        assert took < 2.0
        assert 0 < first < len(masters)  # what fit was stored; the rest waits for the next sync
        while True:  # the keeper catches up
            try:
                _, ancillary, _, _ = keeper_side.recvmsg(256, socket.CMSG_SPACE(4), socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            for _, _, data in ancillary:  # the master the daemon passed: the keeper's copy
                os.close(int.from_bytes(data[:4], "little"))
            keeper.sync(masters)
            if keeper.stored == masters.keys():
                break
        assert keeper.stored == masters.keys()
        assert keeper.problem is None  # behind is not gone
    finally:
        for fd in fds:
            os.close(fd)
        daemon_side.close()
        keeper_side.close()


def test_blocking_work_runs_on_a_fixed_pool_started_whole() -> None:
    """A burst of blocking calls queues in the pool rather than starting threads the daemon keeps for good."""

    async def main() -> tuple[int, int, int]:
        loop = asyncio.get_running_loop()
        before = threading.active_count()
        blocking.install(loop)
        installed = threading.active_count()
        gate = threading.Event()
        burst = [asyncio.ensure_future(asyncio.to_thread(gate.wait, 10)) for _ in range(3 * blocking.BLOCKING_THREADS)]
        await asyncio.sleep(0)  # the calls reach the pool
        during = threading.active_count()
        gate.set()
        assert all(await asyncio.gather(*burst))
        return installed - before, during - before, threading.active_count() - before

    assert run(main) == (blocking.BLOCKING_THREADS,) * 3


def test_a_recordings_end_is_awaited_without_a_thread() -> None:
    """The writer thread sets it; the loop's waiters wake, and one that comes after returns at once."""

    async def main() -> tuple[int, bool]:
        ended = Ended()
        before = threading.active_count()
        waiter = asyncio.ensure_future(ended.wait())
        await asyncio.sleep(0)
        threads = threading.active_count() - before
        setter = threading.Thread(target=ended.set)
        setter.start()
        await asyncio.wait_for(waiter, 10)
        setter.join()
        await asyncio.wait_for(ended.wait(), 10)
        return threads, ended.is_set()

    assert run(main) == (0, True)
