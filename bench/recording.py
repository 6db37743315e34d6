"""Scenario 6, recording: does recording sessions slow the sends beside floods?

One daemon, two agents of 50 shells each: the config records every session of one agent ("recorded") and none
of the other's. In alternating rounds, 5 shells of one agent print without pause (10%, as in scenario 4) while
`true` is sent to that agent's idle shells; the recorded rounds write every byte of the floods to asciicast files
through the writer thread. Same daemon, same load, same moment of the run: the p99 ratio is the recording's cost.
"""

from __future__ import annotations

import json
import time

from bench.harness import Context, DaemonProcess, register
from bench.report import Figure, Results
from bench.scale import FLOOD, _sends, _stop
from bench.shells import PtydShell

SESSIONS = 50  # per agent
FLOODERS = 5


def run(ctx: Context, results: Results) -> None:
    rounds, sends = (2, 20) if ctx.quick else (8, 40)
    directory = ctx.directory / "recording"
    directory.mkdir()
    directory.chmod(0o700)
    recordings = directory / "recordings"
    config = (
        f'max_sessions = 1024\nmax_sessions_per_agent = 1000\nrecord_agents = ["recorded"]\n'
        f'recording_dir = "{recordings}"\n'
    )
    daemon = DaemonProcess(directory, config)
    daemon.start()
    caller = daemon.connect()
    samples: dict[str, list[float]] = {"recorded": [], "plain": []}
    halves: list[list[float]] = [[], []]  # the unrecorded rounds, odd and even: the noise of this machine now
    try:
        shells = {}
        for name in samples:
            token = register(caller, name)
            shells[name] = [PtydShell(caller, token) for _ in range(SESSIONS)]
        recorded_now = shells["recorded"][0].call("terminal_status")["recording"]
        if not recorded_now or shells["plain"][0].call("terminal_status")["recording"]:
            results.failures.append("recording: the config did not record exactly the 'recorded' agent's sessions")
        for number in range(rounds):
            order = list(shells.items()) if number % 2 == 0 else list(shells.items())[::-1]
            for name, group in order:
                flooders, idle = group[:FLOODERS], group[FLOODERS:]
                for shell in flooders:
                    shell.send(FLOOD + "\n", wait=False)
                lines = flooders[0].call("terminal_status")["total_lines"]
                deadline = time.monotonic() + 10
                while flooders[0].call("terminal_status")["total_lines"] < lines + 2000:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.01)
                taken = _sends(idle, sends, 20.0)
                samples[name] += taken
                if name == "plain":
                    halves[number % 2] += taken
                for shell in flooders:
                    _stop(shell, results)
        figure = Figure(
            f"6. Recording: send `true` beside {FLOODERS} floods, {SESSIONS} sessions recorded or not",
            "ms",
            "not recorded",
            show_p99=True,
        )
        plain = figure.add("not recorded", samples["plain"], f"{rounds} rounds, alternating", scale=1000)
        recorded = figure.add("recorded", samples["recorded"], "every byte to asciicast files", scale=1000)
        ratio = recorded.p99 / plain.p99
        recorded.note += f"; p99 {ratio:.2f}x not recorded"
        files = sorted(recordings.glob("*.cast"))
        written = sum(f.stat().st_size for f in files)
        dropped = sum(1 for f in files for line in f.open() if line.startswith("[") and json.loads(line)[1] == "m")
        recorded.note += f"; {written / 1e6:.0f} MB in {len(files)} files, {dropped} drop markers"
        odd = figure.add("not recorded, even rounds", halves[0], "against the odd ones: noise", scale=1000)
        even = figure.add("not recorded, odd rounds", halves[1], "", scale=1000)
        odd.note += f"; p99 {odd.p99 / even.p99:.2f}x the odd rounds'"
        results.figures.append(figure.finish())
        results.target("send p99 beside floods, recorded / not", "<= 1.10", f"{ratio:.2f}", ratio <= 1.10)
    finally:
        caller.close()
        code = daemon.stop()
        if code != 0:
            results.failures.append(f"recording daemon exited with {code}")
