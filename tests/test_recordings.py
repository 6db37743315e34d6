"""Recordings: asciicast v2 files that the stock asciinema plays back to the screen the daemon showed, with no
password typed at an echo-off prompt in them, bounded by rotation, private to the user."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Daemon, Rpc, RpcError, Shell, _private_dir, wait_until

ASCIINEMA = shutil.which("asciinema")
needs_asciinema = pytest.mark.skipif(ASCIINEMA is None, reason="asciinema is not installed (.ci/run installs it)")


@pytest.fixture(scope="module")
def recorder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    directory = _private_dir(tmp_path_factory, "ptyd-rec")
    d = Daemon(directory, f'recording_dir = "{directory / "recordings"}"\nrecord_agents = ["always-recorded"]\n')
    d.start()
    yield d
    assert d.stop() == 0, d.log()


@pytest.fixture
def rec_rpc(recorder: Daemon) -> Iterator[Rpc]:
    with recorder.rpc() as r:
        yield r


@pytest.fixture
def agent(rec_rpc: Rpc) -> Iterator[str]:
    token: str = rec_rpc.call("agent_register", name="test")["token"]
    yield token
    with contextlib.suppress(RpcError, OSError):
        rec_rpc.call("agent_release", token=token)


def events(path: Path) -> tuple[dict[str, Any], list[list[Any]]]:
    lines = path.read_text().splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


def parts_of(rpc: Rpc, token: str, session_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = rpc.call("terminal_recordings", token=token)["recordings"]
    return [r for r in found if r["session_id"] == session_id]


def wait_exited(shell: Shell, timeout: float = 60.0) -> None:
    wait_until(lambda: shell.call("terminal_status")["status"]["kind"] == "exited", timeout, "the program's exit")


def asciinema_screen(rpc: Rpc, token: str, path: Path) -> list[str]:
    """The screen the stock ``asciinema play`` leaves on a terminal of the recording's size, rendered by ptyd."""
    header, _ = events(path)
    player = Shell(
        rpc,
        token,
        type="exec",
        argv=[str(ASCIINEMA), "play", "-s", "100", str(path)],
        cols=header["width"],
        rows=header["height"],
        env={"HOME": str(path.parent.parent)},  # no asciinema config of the user's, none in the recordings
    )
    try:
        wait_exited(player)
        status = player.call("terminal_status")["status"]
        assert status["exit_code"] == 0, player.call("terminal_screen")
        lines: list[str] = player.call("terminal_screen")["lines"]
        return lines
    finally:
        player.close()


def recorded_session(rpc: Rpc, token: str, **params: Any) -> Shell:
    return Shell(rpc, token, env={"PS1": "$ "}, record=True, cols=100, rows=30, **params)


def stop_and_screen(shell: Shell) -> tuple[Path, list[str]]:
    """Stop the recording and read the daemon's screen at that moment (the program has gone quiet)."""
    path = Path(shell.call("terminal_record", record=True)["path"])
    assert shell.call("terminal_record", record=False)["recording"] is False
    screen: list[str] = shell.call("terminal_screen")["lines"]
    return path, screen


def build(shell: Shell, tmp_path: Path) -> None:
    src = tmp_path / "pkg"
    src.mkdir()
    for n in range(40):
        (src / f"mod{n}.py").write_text(f"VALUE = {n}\n")
    result = shell.send(f"{sys.executable} -m compileall -f {src}\n", timeout_ms=60_000)
    assert result["wait_reason"] == "stdin_read"
    assert "Compiling" in result["viewport"]


def vim(shell: Shell, tmp_path: Path) -> None:
    if shutil.which("vim") is None:
        pytest.skip("vim is not installed")
    result = shell.send(f"HOME={tmp_path} vim {tmp_path / 'notes.txt'}\n", idle_ms=10_000)
    assert result["alt_screen"] is True
    shell.send("iRecorded in vim: ünïcode ✓ and 漢字\x1b", idle_ms=2_000)
    result = shell.send(":set number\n", idle_ms=2_000)
    assert "Recorded in vim" in result["viewport"]


def htop(shell: Shell, tmp_path: Path) -> None:
    if shutil.which("htop") is None:
        pytest.skip("htop is not installed")
    # -d 600: a refresh a minute, so the screen holds still between the stop and the daemon's screen read.
    result = shell.send(f"HOME={tmp_path} htop -d 600\n", timeout_ms=15_000)
    assert result["alt_screen"] is True
    result = shell.send("", keys=["F5"], timeout_ms=15_000)  # the tree view: a redraw of the whole list


@needs_asciinema
@pytest.mark.parametrize("program", [build, vim, htop], ids=["build", "vim", "htop"])
def test_asciinema_plays_a_recording_to_the_daemons_own_final_screen(
    rec_rpc: Rpc, agent: str, tmp_path: Path, program: Any
) -> None:
    shell = recorded_session(rec_rpc, agent)
    try:
        program(shell, tmp_path)
        path, screen = stop_and_screen(shell)
    finally:
        shell.close()
    header, evts = events(path)
    assert (header["width"], header["height"]) == (100, 30)
    assert {kind for _, kind, _ in evts} >= {"o", "i"}
    assert asciinema_screen(rec_rpc, agent, path) == screen


@needs_asciinema
def test_asciinema_cat_reads_a_recording_with_resizes_and_split_characters(rec_rpc: Rpc, agent: str) -> None:
    shell = recorded_session(rec_rpc, agent)
    try:
        # Characters of 2, 3 and 4 bytes written a byte at a time: reads may split them; the file has them whole.
        shell.send(r"printf 'é\n漢\n😀\n' | while IFS= read -r -n1 c; do printf %s \"$c\"; done; echo" "\n")
        shell.call("terminal_resize", cols=90, rows=25)
        shell.send("echo after resize\n")
        path, _ = stop_and_screen(shell)
    finally:
        shell.close()
    _, evts = events(path)
    output = "".join(data for _, kind, data in evts if kind == "o")
    assert "é" in output
    assert "漢" in output
    assert "😀" in output
    assert "\ufffd" not in output
    assert [data for _, kind, data in evts if kind == "r"] == ["90x25"]
    times = [t for t, _, _ in evts]
    assert times == sorted(times)
    cat = Shell(
        rec_rpc, agent, type="exec", argv=[str(ASCIINEMA), "cat", str(path)], env={"HOME": str(path.parent.parent)}
    )
    try:
        wait_exited(cat)
        assert cat.call("terminal_status")["status"]["exit_code"] == 0
        assert "after resize" in "\n".join(cat.transcript())
    finally:
        cat.close()


def test_a_password_typed_at_a_read_s_prompt_is_not_in_the_file(rec_rpc: Rpc, agent: str) -> None:
    shell = recorded_session(rec_rpc, agent)
    secret = "hunter2-correct-horse"
    try:
        result = shell.send("read -s -p 'Password: ' pw; echo; echo \"got ${#pw} characters\"\n")
        assert result["password_prompt"] is True
        result = shell.send(secret + "\n")
        assert f"got {len(secret)} characters" in result["viewport"]
        shell.send("echo typed in the open\n")
        path, _ = stop_and_screen(shell)
    finally:
        shell.close()
    text = path.read_text()
    assert secret not in text
    _, evts = events(path)
    inputs = [data for _, kind, data in evts if kind == "i"]
    assert "[secret]" in inputs
    assert "echo typed in the open\n" in inputs


def test_shell_integration_marks_and_key_do_not_reach_the_file(rec_rpc: Rpc, agent: str) -> None:
    shell = recorded_session(rec_rpc, agent)
    try:
        assert shell.send("false\n")["exit_code"] == 1  # the marks are there, and were read
        # terminal_integrate types a line with the session's key, and the shell echoes it.
        assert shell.call("terminal_integrate")["wait_reason"] == "stdin_read"
        assert shell.send("false\n")["exit_code"] == 1
        path, _ = stop_and_screen(shell)
    finally:
        shell.close()
    text = path.read_text()
    assert re.search(r"__ptyd_key=[0-9a-f]{16}", text) is None
    assert "__ptyd_key=[ptyd key]" in text
    inputs = [d for _, k, d in events(path)[1] if k == "i"]
    assert any("__ptyd_key=[ptyd key]" in d for d in inputs)


def test_shell_integration_marks_do_not_reach_the_file(rec_rpc: Rpc, agent: str) -> None:
    shell = recorded_session(rec_rpc, agent)
    try:
        assert shell.send("false\n")["exit_code"] == 1  # the marks are there, and were read
        path, _ = stop_and_screen(shell)
    finally:
        shell.close()
    assert "\x1b]" not in "".join(d for _, k, d in events(path)[1] if k == "o").replace("\x1b]0;", "")
    assert "ptyd" not in path.read_text().split("\n", 1)[1].lower()


def test_config_records_an_agent_by_name_whatever_it_asks(rec_rpc: Rpc, recorder: Daemon) -> None:
    token = rec_rpc.call("agent_register", name="always-recorded")["token"]
    other = rec_rpc.call("agent_register", name="other")["token"]
    try:
        recorded = Shell(rec_rpc, token)
        assert recorded.call("terminal_status")["recording"] is True
        # The config is the operator's: the agent cannot open unrecorded, nor stop the recording.
        refused = Shell(rec_rpc, token, record=False)
        assert refused.call("terminal_status")["recording"] is True
        with pytest.raises(RpcError) as stopping:
            refused.call("terminal_record", record=False)
        assert stopping.value.data["reason"] == "recording_required"
        assert refused.call("terminal_status")["recording"] is True
        plain = Shell(rec_rpc, other)
        assert plain.call("terminal_status")["recording"] is False
        # Another agent sees none of this agent's recordings; the operator would see them all.
        assert parts_of(rec_rpc, other, recorded.id) == []
        assert [r["session_id"] for r in parts_of(rec_rpc, token, recorded.id)] == [recorded.id]
        assert [r["session_id"] for r in parts_of(rec_rpc, token, refused.id)] == [refused.id]
        operator = (recorder.socket.parent / "operator.token").read_text().strip()
        assert [r["session_id"] for r in parts_of(rec_rpc, operator, recorded.id)] == [recorded.id]
        stopped = rec_rpc.call("terminal_record", token=operator, session_id=refused.id, record=False)
        assert stopped["recording"] is False
    finally:
        rec_rpc.call("agent_release", token=token)
        rec_rpc.call("agent_release", token=other)


def test_terminal_record_starts_and_stops_a_live_session(rec_rpc: Rpc, agent: str, recorder: Daemon) -> None:
    shell = Shell(rec_rpc, agent, env={"PS1": "$ "})
    try:
        shell.send("echo before\n")
        started = shell.call("terminal_record")
        assert started["recording"] is True
        assert shell.call("terminal_record")["path"] == started["path"]  # a no-op while recording
        shell.send("echo during\n")
        assert shell.call("terminal_record", record=False) == {
            "session_id": shell.id,
            "recording": False,
            "path": None,
        }
        shell.send("echo after\n")
        (part,) = parts_of(rec_rpc, agent, shell.id)
        assert part["active"] is False
        assert part["part"] == 1
        again = shell.call("terminal_record")
        assert again["path"].endswith(".0002.cast")
        # The writer thread creates the file a moment later.
        wait_until(lambda: [r["active"] for r in parts_of(rec_rpc, agent, shell.id)] == [False, True])
    finally:
        shell.close()
    text = Path(started["path"]).read_text()
    assert "during" in text
    assert "before" not in text
    assert "after" not in text
    directory = Path(started["path"]).parent
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    for path in directory.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_flood_rotates_into_bounded_parts(fresh_daemon: Daemon, tmp_path: Path) -> None:
    fresh_daemon.config_path.write_text(
        fresh_daemon.config_path.read_text()
        + f'recording_dir = "{tmp_path}"\nrecording_max_file_bytes = 65536\nrecording_files_kept = 3\n'
    )
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register", name="flood")["token"]
        shell = Shell(rpc, token, env={"PS1": "$ "}, record=True)
        result = shell.send("seq 1 200000; echo flood-done\n", timeout_ms=60_000)
        assert result["wait_reason"] == "stdin_read"
        shell.close()
        found = parts_of(rpc, token, shell.id)
    assert len(found) == 3
    numbers = [r["part"] for r in found]
    assert numbers == list(range(numbers[0], numbers[0] + 3))
    assert numbers[0] > 1
    for r in found:
        # Cut at the first event past the bound: a part holds one read's worth (64 KiB, JSON-escaped) more at most.
        assert r["bytes"] < 65536 + 8 * 65536
        header, evts = events(Path(r["path"]))
        assert header["version"] == 2
        assert evts
    # The output the kept parts hold, read by read: a read may end inside the marker, and a cut may follow it.
    output = "".join(e[2] for r in found for e in events(Path(r["path"]))[1] if e[1] == "o")
    assert "flood-done" in output
    assert len(list(tmp_path.iterdir())) == 3


def test_a_full_queue_drops_events_with_a_marker_and_never_blocks(tmp_path: Path) -> None:
    from ptyd.backends.recording.recorder import Recording
    from ptyd.backends.recording.writer import Header, RecordingWriter

    writer = RecordingWriter(max_pending=65536)
    header = Header(cols=80, rows=24, title="t", env={}, session_id="pty-x")
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1.0)  # the writer thread waits for the GIL: the queue fills while this loop runs
    try:
        recording = Recording(writer, tmp_path / "pty-x", header, 1 << 30, 1)
        began = time.monotonic()
        for n in range(1000):
            recording.output(b"%04d" % n + b"x" * 1020)
        spent = time.monotonic() - began
    finally:
        sys.setswitchinterval(previous)
    wait_until(lambda: writer.pending == 0, message="the writer to catch up")
    recording.output(b"the end")
    recording.close()
    writer.close()
    assert spent < 0.5  # 1000 submits took no disk wait
    (path,) = tmp_path.iterdir()
    _, evts = events(path)
    markers = [d for _, k, d in evts if k == "m"]
    assert markers
    assert "events dropped" in markers[0]
    kept = [d for _, k, d in evts if k == "o"]
    assert 0 < len(kept) < 1001
    assert kept[-1] == "the end"


def ptyctl(recorder: Daemon, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTYD_")}
    return subprocess.run(
        [sys.executable, "-m", "ptyd_client", "--socket", str(recorder.socket), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_ptyctl_records_lists_and_replays(rec_rpc: Rpc, agent: str, recorder: Daemon) -> None:
    shell = Shell(rec_rpc, agent, name="by-ptyctl", env={"PS1": "$ "}, cols=70, rows=10)
    try:
        done = ptyctl(recorder, "record", "by-ptyctl")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"recording {shell.id} to ")
        (row,) = [line for line in ptyctl(recorder, "ls").stdout.splitlines() if line.startswith(shell.id)]
        assert "running rec" in row
        # What the screen showed before the start is not in the file: clear it, so the replay can match.
        shell.send("clear; echo replayed by ptyctl\n")
        stopped = ptyctl(recorder, "--json", "record", "by-ptyctl", "--stop")
        assert json.loads(stopped.stdout)["recording"] is False
        screen = shell.call("terminal_screen")["lines"]
        listed = ptyctl(recorder, "recordings")
        assert shell.id in listed.stdout
        assert listed.stdout.splitlines()[0].split()[:3] == ["SESSION", "PART", "BYTES"]
        # Into a pipe: the output events as they were, so the text is there.
        piped = ptyctl(recorder, "replay", shell.id[:12], "--speed", "100")
        assert piped.returncode == 0, piped.stderr
        assert "replayed by ptyctl" in piped.stdout
        assert ptyctl(recorder, "replay", "no-such-thing").returncode == 2
        # In a terminal of the recorded size: the same screen as the daemon's when the recording stopped.
        (part,) = parts_of(rec_rpc, agent, shell.id)
        player = Shell(
            rec_rpc,
            agent,
            type="exec",
            argv=[sys.executable, "-m", "ptyd_client", "replay", part["path"], "--speed", "100"],
            cols=70,
            rows=10,
            env={"PYTHONPATH": str(Path(__file__).resolve().parent.parent / "clients" / "python")},
        )
        wait_exited(player)
        lines = player.call("terminal_screen")["lines"]
        player.close()
        assert lines[: len(screen)] == screen
    finally:
        shell.close()


def test_ptyctl_replay_stops_on_ctrl_c(rec_rpc: Rpc, agent: str, tmp_path: Path) -> None:
    cast = tmp_path / "slow.cast"
    header = {"version": 2, "width": 40, "height": 5, "timestamp": 0, "title": "slow", "env": {}}
    cast.write_text(json.dumps(header) + "\n" + '[0.0, "o", "first\\r\\n"]\n[600.0, "o", "ten minutes later"]\n')
    player = Shell(
        rec_rpc,
        agent,
        argv=["/bin/bash", "--noprofile", "--norc"],
        env={"PS1": "$ ", "PYTHONPATH": str(Path(__file__).resolve().parent.parent / "clients" / "python")},
    )
    try:
        player.send(f"{sys.executable} -m ptyd_client replay {cast}\n", wait=False)
        wait_until(lambda: "first" in "\n".join(player.call("terminal_screen")["lines"]), message="the first event")
        player.call("terminal_signal", signal="SIGINT")  # what Ctrl-C in that terminal sends
        result = player.call("terminal_wait", timeout_ms=20_000)["result"]
        assert result["wait_reason"] == "stdin_read"
        assert "ptyctl: stopped" in result["viewport"]
        assert "ten minutes later" not in result["viewport"]
    finally:
        player.close()


def test_the_key_is_redacted_when_reads_cut_it() -> None:
    from ptyd.backends.recording.writer import FileState, Header, _redact

    state = FileState(prefix=Path("/nowhere"), header=Header(1, 1, "", {}, ""), max_bytes=1, keep=1)
    state.secret = b"abcdef0123"
    chunks = (b"xx key=abc", b"def01", b"23 and ab", b"c done ", b"abcdef0123abcdef0123")
    out = b"".join(_redact(state, chunk) for chunk in chunks) + state.carry
    assert out == b"xx key=[ptyd key] and abc done [ptyd key][ptyd key]"


def test_a_directory_that_cannot_be_made_is_a_typed_error_and_costs_no_open(
    fresh_daemon: Daemon, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    fresh_daemon.config_path.write_text(
        fresh_daemon.config_path.read_text() + f'recording_dir = "{blocker / "recordings"}"\nrecord_agents = ["*"]\n'
    )
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register", name="any")["token"]
        with pytest.raises(RpcError) as asked:
            rpc.call("terminal_open", token=token, record=True)
        assert asked.value.code == -32602
        assert asked.value.data["reason"] == "recording_dir"
        assert "Not a directory" in asked.value.message
        # The config's wish alone: the session opens, unrecorded, and says so.
        shell = Shell(rpc, token, env={"PS1": "$ "})
        assert shell.call("terminal_status")["recording"] is False
        assert shell.send("echo still works\n")["wait_reason"] == "stdin_read"
        with pytest.raises(RpcError) as started:
            shell.call("terminal_record")
        assert started.value.data["reason"] == "recording_dir"
        assert rpc.call("terminal_list", token=token)["sessions"][0]["session_id"] == shell.id
