"""Program faults: floods, signal-deaf programs, fork loops, double-forked daemons, closed ttys, raw mode.

Every process a session started is found by its command line (``sleep 1000.<digits>``), not by asking the
daemon, and must be gone after the close.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterable, Iterator

import pytest

from conftest import Daemon, Rpc, RpcError, Shell, latency, skip_expected, wait_until

from .conftest import OwnSession
from .probes import (
    ProcId,
    daemon_pid,
    footprint,
    running_daemon,
    still_running,
    unique_sleep,
    wait_for_count,
    zombie_children,
)

pytestmark = pytest.mark.usefixtures("unharmed")


@pytest.fixture
def session(module_daemon: Daemon) -> Iterator[Shell]:
    with module_daemon.rpc() as rpc:
        shell = Shell(rpc, rpc.call("agent_register", name="program")["token"], env={"PS1": "$ "})
        yield shell
        try:
            shell.close()
        finally:
            rpc.call("agent_release", token=shell.token)


def test_yes_forever_keeps_memory_bounded_and_other_sessions_responsive(
    module_daemon: Daemon, own: OwnSession, session: Shell
) -> None:
    pid = daemon_pid(module_daemon)
    before = footprint(pid)
    session.send("yes\n", wait=False)
    peak = before.rss_kib
    latencies = []
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        start = time.monotonic()
        assert own.shell.send("echo ok\n")["viewport"] == "$ echo ok\nok\n$"
        latencies.append(time.monotonic() - start)
        peak = max(peak, footprint(pid).rss_kib)
    flooded = session.call("terminal_status")["total_lines"]
    assert session.call("terminal_cancel")["cancelled"] is True
    result = session.call("terminal_wait", timeout_ms=10_000)["result"]
    assert result["viewport"].startswith("$ yes\ny\n")
    assert result["viewport"].endswith("\n$")  # yes ended by the SIGINT, the prompt back
    grown = peak - before.rss_kib
    print(
        f"yes for 5 s: {flooded} lines rendered; daemon grew {grown / 1024:.1f} MiB at peak; other session's "
        f"send p50 {statistics.median(latencies) * 1000:.1f} ms, max {max(latencies) * 1000:.0f} ms "
        f"over {len(latencies)} sends"
    )
    assert flooded > 10_000  # the flood really ran
    assert grown < 64 * 1024
    # A stalled loop would make the other session's sends wait for idle_ms (3 s): each must beat that.
    latency(statistics.median(latencies), tight=0.25, fallback=3.0, what="the median send beside a flood")
    latency(max(latencies), tight=2.0, fallback=3.0, what="the slowest send beside a flood")


def test_a_program_ignoring_hup_and_term_is_killed_within_the_graces(session: Shell) -> None:
    arg, tag = unique_sleep()
    deaf = f"import signal, time; [signal.signal(s, signal.SIG_IGN) for s in (1, 2, 15)]; time.sleep({arg})"
    session.send(f"trap '' HUP TERM; python3 -c '{deaf}' & sleep {arg} & trap '' HUP TERM\n")
    procs = wait_for_count(tag, 2)
    start = time.monotonic()
    closed = session.close()
    took = time.monotonic() - start
    assert still_running(procs) == []
    print(f"close of signal-deaf programs took {took:.2f} s")
    assert closed["killed"] >= 3
    # The hup and term graces, then SIGKILL ends it promptly (the fallback: the SIGKILL wait of 5 s runs out).
    latency(took, tight=0.5 + 1.5 + 2.0, fallback=0.5 + 1.5 + 5.0, what="closing signal-deaf programs")


@pytest.fixture(scope="module", params=["auto", "subreaper"])
def contained(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """The tree-kill tests run under each containment: cgroup (auto, where writable) and subreaper+marker."""
    config = f'containment = "{request.param}"\n'
    with running_daemon(tmp_path_factory, f"contained-{request.param}", config) as daemon:
        yield daemon


def contained_shell(rpc: Rpc) -> Shell:
    return Shell(rpc, rpc.call("agent_register")["token"], env={"PS1": "$ "})


def assert_gone_and_reaped(daemon: Daemon, procs: Iterable[ProcId]) -> None:
    wait_until(lambda: still_running(procs) == [], timeout=10, message="every process of the session to end")
    pid = daemon_pid(daemon)
    wait_until(lambda: zombie_children(pid) == [], timeout=5, message="the daemon to reap its children")


def test_a_fork_loop_of_300_background_processes_is_killed_on_close(contained: Daemon) -> None:
    arg, tag = unique_sleep()
    with contained.rpc() as rpc:
        shell = contained_shell(rpc)
        shell.send(f"for i in $(seq 300); do sleep {arg} & done\n", timeout_ms=60_000)
        procs = wait_for_count(tag, 300)
        start = time.monotonic()
        closed = shell.close()
        took = time.monotonic() - start
        containment = rpc.call("daemon_info")["containment"]
        rpc.call("agent_release", token=shell.token)
    print(f"{containment}: closing 300 background processes took {took:.2f} s, {closed['killed']} signalled")
    assert closed["closed"] is True
    assert_gone_and_reaped(contained, procs)


ESCAPES = {
    "setsid-nohup": "setsid nohup sleep {arg} > /dev/null 2>&1 &",
    "double-fork": "(sleep {arg} &) &",
    "double-fork-setsid": "(setsid sleep {arg} > /dev/null 2>&1 &)",
    "nohup-disown": "nohup sleep {arg} > /dev/null 2>&1 & disown",
    "daemonized-python": (
        "python3 -c 'import os, time\nif os.fork(): os._exit(0)\nos.setsid()\nif os.fork(): os._exit(0)\n"
        "os.closerange(0, 3); time.sleep({arg})' {arg}"
    ),
}


@pytest.mark.parametrize("escape", list(ESCAPES.values()), ids=list(ESCAPES))
def test_double_forked_daemons_are_killed_on_close(contained: Daemon, escape: str) -> None:
    arg, tag = unique_sleep()
    with contained.rpc() as rpc:
        shell = contained_shell(rpc)
        shell.send(escape.format(arg=arg) + "\n")
        procs = wait_for_count(tag, 1)
        shell.close()
        rpc.call("agent_release", token=shell.token)
    assert_gone_and_reaped(contained, procs)


def test_an_escapee_that_scrubs_its_environment_is_killed_with_cgroups(contained: Daemon) -> None:
    arg, tag = unique_sleep()
    with contained.rpc() as rpc:
        if rpc.call("daemon_info")["containment"] != "cgroup":
            # Where the daemon finds no writable cgroup v2 subtree of its own (CI's machine), "auto" is the
            # subreaper, whose documented limit this is; the cgroup claim runs where one is.
            skip_expected("documented limit of subreaper containment: setsid + env -i leaves the session's view")
        shell = contained_shell(rpc)
        shell.send(f"setsid env -i /bin/sleep {arg} > /dev/null 2>&1 &\n")
        procs = wait_for_count(tag, 1)
        shell.close()
        rpc.call("agent_release", token=shell.token)
    assert_gone_and_reaped(contained, procs)


def test_a_program_that_closes_its_tty(module_daemon: Daemon) -> None:
    arg, tag = unique_sleep()
    with module_daemon.rpc() as rpc:
        token = rpc.call("agent_register")["token"]
        argv = ["bash", "-c", f"exec 0<&- 1>&- 2>&-; exec sleep {arg}"]
        shell = Shell(rpc, token, type="exec", argv=argv, idle_ms=200)
        procs = wait_for_count(tag, 1)
        start = time.monotonic()
        result = shell.send("anyone there?\n", idle_ms=300, timeout_ms=5_000)
        latency(time.monotonic() - start, tight=3.0, fallback=5.0, what="a send nobody reads")  # 5.0: timeout_ms
        assert result["wait_reason"] in ("inferred_idle", "timeout")  # nobody will ever read it
        assert shell.call("terminal_status")["status"] == {"kind": "running"}
        shell.close()
        rpc.call("agent_release", token=token)
    assert_gone_and_reaped(module_daemon, procs)


def test_a_program_that_hangs_up_its_tty(session: Shell) -> None:
    """vhangup(2) revokes every open file of the terminal, the daemon's own slave fd included."""
    hangup = "import ctypes, time; ctypes.CDLL(None).vhangup(); time.sleep(1000)"
    result = session.send(f"python3 -c '{hangup}'\n", idle_ms=500, timeout_ms=10_000)
    assert result["wait_reason"] in ("session_exit", "inferred_idle")
    assert session.call("terminal_read")["lines"][0].startswith("$ python3")
    session.call("terminal_status")


@pytest.mark.parametrize(
    ("command", "status"),
    [
        ("sleep 0.2; exit 3", {"kind": "exited", "exit_code": 3, "signal": None}),
        ("kill -KILL $$", {"kind": "exited", "exit_code": None, "signal": "SIGKILL"}),
        ("exec true", {"kind": "exited", "exit_code": 0, "signal": None}),
    ],
)
def test_the_shell_exits_while_a_send_is_active(session: Shell, command: str, status: dict[str, object]) -> None:
    result = session.send(f"{command}\n")
    assert result["wait_reason"] == "session_exit"
    assert result["session_status"] == status
    with pytest.raises(RpcError) as err:
        session.send("echo too late\n")
    assert err.value.kind == "session_exited"
    assert session.call("terminal_read")["lines"][0] == f"$ {command}"
    assert session.call("terminal_status")["status"] == status


def test_the_shell_exits_while_its_child_holds_the_tty(module_daemon: Daemon, session: Shell) -> None:
    arg, tag = unique_sleep()
    result = session.send(f"sleep {arg} & exit\n")
    assert result["wait_reason"] == "session_exit"
    procs = wait_for_count(tag, 1)
    assert session.close()["killed"] >= 1
    assert_gone_and_reaped(module_daemon, procs)


def test_the_shell_exits_during_a_background_send_and_the_waiter_hears_it(session: Shell) -> None:
    session.send("sleep 0.3; exit 7\n", wait=False)
    waited = session.call("terminal_wait", timeout_ms=10_000)
    assert waited["done"] is True
    assert waited["result"]["wait_reason"] == "session_exit"
    assert waited["result"]["session_status"] == {"kind": "exited", "exit_code": 7, "signal": None}


def test_raw_mode_without_echo(session: Shell) -> None:
    assert session.send("stty raw -echo; cat > /dev/null\n")["wait_reason"] == "stdin_read"
    result = session.send("secret\r")
    assert result["wait_reason"] == "stdin_read"  # cat took it and waits for more
    assert "secret" not in result["viewport"]  # nothing echoes in raw mode
    assert session.call("terminal_signal", signal="INT")["delivered"] is True  # ^C is a plain byte now
    assert session.send("stty sane\n")["wait_reason"] == "stdin_read"


def test_raw_mode_and_never_reading(session: Shell) -> None:
    # It says when raw mode is on, so the typeahead below is sent after it and not while python3 starts.
    sleeper = "import tty, time; tty.setraw(0); print(chr(82) * 3, flush=True); time.sleep(1000)"
    assert session.send(f"python3 -c '{sleeper}'\n", until="RRR")["wait_reason"] == "matched"
    start = time.monotonic()
    result = session.send("typed ahead", idle_ms=300, timeout_ms=5_000)
    latency(time.monotonic() - start, tight=3.0, fallback=5.0, what="typeahead in raw mode")  # 5.0: timeout_ms
    assert result["wait_reason"] == "inferred_idle"
    assert result["viewport"].strip() == ""
