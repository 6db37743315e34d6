"""Where the daemon is: a local Unix socket, or a ptyd on another machine reached through OpenSSH.

``ssh://[user@]host[:port]`` (the ``host`` argument, ``ptyctl --host``, or ``$PTYD_HOST``) runs
``ssh -T host ptyd dial-stdio``, which connects to that machine's ptyd socket and bridges it to ssh's stdin and
stdout, as ``DOCKER_HOST=ssh://`` does. ssh authenticates and ``~/.ssh/config`` applies (aliases, keys, jump
hosts, ControlMaster); the daemon sees a local connection of its own user. ``$PTYD_SSH_COMMAND`` replaces
``ssh`` (``ssh -F my_config``), ``$PTYD_REMOTE_PTYD`` the remote ``ptyd`` command (when it is not on the PATH
of a non-interactive ssh command, or to add ``--socket PATH``).

Both transports end as one connected stream socket: ssh's stdin and stdout are one end of a socketpair, so the
clients read and write the same way whichever it is.
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

from ptyd_client import core
from ptyd_client.errors import DaemonUnavailable

SSH_EXIT_TIMEOUT_S = 5.0  # ssh exits within a round trip of its stdin closing; after this it is killed


class SshHost:
    """A daemon on another machine: ``ssh://[user@]host[:port]``."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme != "ssh" or not parts.hostname or parts.path not in ("", "/") or parts.query:
            raise ValueError(f"want ssh://[user@]host[:port], not {url!r}")
        try:
            self.port = parts.port
        except ValueError:
            raise ValueError(f"bad port in {url!r}") from None
        self.url = url
        self.host = parts.hostname
        self.user = parts.username

    def __str__(self) -> str:
        return self.url

    def ssh_argv(self, *remote: str) -> list[str]:
        """The ssh command line that runs ``remote`` (words, quoted for the remote shell) on the host."""
        argv = shlex.split(os.environ.get("PTYD_SSH_COMMAND") or "ssh")
        # -T: a byte stream, no tty. BatchMode: a prompt (passphrase, unknown host key) fails with ssh's own
        # message instead of stopping the process, which runs outside the terminal's foreground group.
        argv += ["-T", "-o", "BatchMode=yes"]
        if self.user:
            argv += ["-l", self.user]
        if self.port:
            argv += ["-p", str(self.port)]
        ptyd = shlex.split(os.environ.get("PTYD_REMOTE_PTYD") or "ptyd")
        return [*argv, "--", self.host, shlex.join([*ptyd, *remote])]

    def run(self, *remote: str, timeout: float = 30.0) -> str:
        """Run a ``ptyd`` subcommand on the host and return its output; :class:`DaemonUnavailable` if it fails."""
        try:
            done = subprocess.run(
                self.ssh_argv(*remote), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise DaemonUnavailable(self.url, str(exc)) from None
        if done.returncode != 0:
            raise DaemonUnavailable(self.url, ssh_failure(done.stderr, done.returncode))
        return done.stdout

    def operator_token(self) -> str:
        """The operator token of the daemon on the host (``ptyd operator-token`` there)."""
        return self.run("operator-token").strip()


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


# The remote shell's exit status when it cannot find or run the command (POSIX: 127 not found, 126 not runnable).
NOT_FOUND_CODES = (126, 127)


def ssh_failure(stderr: str, code: int) -> str:
    """Why the ssh command failed, in a line; when the far side has no ``ptyd``, what to set instead."""
    reason = last_line(stderr) or f"ssh exited with {code}"
    if code in NOT_FOUND_CODES:
        ptyd = os.environ.get("PTYD_REMOTE_PTYD") or "ptyd"
        reason += (
            f" (the far side cannot run {ptyd!r}: a non-interactive ssh command does not read ~/.bashrc, so set "
            "PTYD_REMOTE_PTYD to its full path there, e.g. PTYD_REMOTE_PTYD=/path/to/checkout/.venv/bin/ptyd)"
        )
    return reason


class Stream:
    """A connected stream socket to a daemon, and for ssh the process carrying it."""

    def __init__(
        self,
        sock: socket.socket,
        target: Path | SshHost,
        process: subprocess.Popen[bytes] | None = None,
        stderr: IO[bytes] | None = None,
    ) -> None:
        self.sock = sock
        self.target = target
        self._process = process
        self._stderr = stderr

    def failure(self) -> DaemonUnavailable | None:
        """After the stream ended: why, when ssh (or the remote ``ptyd dial-stdio``) failed; None otherwise."""
        if self._process is None or self._stderr is None:
            return None
        try:
            code = self._process.wait(SSH_EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return None
        if code == 0:
            return None
        self._stderr.seek(0)
        return DaemonUnavailable(str(self.target), ssh_failure(self._stderr.read().decode(errors="replace"), code))

    def close(self) -> None:
        """Close the socket; ssh sees its stdin end and exits (killed if it does not)."""
        self.sock.close()
        if self._process is not None:
            try:
                self._process.wait(SSH_EXIT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._stderr is not None:
            self._stderr.close()


def dial(target: Path | SshHost, connect_timeout: float | None) -> Stream:
    """Connect to the daemon; raises :class:`DaemonUnavailable` for a local socket that cannot be reached.

    An ssh connection is made in the background: its failures show as the stream ending, and
    :meth:`Stream.failure` then says why.
    """
    if isinstance(target, Path):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        sock.settimeout(connect_timeout)
        try:
            sock.connect(str(target))
        except OSError as exc:
            sock.close()
            raise core.connect_failure(target, exc) from None
        return Stream(sock, target)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours.set_inheritable(False)
    stderr = tempfile.TemporaryFile()  # noqa: SIM115 - kept with the stream, read when it fails
    try:
        # A process group of its own: Ctrl-C at the viewer's terminal (ptyctl watch) must not kill the link.
        process = subprocess.Popen(
            target.ssh_argv("dial-stdio"), stdin=theirs.fileno(), stdout=theirs.fileno(), stderr=stderr, process_group=0
        )
    except OSError as exc:
        ours.close()
        stderr.close()
        raise DaemonUnavailable(str(target), f"cannot run ssh: {exc.strerror}") from None
    finally:
        theirs.close()
    return Stream(ours, target, process, stderr)


def resolve_target(socket_path: str | os.PathLike[str] | None, host: str | None) -> Path | SshHost:
    """The daemon to reach: ``host``, else ``socket_path``, else ``$PTYD_HOST``, else the default socket.

    A host is ``ssh://[user@]host[:port]`` or ``unix:///path/to/ptyd.sock``.
    """
    if host is None and socket_path is not None:
        return Path(socket_path)
    spec = host if host is not None else os.environ.get("PTYD_HOST")
    if not spec:
        return core.default_socket_path()
    if spec.startswith("unix://"):
        return Path(spec.removeprefix("unix://"))
    return SshHost(spec)
