"""Headless Chromium (the Debian package, never a downloaded browser) driven over the Chrome DevTools Protocol,
with a websocket client of the standard library's sockets: enough to load a page, evaluate JavaScript in it and
take a screenshot."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import socket
import struct
import subprocess
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)


class WebSocket:
    """A client websocket (RFC 6455): text frames out (masked), frames in (unmasked), pings ignored."""

    def __init__(self, host: str, port: int, path: str, timeout: float = 30.0) -> None:
        self.sock = socket.create_connection((host, port), timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        response = b""
        while b"\r\n\r\n" not in response:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("the browser closed the websocket during the handshake")
            response += chunk
        head, _, self._buffer = response.partition(b"\r\n\r\n")
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"websocket handshake refused: {head[:200]!r}")

    def send(self, text: str) -> None:
        payload = text.encode()
        n = len(payload)
        if n < 126:
            header = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 65536:
            header = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            header = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def _exactly(self, n: int) -> bytes:
        while len(self._buffer) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the browser closed the websocket")
            self._buffer += chunk
        data, self._buffer = self._buffer[:n], self._buffer[n:]
        return data

    def recv(self) -> str:
        message = b""
        while True:
            first, second = self._exactly(2)
            n = second & 0x7F
            if n == 126:
                (n,) = struct.unpack("!H", self._exactly(2))
            elif n == 127:
                (n,) = struct.unpack("!Q", self._exactly(8))
            payload = self._exactly(n)
            opcode = first & 0x0F
            if opcode == 8:
                raise ConnectionError("the browser closed the websocket")
            if opcode in (0, 1, 2):
                message += payload
                if first & 0x80:
                    return message.decode()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class Browser:
    """One headless Chromium with a fresh profile, and its first page."""

    def __init__(self, profile: Path) -> None:
        assert CHROMIUM is not None
        profile.mkdir(parents=True, exist_ok=True)
        self.log = (profile.parent / "chromium.log").open("wb")
        self.proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank"],
            stdout=self.log,
            stderr=self.log,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"chromium did not start: {(profile.parent / 'chromium.log').read_text()}")
            time.sleep(0.05)
        self.port = int(port_file.read_text().splitlines()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=30) as response:
            targets = json.load(response)
        page = next(t for t in targets if t["type"] == "page")
        path = page["webSocketDebuggerUrl"].split(f":{self.port}", 1)[1]
        self.ws = WebSocket("127.0.0.1", self.port, path)
        self._id = 0
        self.call("Page.enable")
        self.call("Runtime.enable")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self._id:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result

    def navigate(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 20.0) -> Any:
        """Poll ``expression`` in the page until it is truthy; return its value. While the page is loading, an
        expression that throws (an element not there yet) counts as not yet."""
        deadline = time.monotonic() + timeout
        guarded = f"(() => {{ try {{ return ({expression}); }} catch (e) {{ return null; }} }})()"
        while True:
            value = self.evaluate(guarded)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {expression!r} in the page")
            time.sleep(0.05)

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        self.ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object | TracebackType) -> None:
        self.close()
