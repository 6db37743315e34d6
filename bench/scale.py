"""Scenario 4, scale: 10, 100 and 500 live shells in one daemon (a fresh daemon per level).

Per level: ``terminal_open`` latency (against forking bash on a raw PTY until its first prompt), the daemon's RSS
per idle session (engine workers counted; bash is not), and ``send`` latency on idle sessions, first with everything
quiet, then while 10% of the sessions print without pause, against a raw PTY of the bench under the same floods and
against tmux: a private server whose windows carry the same number of floods, a send measured as the bench's tmux
reference does (``send-keys``, then ``capture-pane`` until the new prompt). At the largest level some idle
sessions then get their scrollback filled to its bound, with full-width ASCII lines (the line bound is reached
first) and, in a full run, with 4-byte characters (the byte bound is reached first), and the RSS growth per
filled session is reported once the daemon's RSS settled (what a session keeps; the note gives it right after
the fill, with the flood's and the state save's transient memory not yet given back).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from bench.client import Caller, CallFailed
from bench.harness import Context, DaemonProcess, cpu_seconds, register, rss_bytes, with_workers
from bench.report import Figure, Results, Row
from bench.shells import BenchShell, Done, PtydShell, RawShell, TmuxShell

KIB, MIB = 1024, 1024 * 1024
PROCESSES = ("worker", "daemon")  # engine_process: engine workers (the default) beside the engine in the daemon
EMPTY_BUDGET, FULL_BUDGET = 1 * MIB, 4 * MIB + 1 * MIB  # per session; the scrollback bound is 4 MiB
SETTLE_S = 15.0  # the longest wait for the daemon's RSS to settle after a fill
SETTLE_STEADY = 3  # seconds it stays the same
# One process printing without end. (A loop forking `seq 1000` measures, on 2 cores, the scheduler under a fork
# storm more than the daemon; it also shows terminal_cancel racing a foreground group that keeps changing.)
FLOOD = "seq inf"
SANDBOX_OPENS = 20  # each, sandboxed and not, alternating
SEND_BUDGET_S = 20.0  # per figure: under load a send can take seconds, and the whole run must stay under 10 min
ASCII_FILL = "seq -f '%0159.0f' 1 12000"  # 159 columns: no pending wrap; 12000 lines > the 10000-line bound


def astral_fill(python: str) -> str:
    # 159 cells of 4 UTF-8 bytes each: 4 MiB of scrollback is about 6,600 lines, under the 10,000-line bound.
    code = "import sys\nrow = chr(0x1D400) * 153\nfor i in range(8000): sys.stdout.write(f'{i:06d}{row}\\n')"
    return f'{python} -c "{code}"'


def _daemon(ctx: Context, name: str, process: str = "worker") -> DaemonProcess:
    directory = ctx.directory / name
    directory.mkdir()
    directory.chmod(0o700)
    profile = ctx.profile_dir / f"{name}.pstats" if ctx.profile_dir else None
    config = f'max_sessions = 1024\nmax_sessions_per_agent = 1000\nengine_process = "{process}"\n'
    return DaemonProcess(directory, config, profile=profile)


def _sends(shells: Sequence[BenchShell], count: int, budget_s: float) -> list[float]:
    """Up to ``count`` sends of ``true`` round-robin, stopping early once ``budget_s`` has passed."""
    samples: list[float] = []
    deadline = time.monotonic() + budget_s
    while len(samples) < count and time.monotonic() < deadline:
        shell = shells[len(samples) % len(shells)]
        start = time.perf_counter()
        shell.run("true", timeout=60)
        samples.append(time.perf_counter() - start)
    return samples


def _tmux_loaded(ctx: Context, flooders: int, count: int) -> list[float]:
    """Sends to a tmux shell while ``flooders`` windows of its server print ``FLOOD``: tmux under ptyd's load."""
    tmux = TmuxShell(ctx.directory)
    try:
        for _ in range(flooders):
            tmux.spawn(FLOOD)
        time.sleep(1.0)  # every flood under way, as ptyd's are (2,000 lines) before its sends
        return _sends([tmux], count, SEND_BUDGET_S / 2)
    finally:
        tmux.close()


def _fill(daemon: DaemonProcess, shells: list[PtydShell], command: str, results: Results) -> tuple[float, float, int]:
    """Fill each shell's scrollback with ``command``. RSS growth per shell (bytes) right after the fills and once
    settled (the daemon gives a flood's transient memory back ~1 s after it ends, and a save's after the save:
    what a session keeps is the second), and the lines retained."""
    before = rss_bytes(daemon.pid)
    retained = 0
    for shell in shells:
        shell.run(command, timeout=300)
        page = shell.call("terminal_read", start_line=0, max_lines=1)
        if page["first_retained_line"] == 0:
            results.failures.append(f"scale: `{command[:40]}` did not reach the scrollback bound")
        retained = page["total_lines"] - page["first_retained_line"]
    after = rss_bytes(daemon.pid)
    settled, steady = after, 0
    deadline = time.monotonic() + SETTLE_S
    # Unchanged over SETTLE_STEADY seconds: settled. Over one, the RSS read between the last save and the give-back
    # after it (a second of quiet later, at the next housekeeping tick) passed for settled: 6.8-11 MiB a session
    # of 4-byte text, run to run, for the same daemon.
    while steady < SETTLE_STEADY and time.monotonic() < deadline:
        time.sleep(1.0)
        last, settled = settled, rss_bytes(daemon.pid)
        steady = steady + 1 if settled == last else 0
    return (after - before) / len(shells), (settled - before) / len(shells), retained


def _sandboxed_opens(ctx: Context, caller: Caller, token: str, opens: Figure, results: Results) -> None:
    """terminal_open in a workspace sandbox (bubblewrap) and without one, alternating in the same daemon."""
    workspace = ctx.directory / "sandbox-workspace"
    workspace.mkdir(exist_ok=True)
    plain: list[float] = []
    sandboxed: list[float] = []
    for _ in range(SANDBOX_OPENS):
        for samples, params in ((plain, {}), (sandboxed, {"sandbox": "workspace"})):
            start = time.perf_counter()
            try:
                shell = PtydShell(caller, token, cwd=str(workspace), **params)
            except CallFailed as exc:  # no bubblewrap, or no user namespaces, on this machine
                opens.unavailable("ptyd, workspace sandbox", str(exc))
                return
            samples.append(time.perf_counter() - start)
            shell.close()
    opens.add("ptyd, no sandbox (alternating)", plain, "the same opens, without a sandbox", scale=1000)
    row = opens.add("ptyd, workspace sandbox", sandboxed, "bubblewrap in the spawn chain", scale=1000)
    ratio = row.median / opens.row("ptyd, no sandbox (alternating)").median
    row.note += f"; {ratio:.2f}x the unsandboxed open"
    results.target("sandboxed open", "< 2x an unsandboxed open (median)", f"{ratio:.2f}x", ratio < 2)


def _stop(shell: PtydShell, results: Results) -> None:
    for _ in range(20):
        shell.call("terminal_cancel")
        if shell.call("terminal_wait", timeout_ms=1000)["done"]:
            return
    results.failures.append("scale: a printing session did not stop after 20 terminal_cancel calls")


def run(ctx: Context, results: Results) -> None:
    levels = (10, 40) if ctx.quick else (10, 100, 500)
    sends = 20 if ctx.quick else 100
    fills = 3 if ctx.quick else 10
    opens = Figure("4. Scale: terminal_open latency", "ms", reference="raw")
    latency = Figure(
        "4. Scale: send `true` on idle shells, quiet and while 10% print",
        "ms",
        f"{PROCESSES[0]}, N={levels[0]}, quiet",  # rows name the engine's process
        show_p99=True,
    )
    memory = Figure("4. Scale: daemon RSS growth per session", "KiB", reference="budget")
    raw_opens: list[float] = []
    for n, process in ((n, process) for n in levels for process in PROCESSES):
        _level(ctx, results, n, process, sends, levels, opens, latency, memory, raw_opens)
    opens.add("raw", raw_opens, "fork bash on a PTY until its first prompt", scale=1000)
    daemon = _daemon(ctx, "scale-full")
    daemon.start()
    caller = daemon.connect()
    try:
        token = register(caller, "bench-scale-full")
        shells = [PtydShell(caller, token) for _ in range(fills + 2)]
        _full_rows(ctx, daemon, shells[:fills], shells[fills:], memory, results)
    finally:
        caller.close()
        daemon.stop()
    results.figures += [opens.finish(), latency.finish(), memory.finish()]


def _level(
    ctx: Context,
    results: Results,
    n: int,
    process: str,
    sends: int,
    levels: tuple[int, ...],
    opens: Figure,
    latency: Figure,
    memory: Figure,
    raw_opens: list[float],
) -> None:
    """One level: ``n`` shells in a daemon whose engine runs in ``process`` ("worker" or "daemon")."""
    daemon = _daemon(ctx, f"scale-{n}-{process}", process)
    daemon.start()
    caller = daemon.connect()
    try:
        token = register(caller, f"bench-scale-{n}")
        PtydShell(caller, token).close()  # warm: the first open imports and allocates what all share
        baseline = with_workers(rss_bytes, daemon.pid)
        shells: list[PtydShell] = []
        open_samples = []
        for i in range(n):
            start = time.perf_counter()
            shells.append(PtydShell(caller, token))
            open_samples.append(time.perf_counter() - start)
            if i % 10 == 0:
                start = time.perf_counter()
                RawShell().close()
                raw_opens.append(time.perf_counter() - start)
        opens.add(f"ptyd {process}, N={n}", open_samples, f"the {n} opens in a row", scale=1000)
        if n == levels[0] and process == PROCESSES[0]:
            _sandboxed_opens(ctx, caller, token, opens, results)
        empty = (with_workers(rss_bytes, daemon.pid) - baseline) / n
        memory.rows.append(Row(f"empty, {process}, N={n}", n, empty / KIB, float("nan"), empty / EMPTY_BUDGET))

        flooders = max(1, n // 10)
        idle = shells[flooders:]
        quiet = _sends(idle, sends, SEND_BUDGET_S)
        for shell in shells[:flooders]:
            shell.send(FLOOD + "\n", wait=False)
        lines = shells[0].call("terminal_status")["total_lines"]
        deadline = time.monotonic() + 10
        while shells[0].call("terminal_status")["total_lines"] < lines + 2000 and time.monotonic() < deadline:
            time.sleep(0.01)
        cpu, began = with_workers(cpu_seconds, daemon.pid), time.monotonic()
        loaded = _sends(idle, sends, SEND_BUDGET_S)
        busy = (with_workers(cpu_seconds, daemon.pid) - cpu) / (time.monotonic() - began)
        # The same sends on a raw PTY of this process while the same programs print: what the machine
        # itself gives a shell under that load, with no daemon in the sender's path.
        raw = RawShell()
        try:
            raw_loaded = _sends([raw], sends, SEND_BUDGET_S / 2)
        finally:
            raw.close()
        for shell in shells[:flooders]:
            _stop(shell, results)
        tmux_loaded: list[float] = []
        if process == PROCESSES[0]:  # once a level: tmux's load does not depend on where ptyd's engine runs
            try:
                tmux_loaded = _tmux_loaded(ctx, flooders, sends)
            except (Done, FileNotFoundError) as exc:
                latency.unavailable(f"tmux, while {flooders} print", f"tmux: {exc}")
        latency.add(f"{process}, N={n}, quiet", quiet, "", scale=1000)
        row = latency.add(
            f"{process}, N={n}, {flooders} printing", loaded, f"daemon at {busy:.0%} of a core", scale=1000
        )
        row.note += f"; {row.p99 / latency.row(f'{process}, N={n}, quiet').p99:.1f}x quiet p99"
        raw_row = latency.add(
            f"raw, while {flooders} print ({process})", raw_loaded, "no daemon in the path", scale=1000
        )
        row.note += f"; {row.p99 / raw_row.p99:.1f}x raw p99 under the same load"
        versus = f"raw {raw_row.p99:.1f} ms"
        if tmux_loaded:
            tmux_row = latency.add(
                f"tmux, while {flooders} print",
                tmux_loaded,
                f"{flooders} flood{'s' if flooders > 1 else ''} in windows of its own server; send-keys + capture-pane",
                scale=1000,
            )
            row.note += f"; {row.p99 / tmux_row.p99:.2f}x tmux p99"
            versus += f", tmux {tmux_row.p99:.1f} ms"
        if n == levels[-1]:
            opened = f"{len(shells)} opened"
            results.target(f"{n} live shells in one daemon ({process})", f"{n} opened", opened, len(shells) == n)
            p99 = f"{row.p99:.1f} ms ({versus} p99 under the same load)"
            results.target(f"send p99 beside {flooders} floods ({process})", "<= 10 ms", p99, row.p99 <= 10)
            results.target(
                f"RSS per empty session ({process}, workers counted)",
                "<= 1 MiB",
                f"{empty / KIB:.0f} KiB",
                empty <= EMPTY_BUDGET,
            )
        start = time.perf_counter()
        caller.call("agent_release", token=token)
        opens.rows[-1].note += f"; agent_release closed them in {time.perf_counter() - start:.1f} s"
    finally:
        caller.close()
        code = daemon.stop()
        if code != 0:
            results.failures.append(f"scale daemon N={n} exited with {code}")


def _full_rows(
    ctx: Context,
    daemon: DaemonProcess,
    ascii: list[PtydShell],
    astral: list[PtydShell],
    memory: Figure,
    results: Results,
) -> None:
    """Scrollback filled to its bound, in a daemon of its own (freed memory of other sessions would hide growth)."""
    at_once, growth, retained = _fill(daemon, ascii, ASCII_FILL, results)
    note = f"{retained} lines of 159 ASCII columns retained (line bound); settled, {at_once / KIB:,.0f} at once"
    memory.rows.append(Row("full, ASCII", len(ascii), growth / KIB, float("nan"), growth / FULL_BUDGET, note=note))
    met = growth <= FULL_BUDGET
    measured = f"{growth / KIB:.0f} KiB ASCII"
    if not ctx.quick:
        at_once, growth, retained = _fill(daemon, astral, astral_fill(ctx.python), results)
        note = f"{retained} lines of 159 4-byte characters retained (byte bound); settled, {at_once / KIB:,.0f} at once"
        memory.rows.append(
            Row("full, 4-byte", len(astral), growth / KIB, float("nan"), growth / FULL_BUDGET, note=note)
        )
        met &= growth <= FULL_BUDGET
        measured += f", {growth / KIB:.0f} KiB 4-byte"
    results.target("RSS per session, scrollback full", "<= 4 MiB + 1 MiB", measured, met)
