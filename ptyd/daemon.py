"""The daemon's life: runtime directory, lock, socket, recovery after a crash, serving, reload and shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import logging
import os
import signal
import socket
import stat
from pathlib import Path

from ptyd import __version__, systemd
from ptyd.api import Api
from ptyd.backends.containment import select_containment, set_subreaper
from ptyd.backends.local import build_registry
from ptyd.backends.reaper import ChildReaper
from ptyd.backends.spawn import raise_fd_limit
from ptyd.config import OPERATOR_TOKEN_FILE, Config, ConfigError, default_socket_path, load_config
from ptyd.rpc.dispatch import Dispatcher
from ptyd.rpc.openrpc import discover_method
from ptyd.rpc.server import RpcServer
from ptyd.service.manifest import Manifest, remove_leftover_cgroups
from ptyd.service.service import PtyService
from ptyd.terminal.emulator import engine_name

log = logging.getLogger("ptyd")

MAINTENANCE_INTERVAL_S = 1.0


class StartupError(Exception):
    """The daemon cannot start; the message says why and what to do."""


def prepare_runtime_dir(directory: Path) -> None:
    """Create the directory 0700, or accept an existing one only if it is ours and closed to others."""
    try:
        directory.mkdir(mode=0o700, parents=False)
    except FileExistsError:
        pass
    except FileNotFoundError:
        directory.mkdir(mode=0o700, parents=True)
    st = directory.lstat()
    if not stat.S_ISDIR(st.st_mode):
        raise StartupError(f"{directory} is not a directory")
    if st.st_uid != os.getuid():
        raise StartupError(f"refusing to use {directory}: it is owned by uid {st.st_uid}, not {os.getuid()}")
    if st.st_mode & 0o077:
        raise StartupError(
            f"refusing to use {directory}: mode {stat.S_IMODE(st.st_mode):04o} lets others in (chmod 700 it)"
        )


def acquire_lock(directory: Path) -> int:
    fd = os.open(directory / "ptyd.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise StartupError(f"another ptyd (pid {holder}) is already serving {directory}") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def activated_path(sock: socket.socket, explicit: Path | None) -> Path:
    """The socket systemd passed decides where the runtime files (lock, manifest, token) live."""
    served = Path(sock.getsockname())
    if explicit is not None and explicit.resolve() != served.resolve():
        raise StartupError(f"--socket {explicit} differs from the activated socket {served}")
    return served


def has_listener(path: Path) -> bool:
    """Whether a listening socket is bound at ``path`` (e.g. systemd's ptyd.socket), without connecting to it
    (a connection would activate the service)."""
    target = str(path)
    try:
        with open("/proc/net/unix") as f:
            next(f)
            for line in f:
                fields = line.split()
                if len(fields) >= 8 and fields[7] == target and int(fields[3], 16) & 0x10000:  # __SO_ACCEPTCON
                    return True
    except (OSError, ValueError, StopIteration):
        pass
    return False


def bind_socket(path: Path, backlog: int) -> socket.socket:
    """Bind ``path`` 0600. Called with the lock held, so an existing socket file is a dead daemon's, unless
    something else (systemd's ptyd.socket) listens on it."""
    if has_listener(path):
        raise StartupError(f"{path} is held by another listener (systemd's ptyd.socket?); not replacing it")
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        sock.bind(str(path))
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(backlog)
    return sock


def write_operator_token(directory: Path, service: PtyService) -> None:
    """Mint the operator token (every agent's sessions, for ptyctl) into a 0600 file beside the socket.

    A new token each start: a stale file from a previous daemon never works against this one.
    """
    _, token = service.register("operator", operator=True)
    path = directory / OPERATOR_TOKEN_FILE
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.replace(tmp, path)


class Daemon:
    def __init__(self, config: Config, config_path: Path | None, socket_path: Path | None) -> None:
        self.config = config
        self.config_path = config_path
        self._explicit_socket = socket_path
        self.socket_path = socket_path or default_socket_path()
        self._stop = asyncio.Event()

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        activated = systemd.listen_socket()
        if activated is not None:
            self.socket_path = activated_path(activated, self._explicit_socket)
        directory = self.socket_path.parent
        prepare_runtime_dir(directory)
        lock_fd = acquire_lock(directory)
        try:
            return await self._serve(loop, activated, directory)
        finally:
            os.close(lock_fd)

    async def _serve(self, loop: asyncio.AbstractEventLoop, activated: socket.socket | None, directory: Path) -> int:
        log.debug("fd limit %d", raise_fd_limit())
        if not set_subreaper():
            log.warning("could not become a child subreaper; orphaned session processes go to init")
        instance = hashlib.sha256(str(self.socket_path.resolve()).encode()).hexdigest()[:12]
        containment = select_containment(self.config.containment, instance)
        manifest = Manifest(directory / "sessions.json")
        if manifest.recover(containment):
            await asyncio.sleep(0.05)  # let the killed trees leave their cgroups before removing them
        remove_leftover_cgroups(containment)
        reaper = ChildReaper(loop)
        service = PtyService(self.config, build_registry(self.config, reaper, containment), manifest, containment.name)
        write_operator_token(directory, service)
        methods = Api(service).methods()
        methods.append(discover_method(methods, __version__))
        server = RpcServer(Dispatcher(methods, self.config.max_batch), self.config)
        sock = activated or bind_socket(self.socket_path, self.config.listen_backlog)
        await server.start(sock)

        def reload() -> None:
            try:
                config = load_config(self.config_path)
            except ConfigError as exc:
                log.error("reload failed, keeping the running configuration: %s", exc)
                return
            self.config = config
            service.config = config
            service.backends = build_registry(config, reaper, containment)
            server.config = config
            server.dispatcher.max_batch = config.max_batch
            log.info("configuration reloaded; %d live sessions untouched", service.session_count)

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop.set)
        loop.add_signal_handler(signal.SIGHUP, reload)
        maintenance = loop.create_task(self._maintain(service, reaper))
        log.info(
            "ptyd %s serving %s (pid %d, containment %s, emulator %s)",
            __version__,
            self.socket_path,
            os.getpid(),
            containment.name,
            engine_name(self.config.emulator),
        )
        systemd.notify(f"READY=1\nSTATUS=serving, 0 sessions\nMAINPID={os.getpid()}")
        await self._stop.wait()

        grace_us = (self.config.shutdown_grace_ms + 5_000) * 1000
        systemd.notify(f"STOPPING=1\nSTATUS=closing {service.session_count} sessions\nEXTEND_TIMEOUT_USEC={grace_us}")
        log.info("shutting down: closing %d sessions", service.session_count)
        maintenance.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await maintenance
        server.stop_accepting()
        try:
            await asyncio.wait_for(service.shutdown(), self.config.shutdown_grace_ms / 1000)
        except TimeoutError:
            log.error("sessions did not close within %d ms", self.config.shutdown_grace_ms)
        await server.close()
        reaper.reap()
        reaper.close()
        containment.close()
        with contextlib.suppress(FileNotFoundError):
            (directory / OPERATOR_TOKEN_FILE).unlink()
        if activated is None:
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()
        sock.close()
        log.info("stopped")
        return 0

    async def _maintain(self, service: PtyService, reaper: ChildReaper) -> None:
        """Slow housekeeping: reap orphans handed to the subreaper, release idle agents, report status."""
        next_sweep = 0.0
        while True:
            await asyncio.sleep(MAINTENANCE_INTERVAL_S)
            reaper.reap()
            now = asyncio.get_running_loop().time()
            if now >= next_sweep:
                # Often enough that an idle agent outlives its timeout by at most a quarter of it.
                next_sweep = now + min(30.0, self.config.agent_idle_timeout_ms / 4000)
                await service.release_idle()
                systemd.notify(f"STATUS=serving, {service.session_count} sessions")
