"""A crowd of connections from one process, run as a process of its own so that several crowds are several peers.

``python crowd_client.py SOCKET COUNT burst`` prints ``{"ready": true}``, waits for a line on stdin, then
connects COUNT non-blocking sockets as fast as it can (a refusal, EAGAIN from a full listen backlog, is counted
and not retried), asks daemon_info on each and prints ``{"connected": N, "refused": N, "served": N}``.

``python crowd_client.py SOCKET COUNT hold`` connects COUNT sockets (blocking: each waits in the backlog if need
be), prints ``{"held": N}`` and then, for each line read on stdin, ``{"open": N}``: how many the daemon has not
closed yet. It ends at the end of stdin.
"""

from __future__ import annotations

import errno
import json
import resource
import select
import socket
import sys

INFO = b'{"jsonrpc":"2.0","id":1,"method":"daemon_info"}\n'


def burst(path: str, count: int) -> dict[str, int]:
    print(json.dumps({"ready": True}), flush=True)
    sys.stdin.readline()
    connected: list[socket.socket] = []
    refused = 0
    for _ in range(count):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
        try:
            sock.connect(path)  # a Unix socket connects at once or not at all: no EINPROGRESS
        except OSError as exc:
            sock.close()
            if exc.errno != errno.EAGAIN:
                raise
            refused += 1
            continue
        connected.append(sock)
    served = 0
    for sock in connected:
        sock.setblocking(True)
        sock.settimeout(60)
        try:
            sock.sendall(INFO)
            answer = b""
            while not answer.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
            served += b'"result"' in answer
        except OSError:
            pass
        sock.close()
    return {"connected": len(connected), "refused": refused, "served": served}


def still_open(sock: socket.socket) -> bool:
    poller = select.poll()  # not select(): a crowd's fds pass FD_SETSIZE (1024)
    poller.register(sock, select.POLLIN)
    if not poller.poll(0):
        return True
    try:
        return bool(sock.recv(65536, socket.MSG_PEEK))
    except OSError:
        return False


def hold(path: str, count: int) -> None:
    held = []
    for _ in range(count):
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(path)
        held.append(sock)
    print(json.dumps({"held": len(held)}), flush=True)
    for _ in sys.stdin:
        print(json.dumps({"open": sum(still_open(sock) for sock in held)}), flush=True)
    for sock in held:
        sock.close()


if __name__ == "__main__":
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # a crowd may be past the usual soft 1024
    socket_path, total, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if mode == "burst":
        print(json.dumps(burst(socket_path, total)), flush=True)
    else:
        hold(socket_path, total)
