"""Where the milliseconds of one send go: ``python -m bench.trace_send [--process worker,daemon] [-n 200]
[--floods F]`` (F other sessions printing ``seq inf`` meanwhile: their stamps are left out of the phases).

A daemon of its own runs with a few of its methods wrapped (nothing of ptyd changes) to stamp
``time.perf_counter_ns`` (CLOCK_MONOTONIC, the same clock in every process) as a send of ``true`` to bash passes:
the request in, its input written, each read of the PTY, each acknowledgement of the engine worker, each readiness
check and its verdict, the drain before a wait counts, the result built, the reply written. The client stamps its
call too. The table gives each phase's median and p90 over the sends. Beside it: how much of the sends' time the
daemon was runnable but waited for a CPU (schedstat), and how long its loop spent in PTY reads (every session's,
the floods' too) against the CPU those took: the difference is the daemon preempted inside them.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _daemon(out: str, args: list[str]) -> None:
    """Run ptyd with the stamps; write them to ``out`` on exit."""
    from ptyd.backends.os.channel import PtyChannel
    from ptyd.backends.readiness.tracker import ReadinessTracker
    from ptyd.backends.session import send_driver
    from ptyd.backends.session.send_driver import SendDriver
    from ptyd.backends.session.send_loop import SendLoop
    from ptyd.cli import main as ptyd_main
    from ptyd.rpc.server import RpcServer

    stamps: list[tuple[str, int, int]] = []  # (label, time, the session's channel id or 0: the daemon's own)
    reads: list[tuple[int, int, int]] = []  # each wake-up of a session's reader: (its end, its wall, its CPU) in ns
    now = time.perf_counter_ns
    # Whose session a stamp is of (beside floods, only the send's own count): its channel's id.
    channel_of: dict[Any, Any] = {
        PtyChannel: id,
        SendDriver: lambda self: id(self.channel),
        SendLoop: lambda self: id(self.channel),
        ReadinessTracker: lambda self: id(self._evidence._output),
    }

    def wrap(cls: Any, name: str, label: str, after: str | None = None) -> None:
        fn = getattr(cls, name)
        key = channel_of.get(cls)

        def wrapper(*a: Any, **k: Any) -> Any:
            who = key(a[0]) if key is not None else 0
            stamps.append((label, now(), who))
            result = fn(*a, **k)
            if after is not None:
                extra = ""
                if label == "check":
                    extra = "+" if result.ready else "-"
                stamps.append((after + extra, now(), who))
            return result

        setattr(cls, name, wrapper)

    def wrap_async(cls: Any, name: str, label: str, after: str) -> None:
        fn = getattr(cls, name)
        key = channel_of.get(cls)

        async def wrapper(*a: Any, **k: Any) -> Any:
            who = key(a[0]) if key is not None else 0
            stamps.append((label, now(), who))
            result = await fn(*a, **k)
            stamps.append((after, now(), who))
            return result

        setattr(cls, name, wrapper)

    wrap(SendDriver, "start", "start")
    wrap(PtyChannel, "write", "write")
    wrap(PtyChannel, "_on_readable", "read", "read_end")
    # The loop's time in every session's reads, the floods' too, against the CPU they took: the rest is the
    # daemon preempted inside them (a read that frees the PTY's buffer wakes its writer and the kernel's worker).
    on_readable = PtyChannel._on_readable

    def timed_read(self: Any, *a: Any, **k: Any) -> Any:
        wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
        try:
            return on_readable(self, *a, **k)
        finally:
            end = time.perf_counter_ns()
            reads.append((end, end - wall, time.thread_time_ns() - cpu))

    PtyChannel._on_readable = timed_read  # type: ignore[method-assign]
    wrap(PtyChannel, "_progressed", "ack")
    wrap(PtyChannel, "_render", "render")
    wrap_async(SendLoop, "_let_engine_start", "turn", "turn_end")
    wrap_async(SendLoop, "wait_ready", "wait_ready", "wait_ready_end")
    from ptyd.terminal.workers.link import WorkerLink

    wrap(WorkerLink, "_flush", "to_worker")
    wrap(SendLoop, "wake", "wake")
    wrap(ReadinessTracker, "check", "check", "verdict")
    wrap_async(SendLoop, "_nothing_owed", "owed", "owed_end")
    wrap_async(SendDriver, "_settle", "settle", "settled")
    # Where the result's process facts are read: in the send driver (before them: its own listening call).
    try:
        from ptyd.backends.session import facts as holder
    except ImportError:
        holder = send_driver
    listening = holder.listening  # type: ignore[attr-defined]

    def stamped_listening(pids: Any) -> Any:
        stamps.append(("listening", now(), 0))
        try:
            return listening(pids)
        finally:
            stamps.append(("listening_end", now(), 0))

    holder.listening = stamped_listening  # type: ignore[attr-defined]
    wrap_async(RpcServer, "_handle", "request", "replied")
    if os.environ.get("TRACE_PARTS"):
        from ptyd.backends.readiness.foreground import ForegroundGroup
        from ptyd.backends.readiness.live import LiveEvidence
        from ptyd.backends.session import send as send_module
        from ptyd.backends.session.session import LocalSession

        for cls, name in [
            (ForegroundGroup, "describe"),
            (ForegroundGroup, "candidates"),
            (LiveEvidence, "target"),
            (ReadinessTracker, "password_prompt"),
            (ReadinessTracker, "begin"),
            (LocalSession, "members"),
            (LocalSession, "limit_counters"),
            (PtyChannel, "input_queued"),
            (LiveEvidence, "rchar"),
            (LiveEvidence, "run_counts"),
        ]:
            wrap(cls, name, f"{cls.__name__}.{name}", f"{cls.__name__}.{name}_end")
        for name in ("viewport", "line_text"):
            module = send_module if name == "viewport" else send_driver
            fn = getattr(module, name)

            def timed(*a: Any, _fn: Any = fn, _name: str = name, **k: Any) -> Any:
                stamps.append((_name, now(), 0))
                try:
                    return _fn(*a, **k)
                finally:
                    stamps.append((_name + "_end", now(), 0))

            setattr(send_driver, name, timed)

    def dump(*_: Any) -> None:
        Path(out + ".part").write_text(json.dumps({"stamps": stamps, "reads": reads}))
        Path(out + ".part").rename(out)

    signal.signal(signal.SIGUSR1, dump)
    ptyd_main(args)


def _cpu_s(pid: int) -> float:
    """User and system CPU time of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _run_delay_s(pid: int) -> float:
    """Seconds the main thread of ``pid`` has waited on a run queue, runnable but not running (schedstat)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9


def _workers(pid: int) -> list[int]:
    """The daemon's engine workers (its children running ``ptyd.terminal.workers.main``)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            if b"ptyd.terminal.workers.main" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(int(child))
    return found


def _ms(a: int | None, b: int | None) -> float:
    return float("nan") if a is None or b is None else (b - a) / 1e6


def _parts(inside: list[tuple[str, int]]) -> dict[str, float]:
    """With TRACE_PARTS: the time spent in each wrapped call during the send, in ms."""
    spent: dict[str, float] = {}
    opened: dict[str, int] = {}
    for label, t in inside:
        name = label.removesuffix("_end")
        if label.endswith("_end") and name in opened and ("." in name or name in ("viewport", "line_text")):
            spent["  in " + name] = spent.get("  in " + name, 0.0) + (t - opened.pop(name)) / 1e6
        else:
            opened[label] = t
    return spent


def _phases(
    stamps: list[tuple[str, int, int]], calls: list[tuple[int, int]], dump: bool = False
) -> list[dict[str, float]]:
    """Per send (a client call's window), each phase in ms: the daemon's own stamps and those of the session whose
    input was written in the window (beside floods, theirs are left out)."""
    rows = []
    for start, end in calls:
        window = [(label, t, who) for label, t, who in stamps if start <= t <= end]
        mine = next((who for label, _, who in window if label == "write"), 0)
        inside = [(label, t) for label, t, who in window if who in (0, mine)]
        first: dict[str, int] = {}
        for label, t in inside:
            first.setdefault(label, t)
        wrote = first.get("write")
        if wrote is None or "settled" not in first:
            continue
        after = [(label, t) for label, t in inside if t > wrote]
        read = next((t for label, t in after if label == "read"), None)
        fed = next((t for label, t in after if label == "to_worker"), None)
        acks = [t for label, t in after if label == "ack"]
        ready = next((t for label, t in after if label == "verdict+"), None)
        row = {
            "client -> request": _ms(start, first.get("request")),
            "request -> input written": _ms(first.get("request"), wrote),
            "written -> output read": _ms(wrote, read),
            "output read -> sent to worker": _ms(read, fed),
            "sent to worker -> last ack": _ms(fed, acks[-1] if acks else None),
            "written -> ready verdict": _ms(wrote, ready),
            "ready verdict -> drain done": _ms(ready, first.get("owed_end")),
            "result built (settle)": _ms(first.get("settle"), first.get("settled")),
            "settled -> client": _ms(first.get("settled"), end),
            "total": _ms(start, end),
            "checks (count)": sum(1 for label, _ in after if label.startswith("verdict")),
            "acks (count)": len(acks),
        }
        row.update(_parts(inside))
        rows.append(row)
        if dump:
            print(f"total {row['total']:.3f}: " + " ".join(f"{label}@{(t - start) / 1e6:.3f}" for label, t in inside))
    return rows


@dataclass
class Traced:
    rows: list[dict[str, float]]  # per send: each phase in ms (``_phases``)
    daemon_ms: float  # CPU per send, the daemon's...
    workers_ms: float  # ...and its engine workers' (a spare's start counts too)
    queued: float  # the share of the sends' time the daemon was runnable and waited for a CPU
    in_reads: tuple[float, float]  # the loop's time in PTY reads per send, wall and CPU, in ms


def trace(
    process: str, n: int, floods: int = 0, code: Path = ROOT, dump: bool = False, command: str = "true"
) -> Traced:
    """``n`` sends of ``command`` to bash in a stamped daemon of its own running ``code``, beside ``floods`` other
    sessions printing ``seq inf``."""
    from bench.client import connect
    from bench.harness import register, settle_workers
    from bench.shells import PtydShell

    with tempfile.TemporaryDirectory(prefix="ptyd-trace-") as tmp:
        socket, config, out = Path(tmp) / "ptyd.sock", Path(tmp) / "config.toml", Path(tmp) / "stamps.json"
        config.write_text(f'sandbox_default = "none"\nengine_process = "{process}"\n')
        env = {k: v for k, v in os.environ.items() if not k.startswith("PTYD_")}
        env["PYTHONPATH"] = os.pathsep.join([str(code), str(ROOT)])
        argv = [sys.executable, str(Path(__file__)), "--daemon", str(out), "--socket", str(socket)]
        argv += ["--config", str(config)]
        with open(Path(tmp) / "daemon.log", "ab") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=log, cwd=code, env=env)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    caller = connect(socket)
                    caller.call("daemon_info")
                    break
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise
                    time.sleep(0.05)
            if process == "worker":
                settle_workers(proc.pid)  # the quiet sends are not timed beside the workers' start
            token = register(caller, "trace")
            shell = PtydShell(caller, token)
            for _ in range(10):
                shell.run("true")
            for flood in [PtydShell(caller, token) for _ in range(floods)]:
                flood.send("seq inf\n", wait=False)
            calls = []
            workers = _workers(proc.pid)
            cpu = [_cpu_s(pid) for pid in (proc.pid, *workers)]
            queued, began = _run_delay_s(proc.pid), time.monotonic()
            for _ in range(n):
                start = time.perf_counter_ns()
                shell.run(command, timeout=120)
                calls.append((start, time.perf_counter_ns()))
            spent = [_cpu_s(pid) - before for pid, before in zip((proc.pid, *workers), cpu, strict=True)]
            queued_share = (_run_delay_s(proc.pid) - queued) / (time.monotonic() - began)
            proc.send_signal(signal.SIGUSR1)
            while not out.exists() and proc.poll() is None:
                time.sleep(0.05)
            caller.close()
        finally:
            proc.terminate()  # the daemon's own shutdown: its sessions and their keeper end with it
            proc.wait(30)
        saved = json.loads(out.read_text())
    stamps = [tuple(s) for s in saved["stamps"]]
    rows = _phases(stamps, calls, dump)  # type: ignore[arg-type]
    span = [(wall, cpu) for end, wall, cpu in saved["reads"] if calls[0][0] <= end <= calls[-1][1]]
    # CPU time per send is what the load on a shared machine does not change much (the stamps add some).
    in_reads = (sum(w for w, _ in span) / n / 1e6, sum(c for _, c in span) / n / 1e6)
    return Traced(rows, spent[0] / n * 1000, sum(spent[1:]) / n * 1000, queued_share, in_reads)


def columns(rows: list[dict[str, float]]) -> dict[str, list[float]]:
    """Each phase's values over the sends (a phase a send did not go through left out)."""
    out: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        for k, v in row.items():
            if v == v:
                out[k].append(v)
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--daemon":
        _daemon(sys.argv[2], sys.argv[3:])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--process", default="worker,daemon")
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose ptyd runs")
    parser.add_argument("-n", type=int, default=200)
    parser.add_argument("--dump", action="store_true", help="print each send's stamps")
    parser.add_argument("--floods", type=int, default=0, help="sessions printing `seq inf` meanwhile")
    parser.add_argument("--command", default="true", help="what each send runs (a `cat` of a corpus: figure 3b)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from bench.harness import percentile

    for process in args.process.split(","):
        traced = trace(process, args.n, args.floods, args.code, args.dump, args.command)
        beside = f", beside {args.floods} floods" if args.floods else ""
        load = os.getloadavg()[0]
        print(f"\n{args.code} engine_process={process}: {len(traced.rows)} sends{beside}, load {load:.1f}")
        print(f"CPU per send: daemon {traced.daemon_ms:.3f} ms, workers {traced.workers_ms:.3f} ms")
        print(f"the daemon waited for a CPU {traced.queued:.0%} of the time (runnable, not running)")
        wall, cpu = traced.in_reads
        print(f"its loop in PTY reads per send: {wall:.3f} ms, of them on a CPU {cpu:.3f} ms")
        print(f"{'phase':30} {'median':>8} {'p90':>8}")
        for k, values in columns(traced.rows).items():
            print(f"{k:30} {percentile(values, 50):8.3f} {percentile(values, 90):8.3f}")


if __name__ == "__main__":
    main()
