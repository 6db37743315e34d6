"""``ptyd web`` in a real browser (headless Chromium over the DevTools Protocol): the session list, a live screen
that follows what a session prints, the replay of a recording; and the server's refusals: a missing or wrong
token, another user's process, another site's Host, an address other than loopback."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import secrets
import shutil
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, Daemon, Rpc, Shell, _private_dir, hand_over, wait_until

from .cdp import CHROMIUM, Browser

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)")


@pytest.fixture(scope="module")
def web_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    directory = _private_dir(tmp_path_factory, "ptyd-web")
    d = Daemon(directory, f'recording_dir = "{directory / "recordings"}"\n')
    d.start()
    yield d
    assert d.stop() == 0, d.log()


class Web:
    def __init__(self, daemon: Daemon, listen: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ptyd", "web", "--socket", str(daemon.socket), "--listen", listen],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            text=True,
        )
        assert self.proc.stdout is not None
        self.banner = self.proc.stdout.readline()
        assert self.banner.startswith("ptyd web: "), self.banner + self.proc.stdout.read()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/\?token=(\S+)", self.banner)
        self.url = found.group(0) if found else ""
        self.port = int(found.group(1)) if found else 0
        self.token = found.group(2) if found else self.banner.rsplit(" ", 1)[1].strip()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        assert self.proc.stdout is not None
        self.proc.stdout.close()


@pytest.fixture(scope="module")
def web(web_daemon: Daemon) -> Iterator[Web]:
    server = Web(web_daemon, "127.0.0.1:0")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (.ci/run installs it)")
    with Browser(tmp_path_factory.mktemp("chromium") / "profile") as b:
        yield b


@pytest.fixture
def agent(web_daemon: Daemon) -> Iterator[tuple[Rpc, str]]:
    with web_daemon.rpc() as rpc:
        token = rpc.call("agent_register", name="dashboard-agent")["token"]
        yield rpc, token
        with contextlib.suppress(Exception):
            rpc.call("agent_release", token=token)


class Answer:
    def __init__(self, connection: http.client.HTTPConnection, path: str, headers: dict[str, str]) -> None:
        try:
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
            self.status = response.status
            self.headers = {k.lower(): v for k, v in response.getheaders()}
            response.close()
        finally:
            connection.close()

    def getheader(self, name: str) -> str | None:
        return self.headers.get(name.lower())


def get(port: int, path: str, headers: dict[str, str] | None = None) -> Answer:
    # The event stream is endless: only its status and headers are read.
    return Answer(http.client.HTTPConnection("127.0.0.1", port, timeout=30), path, headers or {})


def card_text(name: str) -> str:
    """JavaScript: the text of the live screen of the session called ``name`` (empty while there is none)."""
    return (
        "[...document.querySelectorAll('#screens .card')]"
        f".filter(c => c.querySelector('h2').textContent.startsWith({name!r}))"
        ".map(c => c.querySelector('pre').textContent).join('')"
    )


@needs_chromium
def test_the_page_lists_sessions_and_follows_a_live_screen(
    web: Web, browser: Browser, agent: tuple[Rpc, str], tmp_path: Path
) -> None:
    rpc, token = agent
    shell = Shell(rpc, token, name="web-demo", env={"PS1": "$ "}, cols=80, rows=12)
    vim = None
    try:
        shell.send("echo hello from the dashboard test\n")
        browser.navigate(web.url)
        rows = browser.wait_for(
            "[...document.querySelectorAll('#sessions tbody tr')].map(r => r.innerText).join('\\n')"
            ".includes('web-demo') && document.querySelector('#sessions tbody').innerText"
        )
        assert "dashboard-agent" in rows
        assert "bash" in rows
        assert "80\u00d712" in rows
        assert "running" in rows
        assert browser.evaluate("location.search") == ""  # the token left the address bar for a cookie
        browser.wait_for(f"{card_text('web-demo')}.includes('hello from the dashboard test')")
        # A line printed now reaches the page by the daemon's screen event, without a reload.
        word = "live-" + secrets.token_hex(4)
        shell.send(f"echo {word}\n")
        browser.wait_for(f"{card_text('web-demo')}.includes('$ echo {word}\\n{word}')")
        # A full-screen program prints no lines: its screen still reaches the page.
        if shutil.which("vim"):
            vim = Shell(rpc, token, name="web-vim", env={"PS1": "$ "}, cols=80, rows=12)
            vim.send(f"HOME={tmp_path} vim -u NONE -N\n", idle_ms=5_000)
            vim.send("iwritten in vim, seen in the browser", idle_ms=2_000)
            browser.wait_for(f"{card_text('web-vim')}.includes('written in vim, seen in the browser')")
            browser.wait_for("document.querySelector('#sessions tbody').innerText.includes('vim')")
        shot = browser.screenshot(tmp_path / "web-dashboard.png")
        print(f"dashboard screenshot: {shot}")
        assert shot.stat().st_size > 10_000
        shell.close()
        browser.wait_for(
            "!document.querySelector('#sessions tbody').innerText.includes('web-demo')"
        )  # a closed session leaves the list
    finally:
        for s in (shell, vim):
            if s is not None:
                with contextlib.suppress(Exception):
                    s.close()


@needs_chromium
def test_the_page_replays_a_recording(web: Web, browser: Browser, agent: tuple[Rpc, str], tmp_path: Path) -> None:
    rpc, token = agent
    shell = Shell(rpc, token, name="recorded", env={"PS1": "$ "}, cols=60, rows=8, record=True)
    try:
        for n in range(3):
            shell.send(f"echo step-{n}\n")
        shell.call("terminal_record", record=False)
    finally:
        shell.close()
    browser.navigate(web.url)  # signs in: the token in the address, traded for a cookie
    browser.wait_for("document.querySelector('#link').textContent === 'live'")
    browser.evaluate("document.querySelector('#tab-recordings').click()")
    browser.wait_for(f"document.querySelector('#recording-list').innerText.includes({shell.id!r})")
    browser.evaluate(f"document.querySelector('#recording-list tr[data-path*=\"{shell.id}\"] button').click()")
    final = browser.wait_for(
        "document.querySelector('#player').dataset.state === 'ended' "
        "&& document.querySelector('#player-screen').textContent"
    )
    assert "$ echo step-2\nstep-2\n$" in final
    browser.screenshot(tmp_path / "web-replay.png")


def test_a_missing_or_wrong_token_is_refused(web: Web) -> None:
    for path in ("/", "/api/state", "/api/events", "/api/recordings", "/static/app.js"):
        assert get(web.port, path).status == 401, path
    assert get(web.port, "/?token=ptyd_not-the-token").status == 401
    assert get(web.port, "/api/state", {"cookie": "ptyd_web=" + "0" * 64}).status == 401
    # The right token: redirected without it, with a cookie that opens everything.
    response = get(web.port, f"/?token={web.token}")
    assert response.status == 303
    assert response.getheader("location") == "/"
    cookie = response.getheader("set-cookie") or ""
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert web.token not in cookie
    jar = {"cookie": cookie.split(";", 1)[0]}
    assert get(web.port, "/api/state", jar).status == 200
    assert get(web.port, "/", jar).status == 200


def test_a_foreign_host_header_is_refused(web: Web) -> None:
    # A page elsewhere reaching 127.0.0.1 through a rebound DNS name sends its own Host.
    response = get(web.port, f"/?token={web.token}", {"host": f"rebound.example:{web.port}"})
    assert response.status == 403


NOBODY_REQUEST = """
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30)
c.request("GET", "/?token=" + sys.argv[2])
print(c.getresponse().status)
"""


def test_another_users_process_is_refused(web: Web) -> None:
    if os.getuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run a process as nobody")
    # Even with the right token: the token is a second check, the user is the first.
    done = subprocess.run(
        [
            "setpriv",
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            NOBODY_REQUEST,
            str(web.port),
            web.token,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert done.stdout.strip() == "403", done.stderr
    assert get(web.port, f"/?token={web.token}").status == 303  # the same request from this user


def test_it_listens_on_loopback_or_a_unix_socket_only(web_daemon: Daemon, tmp_path: Path) -> None:
    for address in ("0.0.0.0:0", "192.168.1.1:8080", "[::]:0", "example.com:80"):
        done = subprocess.run(
            [sys.executable, "-m", "ptyd", "web", "--socket", str(web_daemon.socket), "--listen", address],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert done.returncode == 2, address
        assert "127.0.0.1 or a Unix socket only" in done.stderr, address
    path = tmp_path / "web.sock"
    server = Web(web_daemon, f"unix:{path}")
    try:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert unix_get(path, "/api/state").status == 401
        assert unix_get(path, f"/?token={server.token}").status == 303
    finally:
        server.stop()
    assert not path.exists()


def unix_get(path: Path, target: str) -> Answer:
    class UnixConnection(http.client.HTTPConnection):
        def connect(self) -> None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(str(path))

    return Answer(UnixConnection("localhost", timeout=30), target, {})


def test_a_busy_port_is_explained_not_a_traceback(web: Web, web_daemon: Daemon) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ptyd", "web", "--socket", str(web_daemon.socket), "--listen", f"127.0.0.1:{web.port}"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert f"port {web.port} on 127.0.0.1 is in use" in done.stderr
    assert "--listen 127.0.0.1:0" in done.stderr


@needs_chromium
def test_the_zoomed_screen_is_in_colour_above_a_grid_of_thumbnails(
    web: Web, browser: Browser, agent: tuple[Rpc, str], tmp_path: Path
) -> None:
    pytest.importorskip("PIL.Image")
    from PIL import Image

    rpc, token = agent
    plain = Shell(rpc, token, name="grid-plain", env={"PS1": "$ "}, cols=80, rows=12)
    red = Shell(rpc, token, name="grid-red", env={"PS1": "$ "}, cols=80, rows=12)
    try:
        plain.send("echo nothing red here\n")
        red.send("clear; printf '\\033[41;97m%s\\033[0m\\n' ' RED ALERT BANNER RED ALERT BANNER '\n")
        browser.navigate(web.url)
        zoomed = "document.querySelector('#zoom')"
        # Both thumbnails are pictures once the daemon drew them; the red session is zoomed by a click.
        browser.wait_for(
            "[...document.querySelectorAll('#screens .card img')].filter(i => !i.hidden && i.naturalWidth > 0)"
            ".length >= 2"
        )
        browser.evaluate(
            "[...document.querySelectorAll('#screens .card')]"
            ".find(c => c.querySelector('h2').textContent.startsWith('grid-red')).click()"
        )
        # The zoomed picture is the session's screen now (the hub reads a picture at most twice a second: until
        # then an older one shows, marked so), and loaded.
        browser.wait_for(
            f"{zoomed}.querySelector('h2').textContent.startsWith('grid-red') && "
            f"{zoomed}.querySelector('pre').textContent.includes('RED ALERT BANNER') && "
            f"{zoomed}.querySelector('img').dataset.current === 'true' && "
            f"!{zoomed}.querySelector('img').hidden && {zoomed}.querySelector('img').naturalWidth > 0 && "
            f"{zoomed}.querySelector('img').complete"
        )
        box = browser.evaluate(
            f"(() => {{ const r = {zoomed}.querySelector('img').getBoundingClientRect(); "
            "const g = document.querySelector('#screens').getBoundingClientRect(); "
            "const cards = [...document.querySelectorAll('#screens .card')].map(c => c.getBoundingClientRect()); "
            "return {x: r.x, y: r.y, w: r.width, h: r.height, grid: g.y, "
            "tops: cards.map(c => Math.round(c.y)), lefts: cards.map(c => Math.round(c.x)), "
            "dpr: window.devicePixelRatio}; })()"
        )
        # The layout: the zoomed screen above the grid, the thumbnails side by side in one row.
        assert box["y"] + box["h"] <= box["grid"] + 1
        assert len(set(box["tops"])) == 1, box
        assert len(set(box["lefts"])) == len(box["lefts"]), box
        shot = browser.screenshot(tmp_path / "web-grid.png")
        print(f"dashboard screenshot: {shot}")
        with Image.open(shot) as image:
            scale = box["dpr"]
            crop = image.convert("RGB").crop(
                (
                    int(box["x"] * scale),
                    int(box["y"] * scale),
                    int((box["x"] + box["w"]) * scale),
                    int((box["y"] + box["h"]) * scale),
                )
            )
            raw = crop.tobytes()
        pixels = [tuple(raw[i : i + 3]) for i in range(0, len(raw), 3)]
        reds = sum(1 for r, g, b in pixels if r > 150 and g < 60 and b < 60)
        # The banner: 34 cells of a 12-row screen on a red background, several percent of the picture.
        assert reds / len(pixels) > 0.02, f"the zoomed screen shows no red ({reds} of {len(pixels)} pixels)"
    finally:
        for s in (plain, red):
            with contextlib.suppress(Exception):
                s.close()


def get_state(port: int, cookie: str) -> dict[str, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", "/api/state", headers={"Cookie": cookie})
        response = connection.getresponse()
        assert response.status == 200, response.status
        return dict(json.loads(response.read()))
    finally:
        connection.close()


@pytest.mark.parametrize("how", ["restart", "upgrade"])
def test_the_printed_url_and_the_page_outlive_a_daemon_restart(
    tmp_path_factory: pytest.TempPathFactory, how: str
) -> None:
    """A restarted daemon mints a new operator token: the URL ptyd web printed, and the cookie a browser got from
    it, still open the dashboard, which shows the new daemon's sessions (an upgrade keeps the token anyway)."""
    d = Daemon(_private_dir(tmp_path_factory, "ptyd-web-restart"))
    d.start()
    server = Web(d, "127.0.0.1:0")
    try:
        first = get(server.port, f"/?token={server.token}")
        assert first.status == 303
        cookie = (first.getheader("set-cookie") or "").split(";", 1)[0]
        assert cookie.startswith("ptyd_web=")
        wait_until(lambda: get_state(server.port, cookie)["connected"], message="the dashboard's first connect")
        if how == "restart":
            assert d.stop() == 0, d.log()
            d.start()
        else:
            hand_over(d)
        with d.rpc() as rpc:
            token = rpc.call("agent_register", name="after-" + how)["token"]
            shell = Shell(rpc, token, env={"PS1": "$ "})

            def listed() -> bool:
                state = get_state(server.port, cookie)
                return state["connected"] and shell.id in [s["session_id"] for s in state["sessions"]]

            wait_until(listed, timeout=30, message="the new daemon's session on the dashboard")
            assert get(server.port, "/", {"Cookie": cookie}).status == 200
            assert get(server.port, f"/?token={server.token}").status == 303, "the printed URL no longer opens it"
            assert get(server.port, "/?token=wrong").status == 401
    finally:
        server.stop()
        d.stop()
