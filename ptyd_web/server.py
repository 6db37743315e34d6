"""``ptyd web``'s listener: a Unix socket (0600), or 127.0.0.1 and no other address, with the peer-uid check."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import importlib.util
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ptyd.loopback import SameUserOnly
from ptyd_web.hub import Hub, operator_token

if TYPE_CHECKING:
    from starlette.types import ASGIApp

LOOPBACK = ("127.0.0.1", "localhost")
WEB_EXTRA = ("starlette", "uvicorn")  # what ptyd's 'web' extra installs, by module
MISSING_EXTRA = (
    "ptyd web: the dashboard needs {missing}, which is not installed: it is ptyd's 'web' extra. Install it with "
    "`pip install 'ptyd[web]'`, from a checkout `pip install '.[web]'` (or `pipx install --force '.[web]'`)."
)


class BadListen(ValueError):
    """An address ``ptyd web`` will not listen on."""


def parse_listen(text: str) -> tuple[str, int] | Path:
    """``unix:PATH``, ``127.0.0.1:PORT``, ``localhost:PORT`` or a bare ``PORT`` (0: any free one)."""
    if text.startswith("unix:"):
        return Path(text[len("unix:") :])
    host, sep, port = text.rpartition(":")
    host = host if sep else "127.0.0.1"
    if host.strip("[]") not in LOOPBACK:
        raise BadListen(
            f"ptyd web listens on 127.0.0.1 or a Unix socket only, not {host!r}: the dashboard shows every "
            "session's screen; reach it from elsewhere through ssh -L"
        )
    if not port.isdigit() or int(port) > 65535:
        raise BadListen(f"not a port: {port!r}")
    return "127.0.0.1", int(port)


def missing_extra() -> str | None:
    """The first module of the web extra that is not installed, if any."""
    return next((module for module in WEB_EXTRA if importlib.util.find_spec(module) is None), None)


def busy(where: tuple[str, int], exc: OSError) -> str:
    """Why ``where`` cannot be listened on, and what to do, instead of a traceback."""
    host, port = where
    if exc.errno == errno.EADDRINUSE:
        return (
            f"port {port} on {host} is in use by another program (another `ptyd web`?): open the URL that one "
            f"printed, stop it, or pick another port: --listen {host}:0 takes any free one"
        )
    if exc.errno == errno.EACCES:
        return f"port {port} on {host} needs privileges this user lacks: --listen {host}:0 takes any free port"
    return f"cannot listen on {host}:{port}: {exc.strerror or exc}"


def run(socket_path: Path, listen: str, emulator: str = "auto") -> int:
    missing = missing_extra()
    if missing is not None:
        print(MISSING_EXTRA.format(missing=missing), file=sys.stderr)
        return 2
    import uvicorn

    from ptyd.daemon.runtime import bind_socket
    from ptyd_web.app import build
    from ptyd_web.auth import TokenRequired

    try:
        where = parse_listen(listen)
    except BadListen as exc:
        print(f"ptyd web: {exc}", file=sys.stderr)
        return 2

    def token() -> str:
        return operator_token(socket_path)

    try:
        first = token()
    except Exception as exc:  # DaemonUnavailable: said plainly, before anything listens
        print(f"ptyd web: {exc}", file=sys.stderr)
        return 3

    def remove_socket() -> None:
        if isinstance(where, Path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(where)

    hub = Hub(socket_path, token)
    app = build(hub, emulator, remove_socket)
    asgi: ASGIApp
    if isinstance(where, Path):
        listener = bind_socket(where, backlog=128)
        asgi = TokenRequired(app, token, hosts=None, printed=first)
        print(f"ptyd web: serving on unix:{where}; token {first}", flush=True)
    else:
        try:
            listener = socket.create_server(where)
        except OSError as exc:
            print(f"ptyd web: {busy(where, exc)}", file=sys.stderr)
            return 2
        port = listener.getsockname()[1]
        hosts = frozenset(f"{h}:{port}" for h in LOOPBACK)
        asgi = SameUserOnly(
            TokenRequired(app, token, hosts, printed=first), b"ptyd web serves only processes of its own user\n"
        )
        print(f"ptyd web: http://127.0.0.1:{port}/?token={first}", flush=True)
    config = uvicorn.Config(asgi, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
    try:
        asyncio.run(uvicorn.Server(config).serve(sockets=[listener]))
    finally:
        listener.close()
        remove_socket()
    return 0
