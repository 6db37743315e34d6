"""A pipelining load client, run as its own process so that the test's interpreter is not the bottleneck.

``python pipeline_client.py SOCKET TOKEN SESSION_ID COUNT WINDOW`` sends COUNT requests on one connection,
WINDOW at a time (one write), alternating daemon_info and terminal_status, and prints one JSON line:
``{"answers": N, "errors": N, "seconds": S, "first_error": "..."}``. Answers are counted by newline and
checked for an error member, without decoding every one, so the client can outpace the daemon.
"""

from __future__ import annotations

import json
import socket
import sys
import time


def main(path: str, token: str, session_id: str, count: int, window: int) -> dict[str, object]:
    info = b'{"jsonrpc":"2.0","id":%d,"method":"daemon_info"}\n'
    status = (
        b'{"jsonrpc":"2.0","id":%d,"method":"terminal_status","params":'
        + json.dumps({"token": token, "session_id": session_id}).encode()
        + b"}\n"
    )
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(path)
    answers = errors = 0
    first_error = ""
    buffer = b""
    start = time.monotonic()
    sent = 0
    while sent < count:
        n = min(window, count - sent)
        sock.sendall(b"".join((status if (sent + i) % 2 else info) % (sent + i) for i in range(n)))
        sent += n
        expected = answers + n
        while answers < expected:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the daemon closed the connection")
            buffer += chunk
            complete, _, buffer = buffer.rpartition(b"\n")
            if complete:
                answers += complete.count(b"\n") + 1
                if b'"error"' in complete:
                    errors += complete.count(b'"error"')
                    first_error = first_error or complete[complete.find(b'"error"') - 200 :][:400].decode()
    sock.close()
    return {"answers": answers, "errors": errors, "seconds": time.monotonic() - start, "first_error": first_error}


if __name__ == "__main__":
    socket_path, tok, sid, total, per_write = sys.argv[1:6]
    print(json.dumps(main(socket_path, tok, sid, int(total), int(per_write))))
