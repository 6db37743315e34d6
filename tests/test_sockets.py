"""In-process tests of what sock_diag is asked: which sockets in a wait set lead out of the program (relay
detection), and which TCP sockets a session's processes listen on (results' ``listening``)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ptyd import loopback
from ptyd.backends.os import sock_diag
from ptyd.backends.readiness import sockets
from ptyd.backends.session import listening


def _link(sock: socket.socket) -> str:
    return os.readlink(f"/proc/self/fd/{sock.fileno()}")


def test_a_socket_pair_held_by_one_process_leads_nowhere() -> None:
    a, b = socket.socketpair()  # asyncio's self-pipe is one
    with a, b:
        assert sockets.unix_peer(sockets.socket_inode(_link(a)) or 0, os.getpid()) == sockets.socket_inode(_link(b))
        assert sockets.leads_out(os.getpid(), _link(a)) is False


def test_a_unix_connection_to_another_process_leads_out(tmp_path: Path) -> None:
    path = tmp_path / "peer.sock"
    server = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(); "
            "print(flush=True); c, _ = s.accept(); c.recv(1)",
            str(path),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert server.stdout is not None
        server.stdout.readline()  # listening
        with socket.socket(socket.AF_UNIX) as client:  # docker exec's connection to dockerd is one
            client.connect(str(path))
            assert sockets.unix_peer(sockets.socket_inode(_link(client)) or 0, os.getpid()) is not None
            assert sockets.leads_out(os.getpid(), _link(client)) is True
            client.send(b"x")
    finally:
        server.wait(timeout=10)
        if server.stdout is not None:
            server.stdout.close()


def test_network_sockets_and_unknown_links_lead_out() -> None:
    with socket.socket() as tcp:  # ssh's connection is one
        assert sockets.leads_out(os.getpid(), _link(tcp)) is True
    assert sockets.socket_inode("pipe:[12]") is None
    assert sockets.leads_out(os.getpid(), "socket:[notanumber]") is True


@contextlib.contextmanager
def _holder(program: str, *, own_network: bool = False) -> Iterator[tuple[int, list[int]]]:
    """Python running ``program`` (in a network namespace of its own: bwrap's, as a sandboxed session's), until the
    block ends: its pid and the numbers it printed first."""
    bwrap = ["bwrap", "--unshare-user", "--unshare-net", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    command = [*(bwrap if own_network else []), sys.executable, "-c", program]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as holder:
        try:
            assert holder.stdout is not None
            printed = list(map(int, holder.stdout.readline().split()))
            pid = holder.pid
            if own_network:
                pid = next(p for p in _descendants(holder.pid) if _comm(p).startswith("python"))
                assert os.stat(f"/proc/{pid}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino
            yield pid, printed
        finally:
            holder.kill()


def test_a_socket_pair_is_asked_of_the_network_namespace_its_holder_is_in() -> None:
    # A sandboxed session has pasta's namespace: asked in the daemon's, its event loop's wake-up pair had no peer,
    # and every asyncio REPL there was taken for a relay.
    program = (
        "import socket, sys, time; a, b = socket.socketpair(); s = socket.socket(socket.AF_UNIX); "
        "s.bind('\\0ptyd-test-ns'); s.listen(); c = socket.socket(socket.AF_UNIX); c.connect('\\0ptyd-test-ns'); "
        "d, _ = s.accept(); print(a.fileno(), c.fileno(), flush=True); sys.stdin.read()"
    )
    with _holder(program, own_network=True) as (pid, (pair, connection)):
        assert sockets.leads_out(pid, os.readlink(f"/proc/{pid}/fd/{pair}")) is False
        assert sockets.leads_out(pid, os.readlink(f"/proc/{pid}/fd/{connection}")) is False  # both ends its own


def _listener(*, connected: bool) -> str:
    """A program listening on a TCP port of each family (and ``connected`` to the first); it prints both ports."""
    connect = "c = socket.create_connection(s4.getsockname()); d, _ = s4.accept(); " if connected else ""
    return (
        "import socket, sys; a, b = socket.socketpair(); s4 = socket.socket(); s4.bind(('127.0.0.1', 0)); "
        "s4.listen(); s6 = socket.socket(socket.AF_INET6); s6.bind(('::1', 0)); s6.listen(); "
        f"{connect}print(s4.getsockname()[1], s6.getsockname()[1], flush=True); sys.stdin.read()"
    )


def test_listening_ports_are_asked_of_sock_diag_and_agree_with_proc() -> None:
    # /proc/PID/net/tcp walks the kernel's whole connection table at each read (4-5 ms a table here): a result of
    # any session holding a socket paid it. The dump of listening sockets says the same, connections left out.
    with _holder(_listener(connected=True)) as (pid, (v4, v6)):
        asked = sock_diag.tcp_listeners(pid)
        assert asked is not None
        assert asked == listening._listening_in_proc(pid)
        ports = {(port.address, port.port) for port in listening.listening([pid])}
        assert ports == {("127.0.0.1", v4), ("::1", v6)}  # not the connection's ends


def test_listening_ports_are_asked_in_the_holders_network_namespace() -> None:
    with _holder(_listener(connected=False), own_network=True) as (pid, (v4, v6)):
        asked = sock_diag.tcp_listeners(pid)
        assert asked is not None
        assert sorted(asked.values()) == sorted([("127.0.0.1", v4), ("::1", v6)])  # its own, not the daemon's


def _descendants(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        for child in map(int, Path(f"/proc/{pid}/task/{task}/children").read_text().split()):
            found += [child, *_descendants(child)]
    return found


def _comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


def test_a_loopback_connections_owner_is_asked_by_its_addresses_and_agrees_with_proc() -> None:
    # ptyd-mcp's and `ptyd web`'s loopback port serve only their own user: each connection's owner was read from
    # /proc/net/tcp (a walk of every connection bucket, 4-5 ms here); sock_diag finds the one socket.
    with socket.create_server(("127.0.0.1", 0)) as server:
        with socket.create_connection(server.getsockname()) as client:
            conn, _ = server.accept()
            with conn:
                ends = client.getsockname(), server.getsockname()
                assert sock_diag.tcp_owner(*ends) == os.getuid()
                assert loopback.owner_in_proc(*ends) == os.getuid()
        assert sock_diag.tcp_owner(("127.0.0.1", 1), server.getsockname()) is None  # no such connection
        assert sock_diag.tcp_owner(("not an address", 1), server.getsockname()) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="a connection of another uid needs root to make")
def test_a_loopback_connection_of_another_user_is_theirs() -> None:
    nobody = 65534
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with subprocess.Popen(
            ["/usr/bin/python3", "-c", f"import socket, sys; c = socket.create_connection(('127.0.0.1', {port})); "
             "print(c.getsockname()[1], flush=True); sys.stdin.read()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, user=nobody, cwd="/",
        ) as other:  # fmt: skip
            assert other.stdout is not None
            their_port = int(other.stdout.readline())
            assert sock_diag.tcp_owner(("127.0.0.1", their_port), ("127.0.0.1", port)) == nobody
            assert loopback.peer_uid(("127.0.0.1", their_port), ("127.0.0.1", port)) == nobody
            other.kill()
