"""Load generator for scenario 5, run as its own process so the bench's interpreter is not in the way.

``python bench/load_client.py SOCKET FRAME_FILE CONNECTIONS SECONDS`` opens CONNECTIONS connections and keeps
exactly one request in flight on each (a caller that waits for each answer) for SECONDS, then prints one JSON
line ``{"answers": N, "errors": N, "seconds": S}``. FRAME_FILE holds one request line with ``%d`` where the id
goes; answers are counted by newline, not decoded, so the client costs as little as it can.
"""

from __future__ import annotations

import json
import selectors
import socket
import sys
import time


def main(path: str, template: bytes, connections: int, seconds: float) -> dict[str, float]:
    selector = selectors.DefaultSelector()
    socks = []
    for _ in range(connections):
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(path)
        sock.setblocking(False)
        socks.append(sock)
        selector.register(sock, selectors.EVENT_READ)
    socks_by_fd = {sock.fileno(): sock for sock in socks}
    answers = errors = 0
    next_id = 0
    start = time.monotonic()
    deadline = start + seconds
    for sock in socks:
        next_id += 1
        sock.sendall(template % next_id)
    while True:
        for key, _ in selector.select():
            sock = socks_by_fd[key.fd]
            data = sock.recv(1 << 16)
            if not data:
                raise ConnectionError("the server closed a connection")
            # One request in flight per connection, so a chunk ending in a newline is one whole answer.
            if data.endswith(b"\n"):
                answers += 1
                errors += b'"error"' in data
                if time.monotonic() < deadline:
                    next_id += 1
                    sock.sendall(template % next_id)
                else:
                    selector.unregister(sock)
                    socks.remove(sock)
                    sock.close()
        if not socks:
            break
    return {"answers": answers, "errors": errors, "seconds": time.monotonic() - start}


if __name__ == "__main__":
    socket_path, frame_file, count, duration = sys.argv[1:5]
    with open(frame_file, "rb") as f:
        frame = f.read().strip() + b"\n"
    print(json.dumps(main(socket_path, frame, int(count), float(duration))))
