"""In-process tests of the socket check behind relay detection: which sockets in a wait set lead out of the program."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from ptyd.backends.readiness import sockets


def _link(sock: socket.socket) -> str:
    return os.readlink(f"/proc/self/fd/{sock.fileno()}")


def test_a_socket_pair_held_by_one_process_leads_nowhere() -> None:
    a, b = socket.socketpair()  # asyncio's self-pipe is one
    with a, b:
        assert sockets.unix_peer(sockets.socket_inode(_link(a)) or 0) == sockets.socket_inode(_link(b))
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
            assert sockets.unix_peer(sockets.socket_inode(_link(client)) or 0) is not None
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
