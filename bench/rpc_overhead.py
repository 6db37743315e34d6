"""Scenario 5, RPC overhead: ``terminal_status`` calls per second, on 1 and on 16 connections, against a bare
msgspec echo on the same kind of socket (bench/echo_server.py, the dispatch ceiling).

The load comes from bench/load_client.py, a separate process with one request in flight per connection. Client
and server share the machine's cores, so the server's own CPU time per call (from /proc) is reported too: it is
the figure that does not depend on how fast the client is.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.harness import Context, cpu_seconds, register, rotated
from bench.report import Figure, Results
from bench.shells import PtydShell

HERE = Path(__file__).resolve().parent


def _frame(method: str, params: dict[str, str] | None) -> bytes:
    body = b"" if params is None else b',"params":' + json.dumps(params, separators=(",", ":")).encode()
    return b'{"jsonrpc":"2.0","id":%d,"method":"' + method.encode() + b'"' + body.replace(b"%", b"%%") + b"}"


def _load(socket: Path, frame_file: Path, connections: int, seconds: float) -> dict[str, float]:
    argv = [sys.executable, str(HERE / "load_client.py"), str(socket), str(frame_file), str(connections), str(seconds)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=seconds + 60)
    result: dict[str, float] = json.loads(done.stdout)
    return result


def run(ctx: Context, results: Results) -> None:
    rounds, seconds = (1, 0.5) if ctx.quick else (5, 1.0)
    caller = ctx.daemon.connect()
    echo_socket = ctx.directory / "echo.sock"
    echo = subprocess.Popen(
        [sys.executable, str(HERE / "echo_server.py"), str(echo_socket)], stdout=subprocess.PIPE, text=True
    )
    shell = full = None
    try:
        assert echo.stdout is not None
        if echo.stdout.readline().strip() != "ready":
            raise RuntimeError("the echo server did not start")
        token = register(caller, "bench-rpc")
        shell = PtydShell(caller, token)
        # The same call on a screen whose 40 rows all hold text: what rendering the screen per call costs.
        full = PtydShell(caller, token)
        full.run("seq -f '%0150.0f' 1 60")
        status = _frame("terminal_status", {"token": token, "session_id": shell.id})
        status_full = _frame("terminal_status", {"token": token, "session_id": full.id})
        info = _frame("daemon_info", None)
        files = {}
        for name, frame in (("status", status), ("status_full", status_full), ("info", info)):
            files[name] = ctx.directory / f"{name}.frame"
            files[name].write_bytes(frame)
        subjects = [
            ("bare echo", echo_socket, files["status"], echo.pid),
            ("ptyd terminal_status", ctx.daemon.socket, files["status"], ctx.daemon.pid),
            ("ptyd terminal_status, full screen", ctx.daemon.socket, files["status_full"], ctx.daemon.pid),
            ("ptyd daemon_info", ctx.daemon.socket, files["info"], ctx.daemon.pid),
        ]
        for connections in (1, 16):
            rates: dict[str, list[float]] = {s[0]: [] for s in subjects}
            cpu_per_call: dict[str, list[float]] = {s[0]: [] for s in subjects}
            for r in range(rounds):
                for name, sock, frame_file, pid in rotated(subjects, r):
                    cpu = cpu_seconds(pid)
                    got = _load(sock, frame_file, connections, seconds)
                    if got["errors"]:
                        results.failures.append(f"rpc: {name} answered {got['errors']:.0f} errors")
                    rates[name].append(got["answers"] / got["seconds"])
                    cpu_per_call[name].append((cpu_seconds(pid) - cpu) / max(got["answers"], 1))
            figure = Figure(
                f"5. RPC: calls/s on {connections} connection{'s' if connections > 1 else ''}, one in flight each",
                "calls/s",
                reference="bare echo",
                higher_is_better=True,
            )
            echo_cpu = sorted(cpu_per_call["bare echo"])[len(cpu_per_call["bare echo"]) // 2]
            for name, values in rates.items():
                server_cpu = sorted(cpu_per_call[name])[len(cpu_per_call[name]) // 2]
                note = f"server {server_cpu * 1e6:.0f} us CPU/call ({server_cpu / echo_cpu:.1f}x echo)"
                figure.add(name, values, note)
            figure.unavailable("raw, tmux, fixed_wait", "no RPC layer to compare")
            results.figures.append(figure.finish())
            ratio = figure.row("ptyd terminal_status").ratio or 0.0
            results.target(
                f"terminal_status rate, {connections} conn., vs bare echo", ">= 0.5x", f"{ratio:.2f}x", ratio >= 0.5
            )
    finally:
        echo.terminate()
        echo.wait(10)
        for session in (shell, full):
            if session is not None:
                session.close()
        caller.close()
