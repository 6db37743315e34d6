"""Logical lines (``join_wrapped``): rows the terminal soft-wrapped come back as the lines the program printed, from
the screen and from scrollback, on both engines (the suite runs with ``--emulator=pyte`` too)."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Daemon, Rpc, RpcError, Shell, wait_until
from ptyd.terminal.engines import native_available

# 400 characters, with a blank at the last column of the first row: a wrapped row's trailing blank is kept.
LONG = "x" * 159 + " " + "y" * 240
PRINT_LONG = "python3 -c \"print('x' * 159 + ' ' + 'y' * 240)\"\n"


@pytest.fixture
def wide(rpc: Rpc, token: str) -> Iterator[Shell]:
    s = Shell(rpc, token, env={"PS1": "$ "}, cols=160, rows=40)
    yield s
    with contextlib.suppress(RpcError, OSError):
        s.close()


def test_a_long_line_reads_back_whole_with_the_flag(wide: Shell) -> None:
    rows = wide.send(PRINT_LONG)["viewport"].splitlines()
    assert rows[1:4] == [LONG[:160].rstrip(), LONG[160:320], LONG[320:]]  # rows, as before
    joined = wide.send(PRINT_LONG, join_wrapped=True)
    assert joined["viewport"].splitlines()[1] == LONG
    page = wide.call("terminal_read", start_line=joined["lines"]["start_line"] + 1, max_lines=1, join_wrapped=True)
    assert page["lines"] == [LONG]
    assert page["next_line"] == page["start_line"] + 3  # the three rows it covers
    plain = wide.call("terminal_read", start_line=page["start_line"], max_lines=3)
    assert plain["lines"] == [LONG[:159], LONG[160:320], LONG[320:]]  # the transcript itself is unchanged


def test_logical_lines_survive_scrolling_into_scrollback_and_floods(wide: Shell) -> None:
    wide.send(PRINT_LONG)
    wide.send("seq 1 200\n")  # the long line is in scrollback now
    transcript = wide.call("terminal_read", start_line=0, max_lines=10_000, join_wrapped=True)["lines"]
    assert LONG in transcript
    # A flood of long lines: the engines' fast paths (and Ghostty's history) carry the flag too.
    flood = wide.send("for i in $(seq 1 3000); do printf '%0400d\\n' $i; done\n", timeout_ms=60_000)
    assert flood["wait_reason"] == "stdin_read"
    tail = wide.call("terminal_read", start_line=-300, max_lines=300, join_wrapped=True)["lines"]
    numbers = [line for line in tail if len(line) == 400]
    assert len(numbers) >= 90
    assert numbers[-1] == "3000".rjust(400, "0")
    assert all(line.isdigit() for line in numbers)


def test_a_page_ending_inside_a_line_reads_it_to_its_end(wide: Shell) -> None:
    result = wide.send(PRINT_LONG)
    first_row = result["lines"]["start_line"] + 1
    page = wide.call("terminal_read", start_line=first_row - 1, max_lines=2, join_wrapped=True)
    assert page["lines"][-1] == LONG
    assert page["next_line"] == first_row + 3


def test_background_output_comes_in_logical_lines(wide: Shell) -> None:
    wide.send(PRINT_LONG.rstrip("\n") + "; sleep 0.3; echo done\n", wait=False, join_wrapped=True)
    waited = wide.call("terminal_wait", timeout_ms=20_000)
    assert waited["done"]
    output = wide.call("terminal_output")["output"]
    assert LONG in output.splitlines()


def test_compact_and_logical_lines_together_number_the_markers_by_rows(wide: Shell) -> None:
    result = wide.send(
        "for i in $(seq 1 50); do printf '%0400d\\n' 7; done\n", join_wrapped=True, compact=True, max_bytes=4096
    )
    lines = result["viewport"].splitlines()
    assert lines[1] == "7".rjust(400, "0")
    start = result["lines"]["start_line"]
    # 50 logical lines of 3 rows each from row start+1: the marker names rows, which terminal_read takes.
    assert lines[2] == f"[... the line above 49 more times: lines {start + 4}-{start + 150} ...]"
    assert result["compacted"] == 49


def _worker_pids(daemon_pid: int) -> list[int]:
    kids = Path(f"/proc/{daemon_pid}/task/{daemon_pid}/children").read_text().split()
    out = []
    for kid in kids:
        with contextlib.suppress(OSError):
            if b"ptyd.terminal.workers.main" in Path(f"/proc/{kid}/cmdline").read_bytes():
                out.append(int(kid))
    return out


def _logical(shell: Shell) -> list[str]:
    return list(shell.call("terminal_read", start_line=0, max_lines=10_000, join_wrapped=True)["lines"])


@pytest.mark.parametrize("engine", ["ghostty", "pyte"] if native_available() else ["pyte"])
def test_a_worker_rendered_line_reads_back_whole_through_scrollback_and_a_killed_worker(
    fresh_daemon: Daemon, engine: str
) -> None:
    """The soft-wrap flags cross from the engine worker (whatever ``--engine-process`` the suite runs with): on
    the screen's mirror, into the daemon's scrollback, and through a worker's SIGKILL (its successor rebuilt from
    a snapshot and the journal, the line still on the screen, then scrolled off from the new worker)."""
    kept = [
        line
        for line in fresh_daemon.config_path.read_text().splitlines()
        if not line.startswith(("engine_process", "emulator"))
    ]
    fresh_daemon.config_path.write_text(
        "\n".join([f'emulator = "{engine}"', 'engine_process = "worker"', *kept]) + "\n"
    )
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        pid = rpc.call("daemon_info")["pid"]
        token = rpc.call("agent_register", name="wraps")["token"]
        wide = Shell(rpc, token, env={"PS1": "$ "}, cols=160, rows=40)
        assert wide.call("terminal_status")["engine"] == engine
        assert _worker_pids(pid)
        joined = wide.send(PRINT_LONG, join_wrapped=True)
        assert joined["viewport"].splitlines()[1] == LONG
        page = wide.call("terminal_read", start_line=joined["lines"]["start_line"] + 1, max_lines=1, join_wrapped=True)
        assert (page["lines"], page["next_line"]) == ([LONG], page["start_line"] + 3)
        wide.send("seq 1 100\n")  # the line is in the daemon's scrollback now, with its flags
        assert wide.call("terminal_status")["total_lines"] > 100
        assert _logical(wide).count(LONG) == 1
        wide.send(PRINT_LONG)  # a second one, on the screen when the worker dies
        for worker in _worker_pids(pid):
            os.kill(worker, signal.SIGKILL)
        wait_until(lambda: "died (SIGKILL)" in fresh_daemon.log(), timeout=20)
        assert wide.send("echo after\n")["viewport"].splitlines()[-2:] == ["after", "$"]
        assert _logical(wide).count(LONG) == 2
        wide.send("seq 1 100\n")  # ...and scrolled off from the new worker's engine
        assert _logical(wide).count(LONG) == 2
        tail = wide.send(PRINT_LONG, join_wrapped=True)["viewport"].splitlines()
        assert tail[-2:] == [LONG, "$"]
        assert rpc.call("daemon_info")["pid"] == pid
