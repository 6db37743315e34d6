"""Load (``make stress``): 50 agents on their own connections, 4 sessions each, sending without pause for 60 s
while 5 more sessions print as fast as they can. Every send is answered, correctly, in bounded time.
``--stress=ci`` (.ci/run) sends for 20 s.
"""

from __future__ import annotations

import secrets
import statistics
import threading
import time

import pytest

from conftest import Daemon, Rpc, Shell, stress

from .probes import LogWatch, daemon_pid, footprint

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

AGENTS, SESSIONS_PER_AGENT, FLOODS = 50, 4, 5
SECONDS = float(stress(60, ci=20))  # --stress=ci: .ci/run's bounded slow tier


class Agent(threading.Thread):
    """One agent: its own connection and sessions, sending ``echo <unique mark>`` round-robin until told to stop."""

    def __init__(self, daemon: Daemon, index: int, ready: threading.Barrier, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.daemon_under_test = daemon
        self.index = index
        self.ready = ready
        self.stop = stop
        self.latencies: list[float] = []
        self.problems: list[str] = []

    def run(self) -> None:
        try:
            with Rpc(self.daemon_under_test.socket) as rpc:
                token = rpc.call("agent_register", name=f"load-{self.index}")["token"]
                shells = [Shell(rpc, token, env={"PS1": "$ "}) for _ in range(SESSIONS_PER_AGENT)]
                self.ready.wait(timeout=120)
                n = 0
                while not self.stop.is_set():
                    mark = f"a{self.index}-{n}-{secrets.token_hex(3)}"
                    start = time.monotonic()
                    result = shells[n % SESSIONS_PER_AGENT].send(f"echo {mark}\n")
                    self.latencies.append(time.monotonic() - start)
                    if result["viewport"] != f"$ echo {mark}\n{mark}\n$" or result["wait_reason"] != "stdin_read":
                        self.problems.append(f"{mark}: {result['wait_reason']} {result['viewport']!r}")
                    n += 1
                for shell in shells:
                    shell.close()
                rpc.call("agent_release", token=token)
        except Exception as exc:
            self.problems.append(f"agent {self.index}: {exc!r}")
            self.ready.abort()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def test_50_agents_sending_for_60_s_beside_5_floods(module_daemon: Daemon) -> None:
    pid = daemon_pid(module_daemon)
    watch = LogWatch(module_daemon)
    before = footprint(pid)
    with Rpc(module_daemon.socket) as rpc:
        flooder = rpc.call("agent_register", name="flood")["token"]
        floods = [Shell(rpc, flooder, env={"PS1": "$ "}) for _ in range(FLOODS)]
        for flood in floods:
            flood.send("yes 'flood flood flood flood flood flood flood flood'\n", wait=False, timeout_ms=3_600_000)
        ready = threading.Barrier(AGENTS + 1)
        stop = threading.Event()
        agents = [Agent(module_daemon, i, ready, stop) for i in range(AGENTS)]
        for agent in agents:
            agent.start()
        ready.wait(timeout=180)  # 200 sessions open and ready
        flooded_before = sum(f.call("terminal_status")["total_lines"] for f in floods)
        start = time.monotonic()
        peak = footprint(pid).rss_kib
        while time.monotonic() - start < SECONDS:
            time.sleep(0.5)
            peak = max(peak, footprint(pid).rss_kib)
        stop.set()
        for agent in agents:
            agent.join(timeout=60)
        took = time.monotonic() - start
        flooded = sum(f.call("terminal_status")["total_lines"] for f in floods) - flooded_before
        for flood in floods:
            assert flood.call("terminal_cancel")["cancelled"] is True
            flood.close()
        assert rpc.call("daemon_info")["sessions"] == 0
    latencies = [x for agent in agents for x in agent.latencies]
    problems = [p for agent in agents for p in agent.problems]
    p50, p90, p99 = (percentile(latencies, f) for f in (0.5, 0.9, 0.99))
    print(
        f"load: {AGENTS} agents x {SESSIONS_PER_AGENT} sessions, {FLOODS} floods ({flooded:,} lines flooded): "
        f"{len(latencies):,} sends in {took:.0f} s ({len(latencies) / took:,.0f}/s); latency p50 "
        f"{p50 * 1000:.0f} ms, p90 {p90 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms, "
        f"mean {statistics.fmean(latencies) * 1000:.0f} ms; daemon rss {before.rss_kib / 1024:.0f} -> peak "
        f"{peak / 1024:.0f} MiB; {len(problems)} problems"
    )
    assert problems == []
    assert all(not agent.is_alive() for agent in agents)
    assert min(len(agent.latencies) for agent in agents) > 0  # nobody starved
    assert flooded > 100_000  # the floods really ran throughout
    assert p99 < 2.0
    watch.assert_quiet()
