"""Daemon faults: SIGKILL with live sessions then a restart on the same socket (adopted by default, killed
without the fd keeper); SIGTERM with 100 live sessions."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from conftest import Daemon, Rpc, RpcError, Shell, wait_until

from .probes import (
    LogWatch,
    ProcId,
    daemon_pid,
    proc_id,
    processes_tagged,
    still_running,
    unique_sleep,
    wait_for_count,
    zombie_children,
)

DEAF = "import signal, time; [signal.signal(s, signal.SIG_IGN) for s in (1, 2, 15)]; time.sleep({arg})"


def populate(rpc: Rpc, token: str, arg: str, count: int) -> list[Shell]:
    """``count`` sessions, each running tagged processes a different way: idle, busy, escaped, deaf to signals."""
    shells = []
    for i in range(count):
        shell = Shell(rpc, token, env={"PS1": "$ "})
        match i % 5:
            case 0:
                shell.send(f"sleep {arg}\n", wait=False)  # a send in progress
            case 1:
                shell.send(f"setsid nohup sleep {arg} > /dev/null 2>&1 &\n")
            case 2:
                shell.send(f"(sleep {arg} &) &\n")
            case 3:
                shell.send(f"trap '' HUP TERM; python3 -c '{DEAF.format(arg=arg)}' &\n")
            case _:
                shell.send(f"sleep {arg} &\n")
        shells.append(shell)
    return shells


def settled_programs(tag: str) -> set[ProcId]:
    """The five tagged programs ``populate`` starts, once each has become itself: a forking ``setsid``'s parent
    carries the tag too until it exits (seen at load 6: it outlived the snapshot and then "died" at the SIGKILL)."""

    def settled() -> bool:
        tagged = still_running(processes_tagged(tag))
        return len(tagged) == 5 and all(command_name(proc.pid) in ("sleep", "python3") for proc in tagged)

    wait_until(settled, message=f"five programs tagged {tag}, each itself")
    return set(still_running(processes_tagged(tag)))


def command_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def tops(shells: list[Shell]) -> set[ProcId]:
    """The sessions' top-level programs (the shells)."""
    found = {proc_id(s.opened["pid"]) for s in shells}
    assert None not in found
    return found  # type: ignore[return-value]


@pytest.mark.parametrize("containment", ["auto", "subreaper"])
def test_sigkill_with_live_sessions_then_restart_adopts_them(fresh_daemon: Daemon, containment: str) -> None:
    """The default (the fd keeper): every session of a SIGKILLed daemon, idle, busy, escaped or deaf to signals,
    is the next daemon's, with its processes, its id and its owner's token; a clean stop then ends them all."""
    fresh_daemon.config_path.write_text(f'containment = "{containment}"\n')
    fresh_daemon.start()
    arg, tag = unique_sleep()
    with fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register")["token"]
        shells = populate(rpc, token, arg, 5)
        procs = settled_programs(tag) | tops(shells)
    wait_until(lambda: set(saved(fresh_daemon)) == {s.id for s in shells}, message="the saved state")
    fresh_daemon.stop(signal.SIGKILL)
    assert set(still_running(procs)) == procs  # no hangup: the keeper holds the masters
    watch = LogWatch(fresh_daemon)
    fresh_daemon.start()
    assert "adopted 5 of the 5 sessions" in watch.text()
    assert set(still_running(procs)) == procs
    with fresh_daemon.rpc() as rpc:
        listed = {s["session_id"]: s["pid"] for s in rpc.call("terminal_list", token=token)["sessions"]}
        assert listed == {s.id: s.opened["pid"] for s in shells}
        for shell in shells[1:]:  # the first one's sleep still runs in the foreground
            shell.rpc = rpc
            assert "adopted" in shell.send("echo adopted\n")["viewport"].splitlines()  # after any job's notice
    assert fresh_daemon.stop(signal.SIGTERM) == 0
    assert still_running(procs) == []
    watch.assert_quiet()


def saved(daemon: Daemon) -> dict[str, object]:
    try:
        return dict(json.loads((daemon.directory / "sessions.json").read_text())["sessions"])
    except (OSError, ValueError, KeyError):
        return {}


@pytest.mark.parametrize("containment", ["auto", "subreaper"])
def test_sigkill_without_a_keeper_then_restart_kills_the_leftovers(fresh_daemon: Daemon, containment: str) -> None:
    fresh_daemon.config_path.write_text(f'containment = "{containment}"\nfd_keeper = false\n')
    fresh_daemon.start()
    arg, tag = unique_sleep()
    with fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register")["token"]
        shells = populate(rpc, token, arg, 5)
        leftovers = wait_for_count(tag, 5) | tops(shells)
    manifest = json.loads((fresh_daemon.directory / "sessions.json").read_text())
    cgroups = [Path(e["cgroup"]) for e in manifest["sessions"].values() if e["cgroup"]]
    fresh_daemon.stop(signal.SIGKILL)
    # The hangup of the dead daemon's PTYs ends the shells and their jobs; at least the setsid'd and the
    # signal-deaf processes live on...
    survivors = still_running(leftovers)
    assert len(survivors) >= 2
    assert fresh_daemon.socket.exists()  # ...and a dead socket file

    watch = LogWatch(fresh_daemon)
    start = time.monotonic()
    fresh_daemon.start()
    print(f"{containment}: restart with {len(survivors)} leftovers took {time.monotonic() - start:.2f} s to ready")
    wait_until(lambda: still_running(leftovers) == [], message="the crashed daemon's sessions to be killed")
    # The socket was reclaimed: the dead file refused connections, the new one serves (its inode number is no
    # evidence: the filesystem may give the freed number to the new file).
    assert "left by a previous daemon" in watch.text()
    assert [path for path in cgroups if path.exists()] == []
    with fresh_daemon.rpc() as rpc:
        assert rpc.call("daemon_info")["sessions"] == 0
        with pytest.raises(RpcError) as err:
            rpc.call("terminal_list", token=token)
        assert err.value.kind == "unauthorized"  # tokens die with their daemon
    pid = daemon_pid(fresh_daemon)
    wait_until(lambda: zombie_children(pid) == [], message="no zombie left")
    watch.assert_quiet()  # the recovery is a WARNING, nothing above it


def test_sigterm_with_100_live_sessions_closes_all_within_the_grace_and_exits_0(fresh_daemon: Daemon) -> None:
    fresh_daemon.start()
    arg, tag = unique_sleep()
    with fresh_daemon.rpc() as rpc:
        tokens = [rpc.call("agent_register", name=f"a{i}")["token"] for i in range(4)]
        shells = [s for token in tokens for s in populate(rpc, token, arg, 25)]
        assert rpc.call("daemon_info")["sessions"] == 100
        procs = wait_for_count(tag, 100)
        procs |= tops(shells)
    watch = LogWatch(fresh_daemon)
    start = time.monotonic()
    code = fresh_daemon.stop(signal.SIGTERM)
    took = time.monotonic() - start
    print(
        f"SIGTERM with 100 sessions ({len(procs)} tagged processes, 20 deaf to HUP/TERM): exit {code} in {took:.2f} s"
    )
    assert code == 0
    assert took < 10.0  # shutdown_grace_ms
    assert still_running(procs) == []
    assert "did not close" not in watch.text()
    assert "closing 100 sessions" in watch.text()
    assert not fresh_daemon.socket.exists()
    assert not (fresh_daemon.directory / "operator.token").exists()
    watch.assert_quiet()
