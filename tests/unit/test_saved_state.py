"""The state file's sessions, taken again only when they changed (``continuity.handover.saved``), in-process:
what the saver writes reads as the full snapshot would, and a session that did nothing is not taken again."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import msgspec
import pytest

from ptyd import protocol as p
from ptyd.continuity import handover
from ptyd.continuity.document import StateFile

from .conftest import TOKEN, local_service, run, send_params


def _sessions(state: handover.DaemonState) -> dict[str, dict[str, object]]:
    return {sid: msgspec.structs.asdict(s) for sid, s in state.sessions.items()}


def _header(state: handover.DaemonState) -> dict[str, object]:
    """All but the sessions, and the agents' idle time (which moves between two calls)."""
    return msgspec.structs.asdict(state) | {"sessions": None, "agents": [a.agent_id for a in state.agents]}


def _last(state: handover.DaemonState, session_id: str) -> str | None:
    last = state.sessions[session_id].last
    return last.id if last is not None else None


def _screen(state: handover.DaemonState, session_id: str) -> bytes:
    terminal = state.sessions[session_id].terminal
    assert terminal is not None
    return terminal.screen + "\n".join(terminal.lines).encode()


def test_saved_state_reuses_what_did_not_change(tmp_path: Path) -> None:
    file = StateFile(tmp_path)

    def written_and_read(state: handover.DaemonState) -> handover.DaemonState:
        file.write(state)  # each session encoded on its own, as the saver's thread does
        back = file.read()
        assert back is not None
        return back

    async def main() -> dict[str, object]:
        async with local_service() as service:
            agent, _ = service.register("t")
            opened = [await service.open(agent, p.TerminalOpenParams(token=TOKEN, env={"PS1": "$ "})) for _ in range(3)]
            busy, idle, _ = (s.info(agent.agent_id, agent.name).session_id for s in opened)
            first, taken = await handover.saved(service, {})
            written = written_and_read(first)
            quiet, cache = await handover.saved(service, taken)  # nothing moved: now each state is kept
            full = handover.snapshot(service, None, "saved")

            await service.send(agent, send_params(busy, "echo moved\n")).result()
            second, cache2 = await handover.saved(service, cache)
            again = written_and_read(second)
            return {
                "first_as_full": _sessions(written) == _sessions(full),
                "header": _header(written) == _header(full),
                "kept_once_quiet": all(s.state is None for s in taken.values())
                and all(quiet.sessions[sid] is s.state for sid, s in cache.items()),
                "idle_reused": cache2[idle].state is cache[idle].state is second.sessions[idle],
                "busy_taken": second.sessions[busy] is not cache[busy].state and cache2[busy].state is None,
                "second_as_full": _sessions(again) == _sessions(handover.snapshot(service, None, "saved")),
                "moved_in_file": b"moved" in _screen(again, busy) and b"moved" not in _screen(written, busy),
                "last_op": _last(again, busy) != _last(written, busy) and _last(again, idle) == _last(written, idle),
            }

    seen = run(main)
    assert seen == {
        "first_as_full": True,
        "kept_once_quiet": True,
        "header": True,
        "idle_reused": True,
        "busy_taken": True,
        "second_as_full": True,
        "moved_in_file": True,
        "last_op": True,
    }


def test_state_file_streams_any_number_of_sessions(tmp_path: Path) -> None:
    """The file is written a session at a time; with none, one, or ids that need escaping it reads back whole."""
    file = StateFile(tmp_path)
    for state in (handover.DaemonState(daemon_pid=7, handovers=2), handover.DaemonState(daemon_pid=0)):
        file.write(state)
        assert file.read() == state
    json_text = file.path.read_text()
    assert json_text.endswith('"sessions":{}}')


def test_saving_and_reading_leave_the_transcripts_strings_as_they_were(tmp_path: Path) -> None:
    """Lines in any script read back as they were, and saving or reading them does not grow them: msgspec keeps a
    UTF-8 copy inside each non-ASCII str it encodes, which the saves made of every line of every scrollback."""
    sizes = [sys.getsizeof(line) for line in LINES]

    async def main() -> handover.DaemonState:
        async with local_service() as service:
            agent, _ = service.register("t")
            opened = await service.open(agent, p.TerminalOpenParams(token=TOKEN, env={"PS1": "$ "}))
            opened.terminal.scrollback.extend(LINES)  # as an engine appends what scrolled off  # type: ignore[attr-defined]
            sid = opened.info(agent.agent_id, agent.name).session_id
            page = await service.read(agent, p.TerminalReadParams(token=TOKEN, session_id=sid, start_line=0))
            assert [line for line in page.lines if line in LINES] == LINES
            msgspec.json.encode(page)  # as the reply is
            assert [sys.getsizeof(line) for line in LINES] == sizes
            state, _ = await handover.saved(service, {})
            return state

    state = run(main)
    (session,) = state.sessions.values()
    assert session.terminal is not None
    kept = [line for line in session.terminal.lines if line in LINES]
    assert kept == LINES
    assert all(a is b for a, b in zip(kept, LINES, strict=True))  # the scrollback's own strings
    file = StateFile(tmp_path)
    file.write(state)
    assert [sys.getsizeof(line) for line in LINES] == sizes
    back = file.read()
    assert back is not None
    assert back == state


LINES = [
    "plain ASCII",
    "caf\u00e9 \u2502 \u251c\u2500\u2500 box \u2588\u2588\u2591",
    "\u6f22\u5b57\u304b\u306a \U0001f600 \U0001d400" * 20,
    'quotes " and \\ and \t tab',
    "\x1b stays \u202e",
]


def test_a_large_save_leaves_its_memory_to_give_back() -> None:
    """A save copies every retained line and encodes it in the writer thread, whose arena kept those megabytes
    resident after they were freed (a full 4-byte scrollback: 6.8-7.0 MiB a session against a 4 + 1 MiB budget):
    one that wrote a megabyte or more is marked for the daemon's give-back once saves pause (a trim costs ~15 ms, so
    not after each save); a small one leaves nothing marked."""
    from ptyd.continuity import adoption

    class Written:
        def __init__(self) -> None:
            self.size = 0

        def write(self, state: handover.DaemonState) -> int:
            return self.size

    async def main() -> list[bool]:
        async with local_service() as service:
            file = Written()
            saver = adoption.StateSaver(file, service, None, 1.0)  # type: ignore[arg-type]
            marked = []
            for size in (1000, adoption.GIVE_BACK_SAVE_BYTES, 10):
                saver.large_saved = 0.0  # as the daemon's give-back leaves it
                file.size = size
                saver._write(handover.DaemonState(daemon_pid=1))
                await saver.flush()
                marked.append(saver.large_saved > 0)
            return marked

    assert run(main) == [False, True, False]


def test_a_save_taken_in_slices_lets_the_loop_run_and_leaves_out_what_closed() -> None:
    """Taking the states held the loop 9-48 ms beside 50 floods, every send behind it: taken in slices (here a
    session each), the loop runs between sessions; a session closed meanwhile, before or after its state was
    taken, is not in the state, and the rest reads as the state taken at once."""

    async def main() -> dict[str, object]:
        async with local_service() as service:
            agent, _ = service.register("t")
            opened = [await service.open(agent, p.TerminalOpenParams(token=TOKEN, env={"PS1": "$ "})) for _ in range(5)]
            ids = [s.info(agent.agent_id, agent.name).session_id for s in opened]
            turns: list[int] = []
            loop = asyncio.get_running_loop()
            for _ in range(4):
                loop.call_soon(lambda: turns.append(1))
            sliced, _ = await handover.saved(service, {}, 0.0)
            ran = len(turns)  # before anything else awaits

            taking = handover._take_saved(service, {})
            next(taking)  # the first session's state is taken
            for sid in (ids[0], ids[3]):  # one taken already, one not yet
                await service.close(agent, sid, None)
            while True:
                try:
                    next(taking)
                except StopIteration as done:
                    after_closes, cache = done.value
                    break
            whole, _ = await handover.saved(service, {})
            return {
                "loop_ran": ran,
                "all_five": sorted(sliced.sessions) == sorted(ids),
                "closed_left_out": sorted(after_closes.sessions) == sorted([ids[1], ids[2], ids[4]]) == sorted(cache),
                "as_whole": _sessions(after_closes) == _sessions(whole),
            }

    assert run(main) == {"loop_ran": 4, "all_five": True, "closed_left_out": True, "as_whole": True}


def test_a_take_that_fails_is_logged_and_the_next_tick_saves(monkeypatch: pytest.MonkeyPatch) -> None:
    """A take runs as a task of its own: an exception there (a bug in one session's state) must neither end the
    saver nor surface in the daemon's shutdown (``flush``); the next tick takes the states again."""
    from ptyd.continuity import adoption

    class Written:
        def __init__(self) -> None:
            self.states: list[handover.DaemonState] = []

        def write(self, state: handover.DaemonState) -> int:
            self.states.append(state)
            return 0

    class Store:
        stored: set[str] = set()

        def sync(self, masters: dict[str, int]) -> None:
            self.stored = set(masters)

    real = handover.saved
    calls = []

    async def failing_once(*args: object) -> tuple[handover.DaemonState, handover.SaveCache]:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a bug in a session's state")
        return await real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(handover, "saved", failing_once)

    async def main() -> tuple[int, int]:
        async with local_service() as service:
            agent, _ = service.register("t")
            opened = await service.open(agent, p.TerminalOpenParams(token=TOKEN, env={"PS1": "$ "}))
            file = Written()
            saver = adoption.StateSaver(file, service, Store(), 0.0)  # type: ignore[arg-type]
            saver.changed()  # the first take fails
            await saver.flush()
            failed = len(file.states)
            saver.tick()  # dirty still: taken again
            await saver.flush()
            assert opened.info(agent.agent_id, agent.name).session_id in file.states[-1].sessions
            return failed, len(file.states)

    assert run(main) == (0, 1)
