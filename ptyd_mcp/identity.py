"""An agent name's token, kept in a 0600 file beside the daemon's state so a restarted ``ptyd-mcp`` with the same
name sees the same sessions.

The file lives in the daemon's runtime directory (0700, beside its socket and operator token), under
``mcp-agents/``. A daemon restart revokes every token; the file then names a token the daemon no longer knows,
and the next call registers anew. Registration is serialized across processes (``flock``), so two servers started
at once with one name end up with one token, not two.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import secrets
from pathlib import Path

import anyio

from ptyd_client import AsyncClient

log = logging.getLogger("ptyd_mcp")
TOKEN_DIR = "mcp-agents"  # noqa: S105 - a directory name, not a secret
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def token_path(daemon: Path | str, agent: str) -> Path:
    """Where ``agent``'s token is kept for the daemon at ``daemon`` (its socket, or an ``ssh://`` host, whose tokens
    are kept locally under ``$XDG_STATE_HOME/ptyd``); other names are hashed to a file name."""
    stem = agent if _PLAIN_NAME.fullmatch(agent) else "sha256-" + hashlib.sha256(agent.encode()).hexdigest()[:32]
    if isinstance(daemon, Path):
        base = daemon.parent
    else:
        state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
        base = state / "ptyd" / ("host-" + hashlib.sha256(daemon.encode()).hexdigest()[:16])
    return base / TOKEN_DIR / f"{stem}.token"


def secret_path(daemon: Path | str, agent: str) -> Path:
    """Where the bearer secret of ``agent``'s HTTP transport is kept: beside its token (0600), in a directory no
    sandboxed session sees (ptyd's runtime directory, or its state directory for an ``ssh://`` host)."""
    return token_path(daemon, agent).with_suffix(".http-secret")


def http_secret(path: Path) -> str:
    """The bearer secret kept at ``path``, made (0600) if there is none: the same across restarts of the server,
    so a host's configured header keeps working, until the runtime directory goes (a reboot)."""
    kept = _read(path)
    if kept is not None:
        return kept
    fd = _lock(path)
    try:
        kept = _read(path)
        if kept is None:
            kept = secrets.token_urlsafe(32)
            _write(path, kept)
        return kept
    finally:
        os.close(fd)


def _read(path: Path) -> str | None:
    try:
        token = path.read_text().strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return token or None


def _write(path: Path, token: str) -> None:
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(token + "\n")
    os.replace(temporary, path)


def _lock(path: Path) -> int:
    """Hold the name's lock file exclusively (blocking); closing the returned fd releases it."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


class Identity:
    """The agent this server acts as: its name, and the token in ``client.token`` once known."""

    def __init__(self, client: AsyncClient, agent: str, key: str | None = None) -> None:
        self.client = client
        self.agent = agent
        self.key = key  # the name's registration key (--agent-key-file): registrations prove the name
        self.path = token_path(client.socket_path, agent)
        self._lock = anyio.Lock()

    async def ensure(self) -> None:
        """Load the kept token, or register this name when there is none."""
        async with self._lock:
            if self.client.token is None:
                self.client.token = _read(self.path) or await self._register(stale=None)

    async def renew(self, stale: str | None) -> bool:
        """The daemon rejected ``stale``: take a token another server of this name already renewed, or register.
        False when a concurrent call of this server renewed it already."""
        async with self._lock:
            if self.client.token != stale:
                return False
            self.client.token = await self._register(stale)
            return True

    async def _register(self, stale: str | None) -> str:
        self.client.token = None
        await self.client.connect()  # a daemon that is down is reported as such, before its directory is touched
        # Held for one agent_register round trip at most; the wait for it runs in a thread to keep the loop free.
        fd = await anyio.to_thread.run_sync(_lock, self.path)
        try:
            kept = _read(self.path)
            if kept is not None and kept != stale:
                return kept
            registered = await self.client.agent_register(self.agent, self.key)
            if self.key is not None and not registered.get("proven"):
                log.warning("the key in --agent-key-file does not prove %r: registered anonymous", self.agent)
            token = registered["token"]
            _write(self.path, token)
            return token
        finally:
            os.close(fd)
