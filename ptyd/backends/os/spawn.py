"""Starting a program on a new pseudo-terminal, as its session leader with the terminal as controlling tty.

No Python runs in the child: ``posix_spawn`` starts util-linux ``setsid -c`` (setsid + TIOCSCTTY on stdin)
which execs coreutils ``env -C DIR`` which execs a one-line ``sh`` gate which execs the program, so the pid
returned is the program's pid, and forking a multi-threaded daemon never runs interpreter code between fork and
exec; every descriptor but the terminal (0-2) and the gate's pipe (3) is closed in the child. The gate holds the
program until the daemon has moved it into its cgroup and set its fd limit (``release_gate``): moving a process
between cgroups takes ~10 ms here, long enough for a program to fork a child that would escape. A sandboxed
session puts its sandbox (``bwrap ... --``) between the gate and the program, so the sandbox itself starts in the
cgroup, and the pid returned is the sandbox's; ``Spawned.leader`` finds the program below it. Everything that can
fail (the directory, the program, the fds) is checked before spawning, so a failure is reported with its OS reason
and leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import resource
import shutil
import signal
import struct
import termios
from dataclasses import dataclass

from ptyd.backends.os import procfs
from ptyd.errors import InvalidArgument, SpawnFailed

IUTF8 = getattr(termios, "IUTF8", 0o40000)  # Linux value; Python 3.11 does not export it
SETSID = shutil.which("setsid") or "/usr/bin/setsid"
ENV = shutil.which("env") or "/usr/bin/env"
_DEFAULT_SIGNALS = frozenset(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}


_child_nofile: tuple[int, int] | None = None  # the fd limit programs get: the one the daemon started with


def raise_fd_limit() -> int:
    """Let the daemon use its hard fd limit (three fds a session), and keep programs at the original soft one
    (some still break with fds above 1024). Returns the new soft limit."""
    global _child_nofile
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        _child_nofile = (soft, hard)
    return hard


def child_nofile() -> tuple[int, int] | None:
    return _child_nofile


def set_child_nofile(limits: tuple[int, int]) -> None:
    """The limit a previous daemon (before a handover) gave its programs."""
    global _child_nofile
    _child_nofile = limits


GATE_FD = 3
KEY_FD = 6  # the shell-integration secret's pipe (shell_integration.KEY_FD)
GATE = ("/bin/sh", "-c", 'read -r _ <&3 || exit 125; exec 3<&-; exec "$@"', "ptyd-gate")


@dataclass(slots=True)
class Spawned:
    pid: int
    master: int  # non-blocking
    slave: int  # kept open by the daemon: its input queue says whether the program consumed what we wrote
    tty_rdev: int
    gate: int  # write end of the gate's pipe; -1 once released
    sandboxed: bool = False  # pid is the sandbox's (bwrap, then its pid 1), the program runs two levels below
    net_gate: int = -1  # write end of the gate inside a sandbox with a network of its own (sandbox/network.py)
    info: int = -1  # read end of bubblewrap's --info-fd, which names the process holding the namespaces
    _leader: int = 0

    def leader(self) -> int:
        """The program's pid (the shell): ``pid`` itself unless sandboxed. Inside a sandbox the program is the
        grandchild of ``pid`` (bwrap outside, bwrap as the namespace's pid 1, the program); until it has exec'd,
        ``pid`` stands in."""
        if not self.sandboxed or self._leader:
            return self._leader or self.pid
        for init in procfs.children(self.pid):
            below = [stat for stat in map(procfs.read_stat, procfs.children(init)) if stat is not None]
            if below:
                first = min(below, key=lambda stat: stat.starttime)
                if first.comm != "bwrap":
                    self._leader = first.pid
                    return first.pid
        return self.pid

    def release_net_gate(self, *, start: bool) -> None:
        """Let the program start inside a sandbox whose network is up, or (``start`` false) end it: the EOF
        ends the gate with status 125 before the program ran."""
        if start and self.net_gate >= 0:
            with contextlib.suppress(OSError):
                os.write(self.net_gate, b"\n")
        for fd in (self.net_gate, self.info):
            if fd >= 0:
                os.close(fd)
        self.net_gate = self.info = -1

    def release_gate(self) -> None:
        """Let the program start (an EOF instead of the newline ends it with status 125)."""
        if self.gate >= 0:
            with contextlib.suppress(OSError):
                os.write(self.gate, b"\n")
            os.close(self.gate)
            self.gate = -1


def close_inherited() -> list[tuple[int, int]]:
    """Every inheritable descriptor of the daemon, closed in the child before the terminal and the gate take
    0-3: what the daemon itself inherited (a descriptor its parent left open, read-write perhaps) and what a
    handover carries across its exec must reach no session's programs, sandboxed or not. The daemon's own are
    close-on-exec already. Walking /proc/self/fd costs ~2.4 us a descriptor: 7 ms an open with 3,000 open
    (a thousand sessions), measured on these machines."""
    actions = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
                if os.get_inheritable(fd):
                    actions.append((os.POSIX_SPAWN_CLOSE, fd))
    return actions


def set_winsize(fd: int, cols: int, rows: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _fail(what: str, err: int, **extra: object) -> SpawnFailed:
    return SpawnFailed(f"{what}: {os.strerror(err)}", reason=errno.errorcode.get(err, str(err)), **extra)


def resolve_program(program: str, path: str) -> str:
    if "/" in program:
        if not os.path.exists(program):
            raise _fail(program, errno.ENOENT, program=program)
        if os.path.isdir(program) or not os.access(program, os.X_OK):
            raise _fail(program, errno.EACCES, program=program)
        return program
    found = shutil.which(program, path=path)
    if found is None:
        raise _fail(f"{program} (not on PATH)", errno.ENOENT, program=program)
    return found


def check_exec_strings(argv: list[str], env: dict[str, str]) -> None:
    """execve(2) takes NUL-terminated strings and NAME=value pairs: refuse what it cannot carry, before any fd."""
    if any("\0" in arg for arg in argv):
        raise InvalidArgument("an argv string contains a NUL character", field="argv")
    for name, value in env.items():
        if not name or "=" in name or "\0" in name or "\0" in value:
            raise InvalidArgument("an env name is empty or holds '=' or NUL, or a value holds NUL", field="env")


def spawn(
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    cols: int,
    rows: int,
    sandbox: tuple[str, ...] = (),
    *,
    network_gate: bool = False,
    key: str | None = None,
) -> Spawned:
    """``sandbox``: the argv prefix of the sandbox to run the program in (ending with ``--``), or empty;
    ``network_gate``: it holds the program at a second gate (fd 4) and reports its namespaces (fd 5); ``key``: the
    shell-integration secret, handed on a pipe at fd 6 (the shell reads it and closes it; shell_integration)."""
    check_exec_strings(argv, env)
    if not os.path.isdir(cwd):
        raise _fail(f"cwd {cwd}", errno.ENOENT if not os.path.exists(cwd) else errno.ENOTDIR, cwd=cwd)
    if not os.access(cwd, os.X_OK):
        raise _fail(f"cwd {cwd}", errno.EACCES, cwd=cwd)
    program = resolve_program(argv[0], env.get("PATH", os.defpath))
    try:
        master, slave = os.openpty()
    except OSError as exc:
        raise _fail("openpty", exc.errno or errno.EIO) from None
    try:
        gate_read, gate = os.pipe()
    except OSError as exc:  # EMFILE after openpty took the last two fds: give them back
        os.close(master)
        os.close(slave)
        raise _fail("pipe", exc.errno or errno.EIO) from None
    extra: list[tuple[int, int, int]] = []
    theirs: list[int] = []  # the child's ends of the network gate and info pipes: closed here once it has them
    mine: list[int] = []  # the daemon's ends: (network gate, info)
    try:
        if gate_read == GATE_FD:  # dup2 onto itself would keep close-on-exec set
            gate_read = os.dup(gate_read)
            os.close(GATE_FD)
        set_winsize(master, cols, rows)
        attrs = termios.tcgetattr(slave)
        attrs[0] |= IUTF8  # erase whole UTF-8 characters in canonical mode
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        tty_rdev = os.fstat(slave).st_rdev
        if network_gate:
            net_read, net_gate = os.pipe()
            theirs.append(net_read)
            mine.append(net_gate)
            info, info_write = os.pipe()
            theirs.append(info_write)
            mine.append(info)
            # Above the fds the actions write (0-5), so that no action overwrites one still to be copied.
            net_read = fcntl.fcntl(net_read, fcntl.F_DUPFD_CLOEXEC, 10)
            theirs.append(net_read)
            info_write = fcntl.fcntl(info_write, fcntl.F_DUPFD_CLOEXEC, 10)
            theirs.append(info_write)
            extra = [(os.POSIX_SPAWN_DUP2, net_read, 4), (os.POSIX_SPAWN_DUP2, info_write, 5)]
        if key is not None:
            key_read, key_write = os.pipe()
            theirs.append(key_read)
            with os.fdopen(key_write, "wb") as pipe:  # a line, far below a pipe's buffer: never blocks
                pipe.write(key.encode() + b"\n")
            key_read = fcntl.fcntl(key_read, fcntl.F_DUPFD_CLOEXEC, 10)  # above what the actions write
            theirs.append(key_read)
            extra.append((os.POSIX_SPAWN_DUP2, key_read, KEY_FD))
        pid = os.posix_spawn(
            SETSID,
            [SETSID, "-c", ENV, "-C", cwd, "--", *GATE, *sandbox, program, *argv[1:]],
            env,
            file_actions=[
                *close_inherited(),
                (os.POSIX_SPAWN_DUP2, slave, 0),
                (os.POSIX_SPAWN_DUP2, slave, 1),
                (os.POSIX_SPAWN_DUP2, slave, 2),
                (os.POSIX_SPAWN_DUP2, gate_read, GATE_FD),
                *extra,
            ],
            setsigdef=_DEFAULT_SIGNALS,  # the daemon ignores SIGPIPE; its programs must not
            setsigmask=(),
        )
        if _child_nofile is not None:
            with contextlib.suppress(OSError):  # the program is held at the gate: nothing has forked yet
                resource.prlimit(pid, resource.RLIMIT_NOFILE, _child_nofile)
        os.set_blocking(master, False)
    except (OSError, ValueError) as exc:  # ValueError: a string posix_spawn cannot pass (checked above too)
        for fd in (master, slave, gate, *mine):
            os.close(fd)
        raise _fail("spawn", exc.errno if isinstance(exc, OSError) and exc.errno else errno.EINVAL) from None
    finally:
        os.close(gate_read)
        for fd in theirs:
            os.close(fd)
    spawned = Spawned(pid=pid, master=master, slave=slave, tty_rdev=tty_rdev, gate=gate, sandboxed=bool(sandbox))
    if mine:
        spawned.net_gate, spawned.info = mine
    return spawned
