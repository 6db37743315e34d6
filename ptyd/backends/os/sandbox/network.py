"""A sandbox's own network namespace with outbound access, through pasta (Debian's ``passt``).

bubblewrap makes the namespace (``--unshare-net``) and says which process holds it (``--info-fd``); the program
waits at a second gate inside the sandbox (``NET_GATE``) while the daemon runs pasta on that process, and starts
only once pasta has configured the namespace (pasta's launcher exits when it has, leaving its copy in the
background). pasta forwards nothing into the namespace, and nothing from it to the machine's loopback: no port
(``-t/-u/-T/-U none``) and no mapping of the gateway's address to the host (``--no-map-gw``), so the machine's
loopback ports and abstract Unix sockets (they belong to a network namespace) are out of reach. pasta does not
exit when the namespace's processes do: the session's containment ends it with the rest of the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import shutil
import signal

from ptyd.backends.os import procfs
from ptyd.backends.os.containment.reaper import ChildReaper
from ptyd.backends.os.containment.scope import Scope
from ptyd.backends.os.spawn import close_inherited
from ptyd.errors import SandboxUnavailable, SpawnFailed

NET_GATE_FD = 4  # inside the sandbox: read until the network is up
INFO_FD = 5  # bubblewrap's --info-fd: JSON with "child-pid", the process holding the namespaces
NET_GATE = ("/bin/sh", "-c", 'read -r _ <&4 || exit 125; exec 4<&- 5>&-; exec "$@"', "ptyd-net-gate")
_DEFAULT_SIGNALS = frozenset(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}
_PASTA_OPTIONS = ("--config-net", "--quiet", "-t", "none", "-u", "none", "-T", "none", "-U", "none", "--no-map-gw")


def pasta_program(name: str) -> str:
    """The pasta executable, or SandboxUnavailable saying it is missing."""
    found = shutil.which(name)
    if found is None:
        reason = f"sandbox_network is pasta, and pasta ({name}; Debian package passt) is not installed"
        raise SandboxUnavailable(f"this session's profile has network, and {reason}", reason=reason)
    return found


async def read_child_pid(fd: int, timeout_s: float) -> int:
    """The pid bubblewrap reports on its info pipe (which it writes once the sandbox's namespaces exist)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[int] = loop.create_future()
    data = bytearray()

    def readable() -> None:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            return
        except OSError as exc:
            chunk = b""
            data.extend(str(exc).encode())
        data.extend(chunk)
        with contextlib.suppress(ValueError):
            pid = json.loads(data).get("child-pid")
            if isinstance(pid, int) and not done.done():
                done.set_result(pid)
                return
        if not chunk and not done.done():  # bubblewrap ended (or closed it) before saying
            done.set_exception(SpawnFailed("the sandbox did not start its namespaces", reason="bwrap"))

    os.set_blocking(fd, False)
    loop.add_reader(fd, readable)
    try:
        return await asyncio.wait_for(done, timeout_s)
    except TimeoutError:
        raise SpawnFailed("the sandbox did not report its namespaces in time", reason="bwrap") from None
    finally:
        loop.remove_reader(fd)


async def connect(
    program: str, child: int, env: dict[str, str], reaper: ChildReaper, timeout_s: float, scope: Scope | None = None
) -> int:
    """Run pasta on ``child``'s network namespace; the pid of the pasta left in the background once it is up.
    ``scope``: pasta starts in it (its background copy is born there)."""
    argv = [program, *_PASTA_OPTIONS]
    if os.getuid() == 0:
        # pasta, started as root, would switch to nobody and could not join the namespace. Root may enter the
        # network namespace alone (it has CAP_SYS_ADMIN where it is and, as the owner, in the sandbox's user
        # namespace); bubblewrap's --disable-userns nests the program's user namespace, which pasta cannot join.
        argv += ["--runas", "0", "--netns", f"/proc/{child}/ns/net", "--netns-only"]
    else:  # another user's setns needs the capability in its own user namespace: pasta enters the holder's first
        argv += ["--userns", f"/proc/{child}/ns/user", "--netns", f"/proc/{child}/ns/net"]
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[int | None] = loop.create_future()
    before = set(procfs.children(os.getpid()))
    pid = _start(program, argv, env) if scope is None else spawn_held(argv, env, scope)

    # The reaper reaps every child of the daemon: it reports this one's exit status rather than losing it.
    def on_exit(code: int | None, _signal: str | None) -> None:
        if not exited.done():
            exited.set_result(code)

    reaper.watch(pid, on_exit)
    try:
        code = await asyncio.wait_for(asyncio.shield(exited), timeout_s)
    except TimeoutError:
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
        raise SpawnFailed("pasta did not set up the sandbox's network in time", reason="pasta") from None
    if code != 0:
        raise SpawnFailed(f"pasta could not set up the sandbox's network (exit status {code})", reason="pasta")
    # Its background copy is handed to the daemon, the subreaper: found among the daemon's new children.
    for candidate in set(procfs.children(os.getpid())) - before - {pid}:
        try:
            cmdline = procfs.read_file(f"/proc/{candidate}/cmdline").decode(errors="replace").split("\0")
        except OSError:
            continue
        if f"/proc/{child}/ns/net" in cmdline and os.path.basename(cmdline[0]).startswith("pasta"):
            return candidate
    raise SpawnFailed("pasta set up the sandbox's network and did not stay", reason="pasta")


_HELD = ("/bin/sh", "-c", 'read -r _ <&9 || exit 125; exec 9<&-; exec "$@"', "ptyd-held")


def spawn_held(argv: list[str], env: dict[str, str], scope: Scope, info: int = -1) -> int:
    """Start ``argv`` in ``scope``, its own session, standard fds on /dev/null, nothing of the daemon's inherited
    but ``info`` (as fd 3): held at a gate (fd 9) until it is in the scope, so whatever it forks is born there."""
    gate_read, gate = os.pipe()
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    # Copies above what the actions write (0-3, 9): no action overwrites one still to be copied, and none is
    # copied onto itself (which would keep it close-on-exec).
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (gate_read, info) if fd >= 0]
    os.close(gate_read)
    actions = [*close_inherited(), *((os.POSIX_SPAWN_DUP2, devnull, fd) for fd in (0, 1, 2))]
    actions += [(os.POSIX_SPAWN_DUP2, fd, target) for fd, target in zip(high, (9, 3), strict=False)]
    try:
        pid = os.posix_spawn(
            _HELD[0], [*_HELD, *argv], env, file_actions=actions, setsid=True, setsigdef=_DEFAULT_SIGNALS, setsigmask=()
        )
    except OSError as exc:
        os.close(gate)
        raise SpawnFailed(f"cannot start {os.path.basename(argv[0])}: {exc.strerror}", reason="pasta") from None
    finally:
        for fd in (*high, devnull):
            os.close(fd)
    try:
        scope.attach(pid)
    except OSError as exc:
        os.close(gate)  # EOF: it ends before running anything
        name = os.path.basename(argv[0])
        raise SpawnFailed(f"cannot put {name} in its cgroup: {exc.strerror}", reason="cgroup") from None
    os.write(gate, b"\n")
    os.close(gate)
    return pid


def _start(program: str, argv: list[str], env: dict[str, str]) -> int:
    """pasta's launcher, its standard fds on /dev/null (it logs to the system log: it must not keep a pipe)."""
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        return os.posix_spawn(
            program,
            argv,
            env,
            file_actions=[(os.POSIX_SPAWN_DUP2, devnull, fd) for fd in (0, 1, 2)],
            setsigdef=_DEFAULT_SIGNALS,  # the daemon's ignored and blocked signals would break pasta's handlers
            setsigmask=(),
        )
    except OSError as exc:
        raise SpawnFailed(f"cannot start pasta: {exc.strerror}", reason="pasta") from None
    finally:
        os.close(devnull)
