"""Issue 29's send beside floods, side by side: ``python -m bench.profile_floods [--code DIR ...]``.

Each daemon under test (this tree's code, and any ``--code DIR``: another checkout, the reference) gets ``N``
idle shells and ``F`` of them printing ``seq inf``; the rounds alternate between the daemons (only one floods at
a time), and every round also times the same sends on a raw PTY of this process under the same load. What counts
is the ratio to that raw figure, never the milliseconds alone: the machine is shared. ``--pyspy OUT`` records the
last round of the first daemon (and its workers) with py-spy, for where each millisecond goes; ``--stalls DIR``
runs each daemon under ``bench/loop_stalls.py`` and prints where its loop held.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.client import connect
from bench.harness import percentile, register
from bench.loop_stalls import report
from bench.shells import PtydShell, RawShell

ROOT = Path(__file__).resolve().parent.parent
FLOOD = "seq inf"


class Daemon:
    def __init__(
        self, name: str, code: Path, directory: Path, process: str, extra: str = "", stalls: Path | None = None
    ) -> None:
        self.name = name
        directory.mkdir(mode=0o700)
        self.socket = directory / "ptyd.sock"
        config = directory / "config.toml"
        config.write_text(f'sandbox_default = "none"\nmax_sessions = 1024\nengine_process = "{process}"\n{extra}\n')
        env = {k: v for k, v in os.environ.items() if not k.startswith("PTYD_")}
        env["PYTHONPATH"] = os.pathsep.join([str(code), *filter(None, [os.environ.get("PYTHONPATH")])])
        argv = [sys.executable, "-m", "ptyd", "--socket", str(self.socket), "--config", str(config)]
        self.stalls = stalls
        if stalls is not None:
            argv[1:3] = [str(ROOT / "bench" / "loop_stalls.py"), str(stalls)]
        with open(directory / "daemon.log", "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=log, cwd=code, env=env)
        deadline = time.monotonic() + 30
        while True:
            try:
                self.caller = connect(self.socket)
                self.caller.call("daemon_info")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.token = register(self.caller, f"flood-{name}")
        self.shells: list[PtydShell] = []

    def open(self, n: int) -> None:
        self.shells = [PtydShell(self.caller, self.token) for _ in range(n)]

    def flood(self, count: int) -> None:
        for shell in self.shells[:count]:
            shell.send(FLOOD + "\n", wait=False)
        time.sleep(0.3)

    def stop_floods(self, count: int) -> None:
        for shell in self.shells[:count]:
            for _ in range(20):
                shell.call("terminal_cancel")
                if shell.call("terminal_wait", timeout_ms=1000)["done"]:
                    break

    def close(self) -> None:
        self.caller.close()
        self.proc.terminate()
        self.proc.wait(30)


def sends(shells: list[PtydShell] | list[RawShell], count: int) -> list[float]:
    out = []
    for i in range(count):
        shell = shells[i % len(shells)]
        start = time.perf_counter()
        shell.run("true", timeout=60)
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--code", action="append", default=[], help="another checkout to compare: name=DIR, or name=DIR=TOML (config)"
    )
    parser.add_argument("--process", default="worker")
    parser.add_argument("-n", type=int, default=10)
    parser.add_argument("-f", type=int, default=1, help="how many of them print")
    parser.add_argument("--sends", type=int, default=40, help="per round and daemon")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pyspy", type=Path)
    parser.add_argument("--stalls", type=Path, help="a directory: where each daemon's loop held")
    parser.add_argument("--quiet", action="store_true", help="no floods: the round trip")
    parser.add_argument("--without-this", action="store_true", help="only the --code checkouts")
    args = parser.parse_args()
    codes = [] if args.without_this else [("this", ROOT, "")]
    codes += [(c.split("=")[0], Path(c.split("=")[1]), "=".join(c.split("=")[2:])) for c in args.code]
    stats: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="ptyd-floods-") as tmp:
        daemons = []
        for name, code, extra in codes:
            for process in args.process.split(","):
                label = f"{name}/{process}"
                stalls = None if args.stalls is None else args.stalls / f"{label.replace('/', '-')}.stalls"
                daemons.append(Daemon(label, code, Path(tmp) / label.replace("/", "-"), process, extra, stalls))
        for d in daemons:
            d.open(args.n)
        raw = RawShell()
        try:
            for r in range(args.rounds):
                for i, d in enumerate(daemons):
                    floods = 0 if args.quiet else args.f
                    d.flood(floods)
                    spy = None
                    if args.pyspy and i == 0 and r == args.rounds - 1:
                        spy = subprocess.Popen(
                            [
                                "py-spy",
                                "record",
                                "-s",
                                "-r",
                                "500",
                                "-f",
                                "raw",
                                "-o",
                                str(args.pyspy),
                                "-p",
                                str(d.proc.pid),
                            ],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                        )
                        time.sleep(1.0)
                    idle = d.shells[floods:]
                    got, base = [], []
                    for _ in range(args.sends // 10):  # alternating: the raw PTY under the same load
                        got += sends(idle, 10)
                        base += sends([raw], 5)
                    if spy is not None:
                        spy.send_signal(2)
                        spy.wait(60)
                    d.stop_floods(floods)
                    stats.setdefault(d.name, []).extend(got)
                    stats.setdefault(f"raw beside {d.name}", []).extend(base)
        finally:
            raw.close()
            for d in daemons:
                d.close()
    load = os.getloadavg()[0]
    print(f"N={args.n} F={0 if args.quiet else args.f} load={load:.1f}")
    for d in daemons:
        own, ref = stats[d.name], stats[f"raw beside {d.name}"]
        med, p99 = percentile(own, 50) * 1000, percentile(own, 99) * 1000
        rmed, rp99 = percentile(ref, 50) * 1000, percentile(ref, 99) * 1000
        print(
            f"{d.name:16} median {med:6.2f} ms p99 {p99:6.2f} ms | raw median {rmed:5.2f} p99 {rp99:5.2f}"
            f" | x raw: median {med / rmed:5.1f} p99 {p99 / rp99:5.1f}"
        )
    for d in daemons:
        if d.stalls is not None and d.stalls.exists():
            print(f"\n{d.name}: " + report(d.stalls))


if __name__ == "__main__":
    main()
