"""CPU per MB of one output through ptyd, the daemon's and its workers' apart:
``python -m bench.output_cpu FILE|seq:K [--process worker|daemon] [--reps 3] [--profile OUT]``.

A daemon of its own (this checkout's code: to compare two, run each checkout's copy in turn, alternating) gets one
shell, which ``cat``s ``FILE`` ``--reps`` times (``seq:K``: runs ``seq 1 K``, figure 3's program, which writes a
line at a time); each run prints its MB/s and the CPU the daemon and its engine workers spent per MB, once the
workers have started (``harness.settle_workers``). ``--profile OUT`` runs the daemon under cProfile in CPU
time (``bench/profile_daemon.py``). Corpora: any file (``bench/rendering.py``'s ``CORPORA`` writes the rich ones).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench.harness import DaemonProcess, cpu_seconds, engine_workers, private_dir
from bench.shells import PtydShell
from bench.throughput import seq_bytes


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.output_cpu", description=__doc__.splitlines()[0])
    parser.add_argument("file", help="a file to cat, or seq:K")
    parser.add_argument("--process", choices=("worker", "daemon"), default="worker")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--profile", type=Path, help="write the daemon's cProfile (CPU time) here")
    args = parser.parse_args()
    if args.file.startswith("seq:"):
        count = int(args.file.removeprefix("seq:"))
        command, size = f"seq 1 {count}", seq_bytes(count) / 1e6
    else:
        command, size = f"cat {Path(args.file).resolve()}", Path(args.file).stat().st_size / 1e6
    with private_dir() as directory:
        daemon = DaemonProcess(directory, f'engine_process = "{args.process}"\n', profile=args.profile)
        daemon.start()
        try:
            caller = daemon.connect()
            shell = PtydShell(caller, caller.call("agent_register", name="output-cpu")["token"])
            shell.run("true", timeout=120)
            for _ in range(args.reps):
                workers = engine_workers(daemon.pid)
                own, theirs = cpu_seconds(daemon.pid), sum(map(cpu_seconds, workers))
                start = time.perf_counter()
                shell.run(command, timeout=600)
                wall = time.perf_counter() - start
                own = cpu_seconds(daemon.pid) - own
                theirs = sum(map(cpu_seconds, engine_workers(daemon.pid))) - theirs
                print(
                    f"{args.process}: {size / wall:.1f} MB/s, daemon {1000 * own / size:.0f} CPU ms/MB, "
                    f"workers {1000 * theirs / size:.0f} CPU ms/MB",
                    flush=True,
                )
        finally:
            daemon.stop()
    sys.exit(0)


if __name__ == "__main__":
    main()
