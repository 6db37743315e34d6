"""Crash survival without systemd, on by default (``fd_keeper``): a ``ptyd keeper`` holds the PTY masters, so a
SIGKILLed daemon's sessions run on and the next daemon adopts them; a clean stop ends the keeper too; a keeper
left alone past its grace lets the sessions go. Real daemons, real shells, a real crash."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
from pathlib import Path

import pytest

from conftest import Daemon, Shell, keepers, pid_alive, session_pids, wait_until
from ptyd.continuity.keeper import KEEPER_SOCKET, SECRET_FILE


def saved_sessions(directory: Path) -> set[str]:
    try:
        return set(json.loads((directory / "sessions.json").read_text())["sessions"])
    except (OSError, ValueError, KeyError):
        return set()


def test_sessions_outlive_a_crash_and_the_next_daemon_adopts_them(fresh_daemon: Daemon) -> None:
    fresh_daemon.start()  # the default configuration
    with fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register", name="survivor")["token"]
        shell = Shell(rpc, token, env={"PS1": "$ "})
        shell.send("X=kept-across-the-crash\n")
        repl = Shell(rpc, token, argv=["python3", "-q"])
        repl.send("y = 41\n")
        pids = {shell.id: shell.opened["pid"], repl.id: repl.opened["pid"]}
        tree = session_pids(shell)
    [keeper] = keepers(fresh_daemon.directory)
    # A new session is saved within 0.2 s (as under systemd): one opened just before a crash is lost.
    wait_until(lambda: saved_sessions(fresh_daemon.directory) == set(pids), message="the saved state")
    fresh_daemon.stop(signal.SIGKILL)
    assert all(pid_alive(pid) for pid in [*pids.values(), *tree])  # no hangup: the keeper holds the masters
    with open(f"/proc/{pids[repl.id]}/stat") as f:
        assert f.read().rpartition(")")[2].split()[0] != "Z"
    fresh_daemon.start()
    assert "adopted 2 of the 2 sessions the fd keeper kept" in fresh_daemon.log()
    with fresh_daemon.rpc() as rpc:
        listed = {s["session_id"]: s["pid"] for s in rpc.call("terminal_list", token=token)["sessions"]}
        assert listed == pids  # same ids, same programs, same owner's token
        shell.rpc = repl.rpc = rpc
        assert shell.send("echo $X\n")["viewport"].splitlines()[-2:] == ["kept-across-the-crash", "$"]
        assert repl.send("y + 1\n")["viewport"].splitlines()[-2:] == ["42", ">>>"]
    assert keepers(fresh_daemon.directory) == [keeper]  # the same keeper serves the next daemon
    assert fresh_daemon.stop() == 0  # a clean stop closes the sessions and lets the keeper go
    wait_until(lambda: not keepers(fresh_daemon.directory), message="the keeper's exit")
    assert not (fresh_daemon.directory / KEEPER_SOCKET).exists()
    assert not any(pid_alive(pid) for pid in [*pids.values(), *tree])


def start_with_a_shell(daemon: Daemon, config: str, line: str) -> Shell:
    """Start ``daemon`` with ``config`` and open a shell that runs ``line`` (its connection closed after)."""
    daemon.config_path.write_text(config)
    daemon.start()
    with daemon.rpc() as rpc:
        shell = Shell(rpc, rpc.call("agent_register")["token"], env={"PS1": "$ "})
        shell.send(line)
    return shell


def test_a_keeper_left_alone_lets_the_sessions_go(fresh_daemon: Daemon) -> None:
    shell = start_with_a_shell(fresh_daemon, "fd_keeper_grace_ms = 300\n", "\n")
    fresh_daemon.stop(signal.SIGKILL)
    # No daemon comes back: after its grace the keeper closes the masters, and the shell gets its hangup.
    wait_until(lambda: not keepers(fresh_daemon.directory), message="the keeper's exit")
    wait_until(lambda: not pid_alive(shell.opened["pid"]), message="the shell's hangup")
    fresh_daemon.start()  # nothing to adopt; the state file's leftovers are gone already
    with fresh_daemon.rpc() as rpc:
        assert rpc.call("daemon_info")["sessions"] == 0


def test_without_the_option_there_is_no_keeper(fresh_daemon: Daemon) -> None:
    fresh_daemon.config_path.write_text("fd_keeper = false\n")
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        Shell(rpc, rpc.call("agent_register")["token"])
        assert rpc.call("daemon_info")["crash_continuity"] == "none: fd_keeper = false"
    assert keepers(fresh_daemon.directory) == []


def test_the_keeper_follows_a_handover(fresh_daemon: Daemon) -> None:
    shell = start_with_a_shell(fresh_daemon, "", "X=handed-then-crashed\n")
    assert fresh_daemon.proc is not None
    fresh_daemon.proc.send_signal(signal.SIGUSR2)  # the daemon execs itself in place (same pid)

    def handed_over() -> bool:
        try:
            with fresh_daemon.rpc() as rpc:
                return bool(rpc.call("daemon_info")["handovers"] == 1)
        except OSError:  # the connection the exec dropped
            return False

    wait_until(handed_over, timeout=60, message="the handover")
    wait_until(lambda: saved_sessions(fresh_daemon.directory) == {shell.id}, message="the saved state")
    fresh_daemon.stop(signal.SIGKILL)
    fresh_daemon.start()
    assert "adopted 1 of the 1 sessions the fd keeper kept" in fresh_daemon.log()
    with fresh_daemon.rpc() as rpc:
        shell.rpc = rpc
        assert shell.send("echo $X\n")["viewport"].splitlines()[-2:] == ["handed-then-crashed", "$"]


def continuity(daemon: Daemon) -> str:
    with daemon.rpc() as rpc:
        return str(rpc.call("daemon_info")["crash_continuity"])


def crash_and_adopt(daemon: Daemon, shell: Shell, expected: str) -> None:
    """SIGKILL the daemon once its state is saved; the next one adopts ``shell``, which still holds ``expected``."""
    wait_until(lambda: saved_sessions(daemon.directory) == {shell.id}, message="the saved state")
    daemon.stop(signal.SIGKILL)
    daemon.start()
    assert "adopted 1 of the 1 sessions the fd keeper kept" in daemon.log()
    with daemon.rpc() as rpc:
        shell.rpc = rpc
        assert shell.send("echo $X\n")["viewport"].splitlines()[-2:] == [expected, "$"]


def test_a_killed_keeper_is_back_before_the_next_crash(fresh_daemon: Daemon) -> None:
    shell = start_with_a_shell(fresh_daemon, "", "X=kept-past-the-keeper\n")
    assert continuity(fresh_daemon) == "keeper"
    [first] = keepers(fresh_daemon.directory)
    os.kill(first, signal.SIGKILL)
    # Started again at once, and handed the master: daemon_info says so only then.
    wait_until(
        lambda: keepers(fresh_daemon.directory) not in ([], [first]) and continuity(fresh_daemon) == "keeper",
        message="another keeper",
    )
    assert "the fd keeper died" in fresh_daemon.log()
    crash_and_adopt(fresh_daemon, shell, "kept-past-the-keeper")


def keeper_answers(directory: Path, *messages: str) -> tuple[list[str], int]:
    """What the keeper answers a connection of our own that sends ``messages``: its messages and the fds they
    carried (closed here), up to the end of the connection."""
    from ptyd.continuity.keeper import receive, send

    answers, fds = [], 0
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
        sock.settimeout(10)
        sock.connect(str(directory / KEEPER_SOCKET))
        for message in messages:
            with contextlib.suppress(OSError):  # refused at the first: the rest find it hung up
                send(sock, message)
        while True:
            try:
                message, carried = receive(sock)
            except ConnectionResetError:
                break
            for fd in carried:
                os.close(fd)
            fds += len(carried)
            if not message:
                break
            answers.append(message)
    return answers, fds


def test_a_connection_without_the_secret_gets_nothing(fresh_daemon: Daemon) -> None:
    shell = start_with_a_shell(fresh_daemon, "", "X=not-handed-out\n")
    directory = fresh_daemon.directory
    wait_until(lambda: saved_sessions(directory) == {shell.id}, message="the saved state")
    secret = (directory / SECRET_FILE).read_text().strip()
    assert (directory / SECRET_FILE).stat().st_mode & 0o777 == 0o600
    assert secret.encode() not in Path(f"/proc/{keepers(directory)[0]}/cmdline").read_bytes()
    assert keeper_answers(directory, "TAKE") == (["REFUSED no secret, or the wrong one"], 0)
    assert keeper_answers(directory, "HELLO " + "0" * len(secret), "TAKE") == (
        ["REFUSED no secret, or the wrong one"],
        0,
    )
    # The secret itself does not displace the daemon that is connected: its crash continuity stays.
    assert keeper_answers(directory, f"HELLO {secret}", "TAKE") == (["REFUSED a daemon is connected"], 0)
    assert continuity(fresh_daemon) == "keeper"
    crash_and_adopt(fresh_daemon, shell, "not-handed-out")


def test_the_keepers_socket_appears_only_once_it_listens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Bound at its path before it listened: a daemon connecting in between was refused, took it for no keeper,
    # started one of its own with a new secret, and its HELLO reached the first keeper, which refused it (CI).
    from ptyd.continuity import keeper

    path = tmp_path / KEEPER_SOCKET
    at_listen: list[bool] = []
    listen = socket.socket.listen

    def watched(self: socket.socket, *args: int) -> None:
        at_listen.append(path.exists())
        listen(self, *args)

    monkeypatch.setattr(socket.socket, "listen", watched)
    listener = keeper._bind(path)
    assert listener is not None
    with listener, socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as client:
        assert at_listen == [False]
        client.connect(str(path))  # the path is the listening socket
        assert [p.name for p in tmp_path.iterdir()] == [KEEPER_SOCKET]  # nothing staged is left


def test_keeper_protocol_in_process(tmp_path: Path) -> None:
    """HELLO, STORE, REMOVE, TAKE and BYE against ``serve`` in a thread, with pipes standing in for PTY masters."""
    import threading

    from ptyd.continuity.keeper import new_secret, serve
    from ptyd.continuity.keeper_link import Keeper

    exited: list[int] = []
    secret = new_secret(tmp_path)  # what the daemon writes before it starts a keeper
    server = threading.Thread(target=lambda: exited.append(serve(tmp_path, grace_s=30, secret=secret)))
    server.start()
    wait_until(lambda: (tmp_path / KEEPER_SOCKET).exists(), message="the keeper's socket")
    first = Keeper.attach(tmp_path, grace_ms=30_000)  # finds the running keeper: starts none
    assert first.take() == {}
    pipes = {name: os.pipe() for name in ("pty-a", "pty-b")}
    first.sync({name: w for name, (_, w) in pipes.items()})
    first.sync({"pty-b": pipes["pty-b"][1]})  # pty-a closed: the keeper lets it go
    intruder = Keeper.attach(tmp_path, grace_ms=30_000)  # the secret, but the first is connected: no displacement
    with pytest.raises(OSError, match="a daemon is connected"):
        intruder.take()
    assert first.take().keys() == {"pty-b"}  # the first is still served
    for fd in first.take().values():
        os.close(fd)
    assert first._sock is not None
    first._sock.close()  # as a crash or a handover's exec would
    second = Keeper.attach(tmp_path, grace_ms=30_000)  # a next daemon: the first's connection has ended
    taken = second.take()
    assert set(taken) == {"pty-b"}
    os.write(taken["pty-b"], b"x")  # the very pipe the first daemon stored
    assert os.read(pipes["pty-b"][0], 1) == b"x"
    assert server.is_alive()
    asyncio.run(second.bye())
    server.join(timeout=10)
    assert exited == [0]
    assert not (tmp_path / KEEPER_SOCKET).exists()
    for fd in [*taken.values(), *(fd for pair in pipes.values() for fd in pair)]:
        os.close(fd)
