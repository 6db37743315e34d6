"""terminal_screenshot and `ptyctl screenshot`: real programs on a real daemon, drawn from the daemon's own
engine state, pixels checked.

A cell's box is the image's size over the screen's; a cell "is red" when a good share of its pixels are mostly
red (glyph strokes cover part of a cell), and the cursor cell is a block in the default foreground colour.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Daemon, Rpc, RpcError, Shell, wait_until

Image = pytest.importorskip("PIL.Image")

FOREGROUND = (0xE5, 0xE5, 0xE5)


def shot(shell: Shell, **params: Any) -> tuple[Any, dict[str, Any]]:
    result = shell.call("terminal_screenshot", **params)
    image = Image.open(io.BytesIO(base64.b64decode(result["png"])))
    assert image.format == "PNG"
    assert image.size == (result["width"], result["height"])
    return image.convert("RGB"), result


def ptyctl_shot(socket: Path, shell: Shell, out: Path) -> tuple[Any, dict[str, Any]]:
    """`ptyctl screenshot` with the agent's token, as a person or a CI job would save one."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTYD_")}
    argv = [sys.executable, "-m", "ptyd_client", "--socket", str(socket), "--token", shell.token, "--json"]
    done = subprocess.run(
        [*argv, "screenshot", shell.id, "-o", str(out)], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["path"] == str(out)
    with Image.open(out) as image:
        assert image.format == "PNG"
        assert image.size == (result["width"], result["height"])
        return image.convert("RGB"), result


def cell_pixels(image: Any, result: dict[str, Any], x: int, y: int) -> list[tuple[int, int, int]]:
    cw, ch = result["width"] // result["cols"], result["height"] // result["rows"]
    return [image.getpixel((px, py)) for py in range(y * ch, (y + 1) * ch) for px in range(x * cw, (x + 1) * cw)]


def share(pixels: list[tuple[int, int, int]], test: Any) -> float:
    return sum(1 for px in pixels if test(px)) / len(pixels)


def ink(pixels: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """The pixels of a glyph drawn on the default (black) background."""
    return [px for px in pixels if max(px) > 60]


def reddish(px: tuple[int, int, int]) -> bool:
    return px[0] > 2 * max(px[1], px[2]) + 20


def bluish(px: tuple[int, int, int]) -> bool:
    return px[2] > 2 * max(px[0], px[1]) - 10 and px[2] > max(px[0], px[1]) + 30


def find(lines: list[str], text: str) -> tuple[int, int]:
    for y, line in enumerate(lines):
        if text in line:
            return line.index(text), y
    raise AssertionError(f"{text!r} not on the screen: {lines}")


def assert_cursor_drawn(image: Any, result: dict[str, Any]) -> None:
    assert result["cursor_visible"]
    pixels = cell_pixels(image, result, result["cursor_x"], result["cursor_y"])
    assert share(pixels, lambda px: px == FOREGROUND) > 0.5, "the cursor cell is not a block"


def coloured_ls(shell: Shell, tmp_path: Path) -> None:
    for name in ("plain.txt", "archive.tar"):
        (tmp_path / name).write_text("x")
    (tmp_path / "subdir").mkdir()
    shell.send(f"cd {tmp_path} && LS_COLORS='*.tar=01;31:di=01;34' ls --color=always -1\n")


def test_a_red_ls_name_is_red_and_the_cursor_is_drawn(daemon: Daemon, shell: Shell, tmp_path: Path) -> None:
    coloured_ls(shell, tmp_path)
    lines = shell.call("terminal_screen")["lines"]
    image, result = ptyctl_shot(daemon.socket, shell, tmp_path / "ls.png")
    assert result["engine"] in ("ghostty", "pyte")
    x, y = find(lines, "archive.tar")
    red = [ink(cell_pixels(image, result, x + i, y)) for i in range(len("archive"))]
    assert all(px and share(px, reddish) > 0.8 for px in red), "archive.tar is not drawn red"
    px, py = find(lines, "plain.txt")
    plain = ink(cell_pixels(image, result, px, py))
    assert plain, "plain.txt is not drawn"
    assert share(plain, reddish) == 0, "plain.txt is drawn red"
    dx, dy = find(lines, "subdir")
    blue = ink(cell_pixels(image, result, dx, dy))
    assert blue, "the directory's name is not drawn"
    assert share(blue, bluish) > 0.8, "the directory is not blue"
    assert_cursor_drawn(image, result)
    assert (result["cursor_x"], result["cursor_y"]) == (2, lines.index("$"))


def test_a_bigger_font_makes_a_bigger_picture(shell: Shell) -> None:
    small, a = shot(shell, font_size=8)
    big, b = shot(shell, font_size=24)
    assert big.size[0] > 2 * small.size[0]
    assert (a["cols"], a["rows"]) == (b["cols"], b["rows"])


def test_vim_draws_its_tildes_in_colour_on_the_alternate_screen(daemon: Daemon, shell: Shell, tmp_path: Path) -> None:
    shell.send("vim -u NONE -N -c 'syntax on' -c 'hi NonText ctermfg=12'\n", timeout_ms=30_000)
    try:
        image, result = ptyctl_shot(daemon.socket, shell, tmp_path / "vim.png")
        assert result["alt_screen"]
        lines = shell.call("terminal_screen")["lines"]
        y = next(i for i, line in enumerate(lines) if line.startswith("~"))
        tilde = ink(cell_pixels(image, result, 0, y))
        assert tilde, "the tilde is not drawn"
        assert share(tilde, bluish) > 0.8, "the tilde is not blue"
        assert (result["cursor_x"], result["cursor_y"]) == (0, 0)
        assert_cursor_drawn(image, result)
    finally:
        shell.send("\x1b:qa!\r")


@pytest.mark.skipif(shutil.which("htop") is None, reason="htop is not installed")
def test_htop_draws_its_function_bar_on_cyan(daemon: Daemon, shell: Shell, tmp_path: Path) -> None:
    shell.send("htop\n", timeout_ms=30_000)
    try:
        wait_until(lambda: "F10" in "".join(shell.call("terminal_screen")["lines"]), message="htop's function bar")
        lines = shell.call("terminal_screen")["lines"]
        image, result = ptyctl_shot(daemon.socket, shell, tmp_path / "htop.png")
        x, y = find(lines, "Help")
        cells = [cell_pixels(image, result, x + i, y) for i in range(4)]
        assert all(share(px, lambda p: p[0] < 60 and p[1] > 150 and p[2] > 150) > 0.3 for px in cells)
    finally:
        shell.send("q")


@pytest.fixture(params=["pyte-daemon", "pyte-worker", "ghostty-daemon"])
def engine_shell(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shell]:
    """The other engines and placements: pyte in the daemon and in a worker, Ghostty in the daemon."""
    emulator, process = request.param.split("-")
    directory = tmp_path_factory.mktemp("ptyd-shot")
    d = Daemon(directory, f'emulator = "{emulator}"\nengine_process = "{process}"\n')
    d.start()
    try:
        with Rpc(d.socket) as rpc:
            token = rpc.call("agent_register", name="shot")["token"]
            yield Shell(rpc, token, env={"PS1": "$ "})
    finally:
        d.stop()


def test_every_engine_draws_the_same_colours(engine_shell: Shell, tmp_path: Path) -> None:
    coloured_ls(engine_shell, tmp_path)
    lines = engine_shell.call("terminal_screen")["lines"]
    image, result = shot(engine_shell)
    x, y = find(lines, "archive.tar")
    red = [ink(cell_pixels(image, result, x + i, y)) for i in range(len("archive"))]
    assert all(px and share(px, reddish) > 0.8 for px in red), "archive.tar is not drawn red"
    assert_cursor_drawn(image, result)


def test_a_screenshot_is_the_owners_alone(rpc: Rpc, shell: Shell) -> None:
    other = rpc.call("agent_register", name="other")["token"]
    with pytest.raises(RpcError) as err:
        rpc.call("terminal_screenshot", token=other, session_id=shell.id)
    assert err.value.kind == "session_not_found"


def test_the_bundled_font_draws_when_no_named_font_exists(tmp_path: Path) -> None:
    """The package's own DejaVu Sans Mono: a machine without font packages draws the same cells, in bold too."""
    from ptyd.terminal import raster

    font = raster.Fonts([str(tmp_path / "absent.ttf")], 14)
    assert font.path == raster.BUNDLED_FONT
    assert Path(raster.BUNDLED_FONT).with_name("LICENSE").read_text().count("Bitstream Vera") >= 2
    assert font.bold is not font.regular, "the bundled bold face is not loaded"
    # Box drawing and block elements are the bundled font's own glyphs, not its missing-glyph box.
    missing = bytes(font.regular.getmask("\U0010fffd"))
    for char in ("\u2588", "\u2500", "\u03bb", "\u0436"):
        assert bytes(font.regular.getmask(char)) != missing, f"the bundled font lacks {char!r}"


def test_a_daemon_with_default_fonts_draws_with_the_bundled_font(daemon: Daemon) -> None:
    """The default config names no font file: the cells are DejaVu Sans Mono's box, not Pillow's bitmap font."""
    from ptyd.config import Config
    from ptyd.terminal import raster

    assert Config().screenshot_fonts == ()
    bundled = raster.Fonts([], 14)
    with Rpc(daemon.socket) as rpc:
        token = rpc.call("agent_register", name="fonts")["token"]
        _, result = shot(Shell(rpc, token, env={"PS1": "$ "}), font_size=14)
    assert result["width"] == result["cols"] * bundled.width
    assert result["height"] == result["rows"] * bundled.height


UNIFONT = Path("/usr/share/fonts/opentype/unifont/unifont.otf")


@pytest.mark.skipif(not UNIFONT.exists(), reason="fonts-unifont is not installed")
def test_a_wide_character_fills_both_of_its_cells(shell: Shell) -> None:
    shell.send("printf '\\xe4\\xb8\\xad\\xe6\\x96\\x87:ok\\n'\n")
    lines = shell.call("terminal_screen")["lines"]
    image, result = shot(shell)
    y = next(i for i, line in enumerate(lines) if line.startswith("中文:ok"))
    # Each glyph spans two cells: both halves have ink, and the ":" after them is at column 4.
    for x in range(4):
        assert ink(cell_pixels(image, result, x, y)), f"cell {x} of the wide characters is blank"
    assert ink(cell_pixels(image, result, 4, y))


def test_a_screenshot_in_flight_when_its_session_closes_is_answered(daemon: Daemon, rpc: Rpc, token: str) -> None:
    # Seen: the worker's answer never came for a closed session, and the call hung (the dashboard's screen
    # reader with it). Now the close answers it with what the mirror has, or the session is already gone.
    with Rpc(daemon.socket, timeout=20) as other:
        for _ in range(10):
            shell = Shell(rpc, token, env={"PS1": "$ "})
            shell.send("echo about to close\n")
            asked = other.request("terminal_screenshot", {"token": token, "session_id": shell.id})
            shell.close()
            reply = other.recv()
            assert reply["id"] == asked
            assert "result" in reply or reply["error"]["data"]["kind"] == "session_not_found", reply


def test_without_pillow_a_screenshot_names_the_extra(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The core install (`make run`, `pip install ptyd`) has no Pillow: the daemon answers extra_missing naming the
    extra, and `ptyctl screenshot` says how to install it, without a traceback."""
    hidden = tmp_path_factory.mktemp("no-pillow")
    (hidden / "PIL").mkdir()
    (hidden / "PIL" / "__init__.py").write_text("raise ImportError('Pillow is hidden by the test')\n")
    monkeypatch.setenv("PYTHONPATH", str(hidden))
    d = Daemon(tmp_path_factory.mktemp("ptyd-no-pillow"))
    d.start()
    try:
        with Rpc(d.socket) as rpc:
            token = rpc.call("agent_register", name="no-pillow")["token"]
            shell = Shell(rpc, token, env={"PS1": "$ "})
            with pytest.raises(RpcError) as err:
                shell.call("terminal_screenshot")
            assert err.value.kind == "extra_missing"
            assert err.value.data["extra"] == "screenshot"
            assert "ptyd[screenshot]" in err.value.message
            env = {k: v for k, v in os.environ.items() if not k.startswith("PTYD_")}
            argv = [sys.executable, "-m", "ptyd_client", "--socket", str(d.socket), "--token", token]
            done = subprocess.run(
                [*argv, "screenshot", shell.id, "-o", str(hidden / "x.png")],
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
            )
            assert done.returncode != 0
            assert "ptyd[screenshot]" in done.stderr, done.stderr
            assert "Traceback" not in done.stderr
    finally:
        d.stop()
