"""The daemon's place on the machine: its runtime directory (0700), its lock, and its listening socket (0600).

A leaf module: ptyd-mcp binds its own socket with these, without importing the daemon and its backends.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import stat
from pathlib import Path


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
