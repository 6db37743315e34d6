"""An agent's aggregate limits through a real daemon and real cgroups: all of one agent's sessions together held to
``agent_pids_max`` and ``agent_memory_mib`` (each session under its own limit, together over), what the results
say, the other agent and the daemon untouched, the agent's group removed with its last session and swept at start.

Needs writable cgroup memory and pids controllers (root on these machines); limits-only profiles need no sandbox.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Daemon, Rpc, RpcError, Shell, pid_alive, wait_until

CONFIG = """
sandbox_agents = { "herd" = "herd", "herd-too" = "herd", "grazer" = "grazer" }

[sandbox_profiles.herd]
pids_max = 40
agent_pids_max = 60

[sandbox_profiles.grazer]
memory_mib = 180
agent_memory_mib = 200
"""

# Forks N children that sleep in sessions of their own (so the foreground group is this program alone), says how
# many it got, then holds them until a line comes.
FORKER = """
import os, signal, sys
children = []
try:
    for _ in range(int(sys.argv[1])):
        pid = os.fork()
        if pid == 0:
            os.setsid()
            signal.pause()
            os._exit(0)
        children.append(pid)
    print("forked", len(children), flush=True)
except BlockingIOError:
    print("refused after", len(children), flush=True)
sys.stdin.readline()
for pid in children:
    os.kill(pid, signal.SIGKILL)
"""

# Holds N MiB (touched, 1 MiB at a time) until a line comes; says so before and after.
HOLDER = """
import sys
chunks = [bytearray(1 << 20) for _ in range(int(sys.argv[1]))]
print("holding", len(chunks), flush=True)
sys.stdin.readline()
print("released", flush=True)
"""


@pytest.fixture(scope="module")
def herd_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    directory = tmp_path_factory.mktemp("ptyd-agent-limits")
    directory.chmod(0o700)
    d = Daemon(directory, CONFIG)
    d.start()
    with d.rpc() as rpc:
        where = rpc.call("daemon_info")["limits"]
    if "memory none" in where or "pids none" in where:
        d.stop()
        pytest.skip(f"no writable memory and pids controllers here ({where})")
    yield d
    assert d.stop() == 0, d.log()


@pytest.fixture
def client(herd_daemon: Daemon) -> Iterator[Rpc]:
    with herd_daemon.rpc() as rpc:
        yield rpc


@pytest.fixture
def scripts(tmp_path: Path) -> Path:
    (tmp_path / "forker.py").write_text(FORKER)
    (tmp_path / "holder.py").write_text(HOLDER)
    return tmp_path


@contextlib.contextmanager
def agent(rpc: Rpc, name: str) -> Iterator[str]:
    token: str = rpc.call("agent_register", name=name)["token"]
    try:
        yield token
    finally:
        with contextlib.suppress(RpcError, OSError):
            rpc.call("agent_release", token=token)


def open_shell(rpc: Rpc, token: str, cwd: Path) -> Shell:
    return Shell(rpc, token, cwd=str(cwd), env={"PS1": "$ "})


def cgroup_of(pid: int, controller: str) -> Path:
    """The v1 directory of ``controller`` that ``pid`` is in."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        if right.startswith("cgroup ") and controller in right.split()[2].split(","):
            root, point = left.split()[3], left.split()[4]
            break
    else:
        pytest.fail(f"no v1 {controller} hierarchy")
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            return Path(point) / os.path.relpath(path, root)
    pytest.fail(f"pid {pid} has no {controller} cgroup")


def saved_sessions(directory: Path) -> set[str]:
    with contextlib.suppress(OSError, ValueError, KeyError):
        return set(json.loads((directory / "sessions.json").read_text())["sessions"])
    return set()


def out(result: dict[str, Any]) -> str:
    return str(result["viewport"])


def test_forks_past_the_agents_pids_limit_are_refused_though_each_session_is_under_its_own(
    client: Rpc, scripts: Path
) -> None:
    daemon_pid = client.call("daemon_info")["pid"]
    with agent(client, "herd") as herd, agent(client, "herd-too") as other:
        first, second = open_shell(client, herd, scripts), open_shell(client, herd, scripts)
        neighbour = open_shell(client, other, scripts)
        group = cgroup_of(first.opened["pid"], "pids").parent
        assert group.name.startswith("agent-")
        assert cgroup_of(second.opened["pid"], "pids").parent == group  # one group for the agent's sessions
        assert (group / "pids.max").read_text().strip() == "60"
        assert (group / first.id / "pids.max").read_text().strip() == "40"

        held = first.send("python3 forker.py 30\n")
        assert "forked 30" in out(held), out(held)
        assert held["pids_limited"] is False
        refused = second.send("python3 forker.py 30\n")
        assert "refused after" in out(refused), out(refused)
        assert refused["pids_limited"] is True, refused
        own = int((group / second.id / "pids.current").read_text())
        assert own < 40  # the session was under its own limit: the agent's refused the fork
        assert int((group / "pids.current").read_text()) == 60
        assert second.call("terminal_status")["pids_limited"] is True
        assert first.call("terminal_status")["pids_limited"] is False

        # Another agent of the same profile has a group of its own, untouched by this one's.
        theirs = neighbour.send("python3 forker.py 30\n")
        assert "forked 30" in out(theirs), out(theirs)
        assert theirs["pids_limited"] is False
        assert cgroup_of(neighbour.opened["pid"], "pids").parent != group
        assert pid_alive(daemon_pid)

        for s in (first, second, neighbour):
            s.send("\n")
        first.close()
        assert group.is_dir()  # the second session is still in it
        second.close()
        assert not group.exists()  # removed with the agent's last session
        neighbour.close()


def test_sessions_together_over_the_agents_memory_limit_get_one_killed_and_its_result_says_so(
    client: Rpc, scripts: Path
) -> None:
    with agent(client, "grazer") as grazer:
        holder, hog = open_shell(client, grazer, scripts), open_shell(client, grazer, scripts)
        group = cgroup_of(holder.opened["pid"], "memory").parent
        assert group.name.startswith("agent-")
        assert int((group / "memory.limit_in_bytes").read_text()) == 200 << 20
        assert int((group / hog.id / "memory.limit_in_bytes").read_text()) == 180 << 20

        held = holder.send("python3 holder.py 70\n")
        assert "holding 70" in out(held), out(held)
        # 140 MiB fits the session's 180, not the agent's 200 beside the other's 70: the bigger program is killed.
        result = hog.send("python3 holder.py 140; echo status=$?\n")
        assert result["oom_killed"] is True, result
        assert "status=137" in out(result), out(result)
        assert "holding 140" not in out(result)
        assert hog.call("terminal_status")["oom_killed"] is True

        released = holder.send("\n")
        assert "released" in out(released), out(released)  # the other session's program survived
        assert released["oom_killed"] is False
        assert holder.call("terminal_status")["oom_killed"] is False
        hog.close()
        holder.close()
        assert not group.exists()


def test_a_stale_agent_group_is_swept_at_start_and_a_live_session_is_kept(fresh_daemon: Daemon, tmp_path: Path) -> None:
    fresh_daemon.config_path.write_text(CONFIG)
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        if "pids none" in rpc.call("daemon_info")["limits"]:
            pytest.skip("no writable pids controller here")
        token = rpc.call("agent_register", name="herd")["token"]
        kept = open_shell(rpc, token, tmp_path)
    group = cgroup_of(kept.opened["pid"], "pids").parent
    instance = hashlib.sha256(str(fresh_daemon.socket.resolve()).encode()).hexdigest()[:12]
    assert group.parent.name == f"ptyd-{instance}"
    stale = group.parent / "agent-0123456789abcdef"
    (stale / "pty-stale").mkdir(parents=True)
    # A crash (the keeper holds the PTYs): the next daemon adopts the live session and sweeps what is stale.
    wait_until(lambda: saved_sessions(fresh_daemon.directory) == {kept.id}, message="the saved state")
    fresh_daemon.stop(signal.SIGKILL)
    fresh_daemon.start()
    assert "adopted 1 of the 1 sessions" in fresh_daemon.log()
    assert not stale.exists()
    assert group.is_dir()
    with fresh_daemon.rpc() as rpc:
        kept.rpc = rpc
        assert kept.send("echo adopted\n")["viewport"].splitlines()[-2] == "adopted"
        kept.close()
    assert not group.exists()
