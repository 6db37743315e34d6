"""`ptyctl replay --gif`: recordings exported as animated GIFs, drawn by ptyd's own engine and rasterizer; the
frames, their timing and their pixels checked."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, Daemon, Rpc, RpcError, Shell, _private_dir

Image = pytest.importorskip("PIL.Image")
CLIENT = ROOT / "clients" / "python"


def ptyctl(daemon: Daemon | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTYD_")}
    socket = ["--socket", str(daemon.socket)] if daemon is not None else []
    argv = [sys.executable, "-m", "ptyd_client", *socket, "--json", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, cwd=CLIENT)


def frames_of(path: Path) -> list[tuple[Any, int]]:
    """Every frame of the GIF as RGB, with how long it shows."""
    out = []
    with Image.open(path) as gif:
        assert gif.format == "GIF"
        for index in range(gif.n_frames):
            gif.seek(index)
            out.append((gif.convert("RGB"), int(gif.info["duration"])))
    return out


def red_share(image: Any, box: tuple[int, int, int, int]) -> float:
    raw = image.crop(box).tobytes()
    pixels = [tuple(raw[i : i + 3]) for i in range(0, len(raw), 3)]
    pixels = [px for px in pixels if max(px) > 60]
    return sum(1 for r, g, b in pixels if r > 2 * max(g, b) + 20) / max(len(pixels), 1)


def test_a_cast_file_becomes_frames_with_its_timing_and_colours(tmp_path: Path) -> None:
    cast = tmp_path / "demo.cast"
    events = [
        [0.0, "o", "$ "],
        [0.5, "o", "make\r\n"],
        [1.0, "o", "\x1b[31mFAILED\x1b[0m 1 test\r\n$ "],
        [1.01, "i", "ignored input\r"],
        [30.0, "o", "exit\r\n"],  # 29 s of waiting, cut to the idle limit
    ]
    lines = [json.dumps({"version": 2, "width": 40, "height": 6}), *(json.dumps(e) for e in events)]
    cast.write_text("\n".join(lines) + "\n")
    out = tmp_path / "demo.gif"
    done = ptyctl(None, "replay", str(cast), "--gif", str(out))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    frames = frames_of(out)
    assert result["frames"] == len(frames) == 4
    assert [ms for _, ms in frames] == [500, 500, 2000, 3000]  # idle limit 2 s, the end held 3 s (config)
    width, height = frames[0][0].size
    cell_w, cell_h = width // 40, height // 6
    failed = (0, cell_h, cell_w * 6, cell_h * 2)  # row 1: FAILED
    assert red_share(frames[1][0], failed) == 0, "FAILED is drawn before it was printed"
    assert red_share(frames[2][0], failed) > 0.8, "FAILED is not red"
    assert red_share(frames[3][0], failed) > 0.8


def test_a_flood_is_a_few_frames_a_second(tmp_path: Path) -> None:
    cast = tmp_path / "flood.cast"
    events = [[i / 100, "o", f"line {i}\r\n"] for i in range(300)]  # 3 s, a line every 10 ms
    cast.write_text("\n".join([json.dumps({"version": 2, "width": 20, "height": 4}), *map(json.dumps, events)]))
    out = tmp_path / "flood.gif"
    done = ptyctl(None, "replay", str(cast), "--gif", str(out))
    assert done.returncode == 0, done.stderr
    frames = frames_of(out)
    assert 25 <= len(frames) <= 32  # one per 100 ms (config's gif_frame_ms), not one per line
    assert sum(ms for _, ms in frames[:-1]) == 2990


@pytest.fixture(scope="module")
def recorder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    directory = _private_dir(tmp_path_factory, "ptyd-gif")
    d = Daemon(directory, f'recording_dir = "{directory / "recordings"}"\n')
    d.start()
    yield d
    d.stop()


def test_a_recorded_session_exports_by_its_id(recorder: Daemon, tmp_path: Path) -> None:
    with Rpc(recorder.socket) as rpc:
        token = rpc.call("agent_register", name="gif")["token"]
        shell = Shell(rpc, token, env={"PS1": "$ "}, record=True, cols=60, rows=8)
        try:
            shell.send("clear; printf '\\033[31m%s\\033[0m\\n' red-in-the-gif\n")
            assert shell.call("terminal_record", record=False)["recording"] is False
            out = tmp_path / "session.gif"
            done = ptyctl(recorder, "replay", shell.id, "--gif", str(out))
            assert done.returncode == 0, done.stderr
            last, _ = frames_of(out)[-1]
            screen = shell.call("terminal_screen")["lines"]
            y = next(i for i, line in enumerate(screen) if line == "red-in-the-gif")
            width, height = last.size
            cell_w, cell_h = width // 60, height // 8
            assert red_share(last, (0, y * cell_h, 14 * cell_w, (y + 1) * cell_h)) > 0.8
        finally:
            with contextlib.suppress(RpcError, OSError):
                shell.close()


def test_no_recording_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.cast"
    bad.write_text("not json\n")
    done = ptyctl(None, "replay", str(bad), "--gif", str(tmp_path / "x.gif"))
    assert done.returncode == 2
    assert "asciicast" in done.stderr
