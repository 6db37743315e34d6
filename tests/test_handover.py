"""A planned handover (SIGUSR2): the daemon execs the currently installed ptyd in its own place and hands it every
session, with its program, its terminal, its screen, its sends and its owner.

"Installed" is real here: the daemon runs from a copy of the ptyd package on its PYTHONPATH, and a test changes
that copy (a new version string, or a broken module) before it sends SIGUSR2, as ``pip install -U`` would.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, Daemon, Rpc, RpcError, Shell, pid_alive, session_pids, wait_until
from ptyd import __version__
from ptyd.daemon.app import PHASES


class InstalledDaemon(Daemon):
    """A daemon run from its own copy of the ptyd package, which a test can upgrade (or break) in place."""

    def __init__(self, directory: Path, config: str = "") -> None:
        super().__init__(directory, config)
        self.site = directory / "site"
        shutil.copytree(ROOT / "ptyd", self.site / "ptyd", ignore=shutil.ignore_patterns("__pycache__"))

    def start(self, *extra: str, wait: bool = True) -> subprocess.Popen[bytes]:
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        env = {k: v for k, v in os.environ.items() if not k.startswith("PTYD_")}
        env["PYTHONPATH"] = str(self.site)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ptyd", "--socket", str(self.socket), "--config", str(self.config_path), *extra],
            stdout=log,
            stderr=log,
            cwd=self.directory,  # not the checkout: `-m ptyd` must find the installed copy
            env=env,
        )
        log.close()
        if wait:
            self.wait_ready()
        return self.proc

    def install_version(self, version: str) -> None:
        init = self.site / "ptyd" / "__init__.py"
        text = init.read_text()
        start = text.index('__version__ = "')
        end = text.index('"', start + 15)
        init.write_text(text[:start] + f'__version__ = "{version}"' + text[end + 1 :])

    def info(self) -> Any:
        """daemon_info on a new connection, which may be dropped while the daemon execs: then ask again."""
        for _ in range(100):
            try:
                with Rpc(self.socket, timeout=30) as rpc:
                    return rpc.call("daemon_info")
            except ConnectionError:
                time.sleep(0.01)
        raise AssertionError("daemon_info kept dropping")

    def hand_over(self, expect: int) -> Any:
        """SIGUSR2, then wait until the new daemon answers as handover number ``expect``."""
        assert self.proc is not None
        refused = self.info()["handover_error"]  # an earlier refusal, still reported until a handover succeeds
        self.proc.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + 60
        while True:
            info = self.info()
            if info["handovers"] >= expect:
                return info
            assert info["handover_error"] == refused, info["handover_error"]
            assert time.monotonic() < deadline, f"no handover:\n{self.log()}"
            time.sleep(0.02)


@pytest.fixture
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InstalledDaemon]:
    directory = tmp_path_factory.mktemp("ptyd-installed")
    directory.chmod(0o700)
    d = InstalledDaemon(directory)
    yield d
    if d.proc is not None and d.proc.poll() is None:
        try:
            d.stop(signal.SIGTERM, timeout=30)
        except subprocess.TimeoutExpired:
            d.stop(signal.SIGKILL)


def daemons_serving(socket_path: Path) -> list[int]:
    """Every ptyd process whose command line names this socket (a pre-flight left running would be one)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(socket_path).encode() in argv and any(a.endswith(b"ptyd") for a in argv):
            found.append(int(name))
    return found


def open_fds(pid: int) -> list[str]:
    """The daemon's fds by kind (a socket, a pidfd, a pty...), without the connection the test just closed,
    which the daemon may not have seen end yet."""
    kinds = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        kinds.append(target.split("[")[0])
    return sorted(kinds)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def engine_worker(pid: int) -> bool:
    try:
        return b"ptyd.terminal.workers.main" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def sessions_and_workers(pid: int) -> tuple[list[int], int]:
    """The daemon's children other than engine workers, and how many engine workers it has. Workers are new after
    each exec (they run the new code), so only their number is the same; the old ones exit and are reaped (a
    zombie awaiting the reaper's next sweep is not counted)."""
    kids = sorted(k for k in children(pid) if pid_alive(k))
    return [k for k in kids if not engine_worker(k)], sum(map(engine_worker, kids))


@pytest.mark.parametrize("engine", ["ghostty", "pyte"])
def test_upgrade_keeps_programs_screens_sends_and_owners(installed: InstalledDaemon, engine: str) -> None:
    installed.config_path.write_text(f'emulator = "{engine}"\n')
    installed.start()
    rpc = installed.rpc()
    alice = rpc.call("agent_register", name="alice")["token"]
    bob = rpc.call("agent_register", name="bob")["token"]
    shell = Shell(rpc, alice, env={"PS1": "$ "}, name="build")
    repl = Shell(rpc, alice, argv=[sys.executable, "-q"], env={"PYTHONSTARTUP": ""})
    vim_like = Shell(rpc, bob, env={"PS1": "> "})
    repl.send("answer = 41\n")
    vim_like.send("printf '\\033[?1049h\\033[2J\\033[3;5Hfull screen\\033[1;1H\\033]2;the title\\007'\n")
    ticker = Shell(rpc, bob, env={"PS1": "$ "})
    screens = {s.id: s.call("terminal_screen") for s in (shell, repl, vim_like)}
    pids = {s.id: s.opened["pid"] for s in (shell, repl, vim_like, ticker)}
    trees = {s.id: session_pids(s) for s in (shell, repl, vim_like, ticker)}
    started = ticker.send("for i in $(seq 1 8); do echo tick-$i; sleep 0.5; done\n", wait=False, request_key="ticker-1")
    wait_until(lambda: any("tick-2" in line for line in ticker.transcript()), message="the ticker to print")
    rpc.close()

    installed.install_version("9.9.9-upgraded")
    info = installed.hand_over(1)

    assert info["version"] == "9.9.9-upgraded"
    assert info["sessions"] == 4
    assert info["agents"] == 2
    assert daemons_serving(installed.socket) == [info["pid"]]
    with installed.rpc() as rpc:
        for s in (shell, repl, vim_like, ticker):
            s.rpc = rpc
        # The in-flight send finishes in the new daemon, with every line it printed, before and during the exec.
        waited = rpc.call("terminal_wait", token=bob, session_id=ticker.id, timeout_ms=20_000)
        assert waited["done"]
        assert waited["result"]["operation_id"] == started["operation_id"]
        ticks = [line for line in ticker.transcript() if line.startswith("tick-")]
        assert ticks == [f"tick-{i}" for i in range(1, 9)]
        again = ticker.send("echo ignored\n", request_key="ticker-1", wait=False)
        assert again["operation_id"] == started["operation_id"]  # a retried key is the same operation
        # The screens are what they were, a full-screen program's and its title included.
        for s in (shell, repl, vim_like):
            assert s.call("terminal_screen") == screens[s.id], s.id
        # The same programs, with their state.
        assert repl.send("print(answer + 1)\n")["viewport"].splitlines()[1] == "42"
        assert {s.id: s.call("terminal_status")["pid"] for s in (shell, repl, vim_like, ticker)} == pids
        # Ownership: each agent sees its own sessions, and the other's ids do not exist for it.
        mine = {s["session_id"] for s in rpc.call("terminal_list", token=alice)["sessions"]}
        assert mine == {shell.id, repl.id}
        with pytest.raises(RpcError) as err:
            rpc.call("terminal_status", token=alice, session_id=ticker.id)
        assert err.value.kind == "session_not_found"
        assert shell.send("echo still $((40 + 2))\n")["viewport"].splitlines()[1] == "still 42"
    # SIGTERM afterwards still ends every tree.
    assert installed.stop(signal.SIGTERM) == 0, installed.log()
    assert [pid for tree in trees.values() for pid in tree if pid_alive(pid)] == []


def test_a_daemon_lives_its_phases_in_order(installed: InstalledDaemon) -> None:
    """The order of a daemon's life is its correctness (ptyd/daemon/app.py PHASES); the daemon a handover execs
    lives its own from the start."""
    installed.start("--log-level", "debug")
    installed.install_version("9.9.9-phases")
    installed.hand_over(1)
    assert installed.stop(signal.SIGTERM) == 0, installed.log()
    phases = re.findall(r"^ptyd: DEBUG ptyd: phase: (.+)$", installed.log(), re.M)
    assert set(phases) == set(PHASES)
    start = ["recover", "build", "take over", "serve"]
    assert phases == [*start, "hand over", *start, "stop"]


def test_a_named_wait_in_flight_settles_on_its_match_in_the_new_daemon(
    installed: InstalledDaemon, tmp_path: Path
) -> None:
    installed.start()
    log = tmp_path / "server.log"
    log.write_text("")
    with installed.rpc() as rpc:
        token = rpc.call("agent_register", name="waiter")["token"]
        watcher = Shell(rpc, token, env={"PS1": "$ "})
        started = watcher.send(f"tail -f {log}\n", until=r"ready on port (\d+)", compact=True, wait=False)
        wait_until(lambda: watcher.call("terminal_status")["foreground"]["name"] == "tail", message="tail to run")
    installed.install_version("9.9.9-waits")
    installed.hand_over(1)
    with installed.rpc() as rpc:
        watcher.rpc = rpc
        with log.open("a") as f:
            f.write("booting\n" * 50 + "ready on port 8080\n")
        waited = rpc.call("terminal_wait", token=token, session_id=watcher.id, timeout_ms=20_000)
        assert waited["done"]
        result = waited["result"]
        assert result["operation_id"] == started["operation_id"]
        assert result["wait_reason"] == "matched"
        assert result["match"]["text"] == "ready on port 8080"
        assert result["compacted"] == 49  # the request's compact came along too
        watcher.send("\x03")
    assert installed.stop(signal.SIGTERM) == 0, installed.log()


@pytest.mark.timeout(360)  # 21 handovers: about 1 s each on a quiet machine, several under a loaded CI's
def test_twenty_handovers_in_a_row_leave_fds_memory_and_processes_at_baseline(installed: InstalledDaemon) -> None:
    installed.start()
    with installed.rpc() as rpc:
        token = rpc.call("agent_register")["token"]
        shells = [Shell(rpc, token, env={"PS1": "$ "}) for _ in range(3)]
        for s in shells:
            s.send("echo ready\n")
    pid = installed.info()["pid"]
    installed.hand_over(1)  # the first exec settles what a fresh interpreter holds
    baseline = open_fds(pid)
    kids = sessions_and_workers(pid)
    rss = rss_kib(pid)
    for n in range(2, 22):
        installed.hand_over(n)
    # Sockets are compared by count, at most the baseline's: the server side of the connection the test just
    # closed may still be open for a moment (in the baseline, or now).
    assert [fd for fd in open_fds(pid) if fd != "socket:"] == [fd for fd in baseline if fd != "socket:"]
    wait_until(lambda: open_fds(pid).count("socket:") <= baseline.count("socket:"), message="no extra socket")
    wait_until(lambda: sessions_and_workers(pid) == kids, message=f"the same sessions and as many workers as {kids}")
    assert rss_kib(pid) < rss + 16 * 1024, (rss, rss_kib(pid))
    assert daemons_serving(installed.socket) == [pid]
    with installed.rpc() as rpc:
        for s in shells:
            s.rpc = rpc
            assert s.send("echo after $((20 + 1))\n")["viewport"].splitlines()[1] == "after 21"


def test_a_broken_install_is_refused_and_the_old_daemon_keeps_serving(installed: InstalledDaemon) -> None:
    installed.start()
    with installed.rpc() as rpc:
        token = rpc.call("agent_register")["token"]
        shell = Shell(rpc, token, env={"PS1": "$ "})
    module = installed.site / "ptyd" / "continuity" / "handover.py"
    good = module.read_text()
    module.write_text(good + "\ndef broken(:\n")
    assert installed.proc is not None
    installed.proc.send_signal(signal.SIGUSR2)
    wait_until(lambda: installed.info()["handover_error"] is not None, timeout=60, message="the refusal")
    info = installed.info()
    assert "SyntaxError" in info["handover_error"]
    assert info["handovers"] == 0
    assert "handover refused, still serving" in installed.log()
    with installed.rpc() as rpc:
        shell.rpc = rpc
        assert shell.send("echo alive\n")["viewport"].splitlines()[1] == "alive"
    module.write_text(good)
    assert installed.hand_over(1)["handover_error"] is None


def test_ptyctl_upgrade_reports_the_new_version_and_the_python_client_carries_on(installed: InstalledDaemon) -> None:
    from ptyd_client import Client

    installed.start()
    with Client(installed.socket) as client:
        client.agent_register("python")
        session = client.open(env={"PS1": "$ "})
        session.send("kept=5\n")
        installed.install_version("9.9.9-ptyctl")
        done = subprocess.run(
            [sys.executable, "-m", "ptyd_client.ptyctl", "--socket", str(installed.socket), "upgrade"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr + installed.log()
        assert done.stdout.startswith(f"ptyd {__version__} -> 9.9.9-ptyctl (pid ")
        # The client's connection was dropped by the exec: its next call reconnects by itself, same token.
        assert session.send("echo kept=$kept\n")["viewport"].splitlines()[1] == "kept=5"
        assert client.daemon_info()["version"] == "9.9.9-ptyctl"
