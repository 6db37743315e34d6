"""`sandbox_network = "pasta"`: a `workspace` session gets a network namespace of its own (issue 27, attacks 2 and
10), through a real daemon, real bubblewrap and real pasta: the machine's loopback ports and abstract Unix sockets
are out of reach, the session has an interface and a default route, and pasta ends with the session.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Daemon, RpcError, Shell, pid_alive

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or shutil.which("pasta") is None, reason="bubblewrap or pasta is not installed"
)


@pytest.fixture
def listener() -> Iterator[int]:
    """An HTTP server on the machine's loopback, outside any sandbox."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "Serving HTTP on 127.0.0.1 port N (http://127.0.0.1:N/) ..."
    yield int(line.split(" port ")[1].split()[0])
    proc.terminate()
    proc.wait(10)
    proc.stdout.close()


@pytest.fixture
def abstract_socket() -> Iterator[str]:
    """A listening abstract Unix socket (as X11's and many a dev tool's), outside any sandbox."""
    name = f"ptyd-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind("\0" + name)
        sock.listen()
        yield name


def pastas_of(child: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if os.path.basename(argv[0]).startswith(b"pasta") and f"/proc/{child}/ns/net".encode() in argv:
                found.append(int(entry.name))
    return found


def test_a_workspace_session_with_its_own_network_cannot_reach_the_machines_loopback(
    fresh_daemon: Daemon, tmp_path: Path, listener: int, abstract_socket: str
) -> None:
    fresh_daemon.config_path.write_text(f'sandbox_network = "pasta"\nsandbox_scratch_dir = "{tmp_path / "scratch"}"\n')
    fresh_daemon.start()
    fetch = f"import urllib.request as u; print('got', u.urlopen('http://127.0.0.1:{listener}/', timeout=5).status)"
    connect = f"import socket; socket.socket(socket.AF_UNIX).connect('\\\\0{abstract_socket}'); print('connected')"
    with fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register", name="networked")["token"]
        plain = Shell(rpc, token, env={"PS1": "$ "})  # none: the machine's network, as before
        assert "got 200" in plain.send(f'python3 -c "{fetch}" 2>&1 | tail -1\n')["viewport"]
        assert "connected" in plain.send(f'python3 -c "{connect}" 2>&1 | tail -1\n')["viewport"]
        s = Shell(rpc, token, env={"PS1": "$ "}, sandbox="workspace")
        result = s.send(f'python3 -c "{fetch}" 2>&1 | tail -1\n')
        assert "Connection refused" in result["viewport"], result["viewport"]
        result = s.send(f'python3 -c "{connect}" 2>&1 | tail -1\n')
        assert "ConnectionRefusedError" in result["viewport"], result["viewport"]
        routes = s.send('awk \'$2 == "00000000" {print "default via", $1}\' /proc/net/route\n')["viewport"]
        assert "default via " in routes, routes  # an interface of its own, with a way out
        assert s.send("echo still a shell\n")["viewport"].splitlines()[-2] == "still a shell"
        bwrap = s.opened["pid"]
        inner = [int(pid) for pid in Path(f"/proc/{bwrap}/task/{bwrap}/children").read_text().split()]
        pastas = [pid for child in inner for pid in pastas_of(child)]
        assert len(pastas) == 1, pastas
        s.close()
        assert not pid_alive(pastas[0])  # ended with the session
        offline = Shell(rpc, token, env={"PS1": "$ "}, sandbox="workspace-offline")  # no network: no pasta
        result = offline.send(f'python3 -c "{fetch}" 2>&1 | tail -1\n')
        assert "Connection refused" in result["viewport"], result["viewport"]


def test_without_pasta_a_session_that_needs_it_is_refused(fresh_daemon: Daemon, tmp_path: Path) -> None:
    fresh_daemon.config_path.write_text(
        'sandbox_network = "pasta"\npasta_program = "/nonexistent/pasta"\n'
        f'sandbox_scratch_dir = "{tmp_path / "scratch"}"\n'
    )
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register", name="networked")["token"]
        with pytest.raises(RpcError) as refused:
            rpc.call("terminal_open", token=token, sandbox="workspace")
        assert getattr(refused.value, "kind", None) == "sandbox_unavailable"
        assert "pasta" in str(refused.value)
        assert rpc.call("terminal_open", token=token, sandbox="workspace-offline")["sandbox"] == "workspace-offline"


def test_a_pasta_that_fails_leaves_no_session_and_no_process(fresh_daemon: Daemon, tmp_path: Path) -> None:
    fresh_daemon.config_path.write_text(
        f'sandbox_network = "pasta"\npasta_program = "false"\nsandbox_scratch_dir = "{tmp_path / "scratch"}"\n'
    )
    fresh_daemon.start()
    assert fresh_daemon.proc is not None
    with fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register", name="networked")["token"]
        with pytest.raises(RpcError) as failed:
            rpc.call("terminal_open", token=token, sandbox="workspace")
        assert getattr(failed.value, "kind", None) == "spawn_failed"
        assert "pasta could not set up the sandbox's network" in str(failed.value)
        assert rpc.call("daemon_info")["sessions"] == 0
        daemon_fds = len(os.listdir(f"/proc/{fresh_daemon.proc.pid}/fd"))
        with pytest.raises(RpcError):
            rpc.call("terminal_open", token=token, sandbox="workspace")
        assert len(os.listdir(f"/proc/{fresh_daemon.proc.pid}/fd")) == daemon_fds  # nothing left open
        assert Shell(rpc, token, env={"PS1": "$ "}).send("echo fine\n")["viewport"].splitlines()[-2] == "fine"
