"""The socket, its directory and the log: private modes, refusal of unsafe directories, and no secret in the log."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, Daemon, RpcError, Shell, wait_until

from .probes import LogWatch, log_problems, proc_id, still_running


def test_socket_directory_and_every_file_in_it_are_private(fresh_daemon: Daemon) -> None:
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        Shell(rpc, rpc.call("agent_register")["token"])  # so that the manifest exists too
        assert stat.S_IMODE(fresh_daemon.directory.stat().st_mode) == 0o700
        assert stat.S_IMODE(fresh_daemon.socket.stat().st_mode) == 0o600
        assert stat.S_ISSOCK(fresh_daemon.socket.stat().st_mode)
        written = {str(p.relative_to(fresh_daemon.directory)) for p in fresh_daemon.directory.rglob("*")} - {
            "config.toml",
            "daemon.log",
        }
        assert {"ptyd.sock", "ptyd.lock", "operator.token", "sessions.json", "records"} <= written
        assert any(name.startswith("records/") for name in written)  # the session's live record
        for name in written:
            try:
                st = (fresh_daemon.directory / name).lstat()
            except FileNotFoundError:
                # Only the state file's temporary may go between the listing and the lstat: the saver (in a thread)
                # renames it over sessions.json. It is created 0600 (tested with the file it becomes).
                assert name == "sessions.tmp", name
                continue
            assert st.st_uid == os.getuid(), name
            assert stat.S_IMODE(st.st_mode) & 0o077 == 0, f"{name} is {stat.S_IMODE(st.st_mode):04o}"


def stale_socket(path: Path) -> None:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()


def snapshot(directory: Path) -> dict[str, tuple[int, int, int, int]]:
    """What 'touches nothing' means: the same names, inodes, modes and modification times."""
    out = {}
    for path in [directory, *directory.iterdir()]:
        st = path.lstat()
        out[path.name] = (st.st_ino, st.st_mode, st.st_uid, st.st_mtime_ns)
    return out


UNSAFE = {
    "world-writable": (0o777, None),
    "sticky-world-writable": (0o1777, None),
    "group-writable": (0o770, None),
    "group-write-only": (0o720, None),
    "other-write-only": (0o702, None),
    "group-readable": (0o750, None),
    "other-traversable": (0o701, None),
    "foreign-owner": (0o700, 65534),
}


@pytest.mark.parametrize(("mode", "owner"), list(UNSAFE.values()), ids=list(UNSAFE))
def test_refuses_an_unsafe_directory_and_touches_nothing(tmp_path: Path, mode: int, owner: int | None) -> None:
    directory = tmp_path / "run"
    directory.mkdir()
    stale_socket(directory / "ptyd.sock")
    # A manifest naming a live process: a daemon that went ahead would "recover" (kill) it.
    bystander = subprocess.Popen(["sleep", "1000"])
    try:
        manifest = {"daemon_pid": 1, "sessions": {"pty-x": {"pid": bystander.pid, "starttime": 0, "cgroup": None}}}
        (directory / "sessions.json").write_text(json.dumps(manifest))
        directory.chmod(mode)
        if owner is not None:
            os.chown(directory, owner, owner)
        before = snapshot(directory)
        proc = subprocess.run(
            [sys.executable, "-m", "ptyd", "--socket", str(directory / "ptyd.sock")],
            cwd=ROOT,
            capture_output=True,
            timeout=30,
        )
        assert proc.returncode == 1
        message = proc.stderr.decode()
        assert message.startswith(f"ptyd: refusing to use {directory}:"), message
        assert ("owned by uid 65534" if owner else "chmod 700") in message
        assert "Traceback" not in message
        assert snapshot(directory) == before
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


@pytest.mark.parametrize("kind", ["symlink-to-a-private-dir", "regular-file"])
def test_refuses_a_socket_directory_that_is_not_a_directory(tmp_path: Path, kind: str) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    directory = tmp_path / "run"
    if kind == "regular-file":
        directory.write_text("")
    else:
        directory.symlink_to(real)
    proc = subprocess.run(
        [sys.executable, "-m", "ptyd", "--socket", str(directory / "ptyd.sock")],
        cwd=ROOT,
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode != 0
    assert b"Traceback" not in proc.stderr, proc.stderr.decode()
    assert str(directory).encode() in proc.stderr
    assert list(real.iterdir()) == []


def test_no_token_or_input_text_is_ever_written_to_the_log(fresh_daemon: Daemon) -> None:
    """With debug logging on, every token, input, environment value and rejected secret stays out of the log."""
    fresh_daemon.start("--log-level", "debug")
    secrets_used: list[str] = []

    def secret(label: str) -> str:
        value = f"{label}-{secrets.token_hex(8)}"
        secrets_used.append(value)
        return value

    operator = (fresh_daemon.directory / "operator.token").read_text().strip()
    secrets_used.append(operator)
    with fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register", name="agent")["token"]
        secrets_used.append(token)
        shell = Shell(rpc, token, env={"PS1": "$ ", "API_KEY": secret("env")}, name="s")
        shell.send(f"echo {secret('input')}\n")
        shell.send(f"read -s pw\n{secret('password')}\n")
        shell.send(secret("unsubmitted"), timeout_ms=200)
        shell.send("\u0003")
        rpc.call("terminal_read", token=operator, session_id=shell.id)
        for bad in (secret("ptyd_wrong"), "x" * 200 + secret("long")):
            with pytest.raises(RpcError):
                rpc.call("terminal_list", token=bad)
        with pytest.raises(RpcError):
            rpc.call("terminal_send", token=token, session_id=shell.id, input=7, bogus=secret("field"))
        rpc.send_raw(
            f'{{"jsonrpc":"2.0","id":1,"method":"{secret("method")}","params":{{"token":"{token}"}}}}\n'.encode()
        )
        rpc.recv_line()
        rpc.send_raw(f"not json {secret('garbage')} {token}\n".encode())
        rpc.recv_line()
        shell.close()
        rpc.call("agent_release", token=token)
    assert fresh_daemon.stop() == 0
    log = fresh_daemon.log()
    assert "DEBUG" in log  # the daemon did log at debug level
    leaked = [s for s in secrets_used if s in log]
    assert leaked == [], f"secrets in the log: {leaked}"
    assert "ptyd_" not in log  # no token of any agent, by its prefix


def test_a_client_cannot_forge_log_lines(fresh_daemon: Daemon) -> None:
    """Client text that reaches the log (a close reason) must not start a line of its own."""
    fresh_daemon.start()
    watch = LogWatch(fresh_daemon)
    forged = "ptyd: ERROR ptyd.rpc: incident deadbeef in terminal_send"
    with fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register", name=f"n\n{forged}")["token"]
        for reason in (f"bye\n{forged}", f"bye\r\n{forged}", f"bye\r{forged}"):
            session = Shell(rpc, token, name=f"s\n{forged}")
            session.call("terminal_close", reason=reason)
    text = watch.text()
    assert log_problems(text) == []
    assert not any(line.startswith(forged) for line in text.replace("\r", "\n").splitlines())


def test_sigkilled_daemon_leaves_no_secret_on_disk(fresh_daemon: Daemon) -> None:
    """After a crash the directory holds only what the next daemon needs: no agent token, no input. Without the
    fd keeper, so that it holds no screen either (with it, sessions.json holds the screens adoption restores)."""
    fresh_daemon.config_path.write_text("fd_keeper = false\n")
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register")["token"]
        shell = Shell(rpc, token, env={"PS1": "$ "})
        mark = "typed-" + secrets.token_hex(6)
        shell.send(f"echo {mark}\n")
        pid = proc_id(shell.opened["pid"])
    fresh_daemon.stop(signal.SIGKILL)
    for path in fresh_daemon.directory.rglob("*"):  # the sessions' live records (records/) too
        if path.name in ("daemon.log", "config.toml") or path.is_socket() or path.is_dir():
            continue
        data = path.read_bytes()
        assert token.encode() not in data, path.name
        assert mark.encode() not in data, path.name
    assert pid is not None
    fresh_daemon.start()  # the next daemon ends the crashed one's session
    wait_until(lambda: still_running([pid]) == [], message="the crashed daemon's shell to be killed")
