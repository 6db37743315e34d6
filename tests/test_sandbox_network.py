"""A `workspace` session gets a network namespace of its own (issue 27, attacks 2 and 10), by default where pasta
is installed (`sandbox_network = "auto"`), through a real daemon, real bubblewrap and real pasta: the machine's
loopback ports and abstract Unix sockets are out of reach, the session has an interface and a default route, its
namespace is one made ahead, no two sessions share one, and pasta ends with the session; spares end with the
daemon, at a handover and after a crash.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Daemon, RpcError, Shell, hand_over, pid_alive, wait_until

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or shutil.which("pasta") is None, reason="bubblewrap or pasta is not installed"
)


@pytest.fixture
def listener() -> Iterator[int]:
    """An HTTP server on the machine's loopback, outside any sandbox."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "Serving HTTP on 127.0.0.1 port N (http://127.0.0.1:N/) ..."
    yield int(line.split(" port ")[1].split()[0])
    proc.terminate()
    proc.wait(10)
    proc.stdout.close()


@pytest.fixture
def abstract_socket() -> Iterator[str]:
    """A listening abstract Unix socket (as X11's and many a dev tool's), outside any sandbox."""
    name = f"ptyd-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind("\0" + name)
        sock.listen()
        yield name


def _leaf_of(pid: int) -> Path:
    relative = next(line[3:] for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines() if line.startswith("0::"))
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines() if line.split()[2] == "cgroup2"]
    return next(Path(m + relative) for m in mounts if Path(m + relative).is_dir())


def cgroup_procs(pid: int) -> list[int]:
    """The processes of ``pid``'s cgroup v2 leaf (the session's, under cgroup containment)."""
    return [int(x) for x in (_leaf_of(pid) / "cgroup.procs").read_text().split()]


def named(pids: list[int], name: str) -> list[int]:
    """Those of ``pids`` started as ``name`` (or a variant: Debian's pasta execs pasta.avx2, a passt)."""
    found = []
    for pid in pids:
        with contextlib.suppress(OSError):
            if os.path.basename(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]).decode().startswith(name):
                found.append(pid)
    return found


def spares(daemon: Daemon) -> dict[str, list[int]]:
    """The namespaces the daemon made ahead: their cgroup leaves' names and processes."""
    assert daemon.proc is not None
    found = {}
    instance = hashlib.sha256(str(daemon.socket.resolve()).encode()).hexdigest()[:12]  # its own, not others'
    for leaf in _leaf_of(daemon.proc.pid).glob(f"ptyd-{instance}/netns-*"):
        with contextlib.suppress(OSError):
            found[leaf.name] = [int(x) for x in (leaf / "cgroup.procs").read_text().split()]
    return found


FETCH = "import urllib.request as u; print('got', u.urlopen('http://127.0.0.1:{port}/', timeout=5).status)"


def test_a_workspace_session_with_its_own_network_cannot_reach_the_machines_loopback(
    fresh_daemon: Daemon, tmp_path: Path, listener: int, abstract_socket: str
) -> None:
    fresh_daemon.config_path.write_text(f'sandbox_scratch_dir = "{tmp_path / "scratch"}"\n')  # by default
    fresh_daemon.start()
    fetch = FETCH.format(port=listener)
    connect = f"import socket; socket.socket(socket.AF_UNIX).connect('\\\\0{abstract_socket}'); print('connected')"
    with fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register", name="networked")["token"]
        plain = Shell(rpc, token, env={"PS1": "$ "})  # none: the machine's network, as before
        assert "got 200" in plain.send(f'python3 -c "{fetch}" 2>&1 | tail -1\n')["viewport"]
        assert "connected" in plain.send(f'python3 -c "{connect}" 2>&1 | tail -1\n')["viewport"]
        s = Shell(rpc, token, env={"PS1": "$ "}, sandbox="workspace")
        result = s.send(f'python3 -c "{fetch}" 2>&1 | tail -1\n')
        assert "Connection refused" in result["viewport"], result["viewport"]
        result = s.send(f'python3 -c "{connect}" 2>&1 | tail -1\n')
        assert "ConnectionRefusedError" in result["viewport"], result["viewport"]
        routes = s.send('awk \'$2 == "00000000" {print "default via", $1}\' /proc/net/route\n')["viewport"]
        assert "default via " in routes, routes  # an interface of its own, with a way out
        assert s.send("echo still a shell\n")["viewport"].splitlines()[-2] == "still a shell"
        # Its namespace's holder and pasta are the session's: its close ends them.
        members = cgroup_procs(s.opened["pid"])
        pastas = named(members, "pasta")
        assert len(pastas) == 1, members
        s.close()
        assert not pid_alive(pastas[0])  # ended with the session
        offline = Shell(rpc, token, env={"PS1": "$ "}, sandbox="workspace-offline")  # no network: no pasta
        result = offline.send(f'python3 -c "{fetch}" 2>&1 | tail -1\n')
        assert "Connection refused" in result["viewport"], result["viewport"]


def test_without_pasta_a_session_that_needs_it_is_refused(fresh_daemon: Daemon, tmp_path: Path) -> None:
    fresh_daemon.config_path.write_text(
        'sandbox_network = "pasta"\npasta_program = "/nonexistent/pasta"\n'
        f'sandbox_scratch_dir = "{tmp_path / "scratch"}"\n'
    )
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register", name="networked")["token"]
        with pytest.raises(RpcError) as refused:
            rpc.call("terminal_open", token=token, sandbox="workspace")
        assert getattr(refused.value, "kind", None) == "sandbox_unavailable"
        assert "pasta" in str(refused.value)
        assert rpc.call("terminal_open", token=token, sandbox="workspace-offline")["sandbox"] == "workspace-offline"


def test_a_pasta_that_fails_leaves_no_session_and_no_process(fresh_daemon: Daemon, tmp_path: Path) -> None:
    fresh_daemon.config_path.write_text(
        f'sandbox_network = "pasta"\npasta_program = "false"\nsandbox_scratch_dir = "{tmp_path / "scratch"}"\n'
    )
    fresh_daemon.start()
    assert fresh_daemon.proc is not None
    with fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register", name="networked")["token"]
        with pytest.raises(RpcError) as failed:
            rpc.call("terminal_open", token=token, sandbox="workspace")
        assert getattr(failed.value, "kind", None) == "spawn_failed"
        assert "pasta could not set up the sandbox's network" in str(failed.value)
        assert rpc.call("daemon_info")["sessions"] == 0
        daemon_fds = len(os.listdir(f"/proc/{fresh_daemon.proc.pid}/fd"))
        with pytest.raises(RpcError):
            rpc.call("terminal_open", token=token, sandbox="workspace")
        assert len(os.listdir(f"/proc/{fresh_daemon.proc.pid}/fd")) == daemon_fds  # nothing left open
        assert Shell(rpc, token, env={"PS1": "$ "}).send("echo fine\n")["viewport"].splitlines()[-2] == "fine"


def _spares_ready(daemon: Daemon, count: int) -> dict[str, list[int]]:
    """Wait for the daemon to have ``count`` spares ready (daemon_info says so); return their leaves' processes."""

    def ready() -> bool:
        with daemon.rpc() as rpc:
            return bool(rpc.call("daemon_info")["sandbox_network"]["spares"] == count)

    wait_until(ready, timeout=30, message=f"{count} network namespaces made ahead")
    found = spares(daemon)
    assert len(found) == count, found
    assert all(len(named(pids, "pasta")) == 1 for pids in found.values()), found
    return found


def test_opens_take_namespaces_made_ahead_and_no_two_sessions_share_one(fresh_daemon: Daemon, tmp_path: Path) -> None:
    fresh_daemon.config_path.write_text(f'sandbox_scratch_dir = "{tmp_path / "scratch"}"\n')
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register", name="networked")["token"]
        first = Shell(rpc, token, env={"PS1": "$ "}, sandbox="workspace")  # made at the open; two more ahead
        ready = _spares_ready(fresh_daemon, 2)
        ahead = {pid for pids in ready.values() for pid in named(pids, "pasta")}
        second = Shell(rpc, token, env={"PS1": "$ "}, sandbox="workspace")
        taken = named(cgroup_procs(second.opened["pid"]), "pasta")
        assert len(taken) == 1, taken
        assert taken[0] in ahead, (taken, ahead)  # a spare, moved into the session's cgroup
        network = rpc.call("daemon_info")["sandbox_network"]
        assert (network["mode"], network["taken"], network["made_ahead"]) == ("pasta", 2, 1), network
        assert len(_spares_ready(fresh_daemon, 2)) == 2  # and made again
        # A server on the first session's loopback is its own: the second session's loopback is another.
        fetch = FETCH.format(port=8765)
        serve = "python3 -m http.server 8765 --bind 127.0.0.1 >/dev/null 2>&1 &"
        poll = f'for i in $(seq 100); do python3 -c "{fetch}" 2>/dev/null && break; sleep 0.1; done'
        assert "got 200" in first.send(f"{serve} {poll}\n", timeout_ms=30_000)["viewport"]
        result = second.send(f'python3 -c "{fetch}" 2>&1 | tail -1\n')
        assert "Connection refused" in result["viewport"], result["viewport"]


def _networked(daemon: Daemon, tmp_path: Path) -> tuple[str, Shell]:
    """The daemon started with the default network, an agent's token and a workspace session of it (its open
    took the first namespace: spares are made next)."""
    daemon.config_path.write_text(f'sandbox_scratch_dir = "{tmp_path / "scratch"}"\n')
    daemon.start()
    with daemon.rpc() as rpc:
        token = rpc.call("agent_register", name="networked")["token"]
        return token, Shell(rpc, token, env={"PS1": "$ "}, sandbox="workspace")


def test_spares_end_with_the_daemon_and_at_a_handover(fresh_daemon: Daemon, tmp_path: Path) -> None:
    token, s = _networked(fresh_daemon, tmp_path)
    before = _spares_ready(fresh_daemon, 2)
    hand_over(fresh_daemon)
    for pids in before.values():
        assert [pid for pid in pids if pid_alive(pid)] == []  # no session's: ended, not left to nobody
    with fresh_daemon.rpc() as rpc:
        s.rpc = rpc
        assert "still a shell" in s.send("echo still a shell\n")["viewport"]  # its own namespace went along
        again = Shell(rpc, token, env={"PS1": "$ "}, sandbox="workspace")
        assert again.send("echo new\n")["viewport"].splitlines()[-2] == "new"
        after = _spares_ready(fresh_daemon, 2)
    assert fresh_daemon.stop(signal.SIGTERM) == 0
    for pids in after.values():
        assert [pid for pid in pids if pid_alive(pid)] == []


def test_spares_of_a_crashed_daemon_are_killed_at_its_restart(fresh_daemon: Daemon, tmp_path: Path) -> None:
    _, s = _networked(fresh_daemon, tmp_path)
    taken = named(cgroup_procs(s.opened["pid"]), "pasta")
    before = _spares_ready(fresh_daemon, 2)
    fresh_daemon.stop(signal.SIGKILL)
    left = [pid for pids in before.values() for pid in pids]
    assert [pid for pid in left if pid_alive(pid)] != []  # nobody ended them...
    fresh_daemon.start()
    wait_until(lambda: [pid for pid in left if pid_alive(pid)] == [], message="the dead daemon's spares killed")
    assert len(taken) == 1, taken
    assert pid_alive(taken[0])  # ...but the adopted session's namespace is its own


def test_auto_without_pasta_shares_the_machines_network_and_says_so(
    fresh_daemon: Daemon, tmp_path: Path, listener: int
) -> None:
    fresh_daemon.config_path.write_text(
        f'pasta_program = "/nonexistent/pasta"\nsandbox_scratch_dir = "{tmp_path / "scratch"}"\n'
    )
    fresh_daemon.start()
    assert "sandboxed sessions share the machine's network" in fresh_daemon.log()
    with fresh_daemon.rpc() as rpc:
        assert "install passt" in rpc.call("daemon_info")["sandbox_warning"]
        token = rpc.call("agent_register", name="networked")["token"]
        s = Shell(rpc, token, env={"PS1": "$ "}, sandbox="workspace")
        assert "the machine's network" in s.opened["sandbox_note"], s.opened
        assert "got 200" in s.send(f'python3 -c "{FETCH.format(port=listener)}" 2>&1 | tail -1\n')["viewport"]
        offline = Shell(rpc, token, env={"PS1": "$ "}, sandbox="workspace-offline")  # no network: nothing to say
        assert offline.opened.get("sandbox_note") is None


def test_a_spare_whose_pasta_died_is_not_given_to_a_session(fresh_daemon: Daemon, tmp_path: Path) -> None:
    fresh_daemon.config_path.write_text(f'sandbox_scratch_dir = "{tmp_path / "scratch"}"\n')
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register", name="networked")["token"]
        Shell(rpc, token, env={"PS1": "$ "}, sandbox="workspace")
        ready = _spares_ready(fresh_daemon, 2)
        killed = [pid for pids in ready.values() for pid in named(pids, "pasta")]
        for pid in killed:  # every spare loses its pasta
            os.kill(pid, signal.SIGKILL)
        wait_until(lambda: [pid for pid in killed if pid_alive(pid)] == [], message="the spares' pastas dead")
        s = Shell(rpc, token, env={"PS1": "$ "}, sandbox="workspace")
        routes = s.send('awk \'$2 == "00000000" {print "default via", $1}\' /proc/net/route\n')["viewport"]
        assert "default via " in routes, routes  # a namespace made at the open, pasta and all
        assert len(named(cgroup_procs(s.opened["pid"]), "pasta")) == 1
        network = rpc.call("daemon_info")["sandbox_network"]
        assert (network["taken"], network["made_ahead"]) == (2, 0), network
        gone = [pid for pids in ready.values() for pid in pids]
        wait_until(lambda: [pid for pid in gone if pid_alive(pid)] == [], message="the dead spares' holders ended")


ASYNCIO_APP = """
import asyncio, sys

async def main():
    loop = asyncio.get_running_loop()
    lines = asyncio.Queue()
    loop.add_reader(sys.stdin, lambda: lines.put_nowait(sys.stdin.readline()))  # beside asyncio's self-pipe
    print("app> ", end="", flush=True)
    while (line := (await lines.get()).strip()) != "quit":
        print("got", line, flush=True)
        print("app> ", end="", flush=True)

asyncio.run(main())
"""


def test_an_asyncio_app_in_a_namespace_of_its_own_is_probed_not_taken_for_a_relay(
    fresh_daemon: Daemon, tmp_path: Path
) -> None:
    # Its epoll set holds the terminal and the loop's wake-up socket pair, whose other end it holds itself: a relay's
    # socket would lead out. Asked in the daemon's namespace, where the pair is not, every asyncio REPL (IPython,
    # prompt_toolkit and Textual apps) in a sandbox was taken for a relay and settled on quiet ("relay_quiet").
    _, s = _networked(fresh_daemon, tmp_path)
    with fresh_daemon.rpc() as rpc:
        s.rpc = rpc
        workspace = Path(s.send("true\n")["cwd"])
        (workspace / "app.py").write_text(ASYNCIO_APP)
        assert s.send("python3 app.py\n")["viewport"].endswith("app>")
        for word in ("one", "two"):
            result = s.send(f"{word}\n")
            assert (result["ready_basis"], result["relay"]) == ("kernel", None), result
            assert result["viewport"].splitlines()[-2:] == [f"got {word}", "app>"]
        assert s.send("quit\n")["viewport"].endswith("$")
