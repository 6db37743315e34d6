"""Shared probes for the hardening suite: what the kernel says about the daemon, a session's processes and the log.

Every oracle here reads /proc, the socket or the log file directly and shares no code with the daemon, so a
daemon bug cannot hide behind its own bookkeeping.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, settings

from conftest import Daemon, Rpc, Shell, end_keepers

# ----------------------------------------------------------------------------------------------------------------
# The daemon's footprint
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Footprint:
    """Resources the daemon holds: they must return to a baseline after any amount of traffic."""

    rss_kib: int
    threads: int
    fds: int

    def __str__(self) -> str:
        return f"rss {self.rss_kib / 1024:.1f} MiB, {self.threads} threads, {self.fds} fds"


def footprint(pid: int) -> Footprint:
    fields: dict[str, str] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return Footprint(
        rss_kib=int(fields["VmRSS"].split()[0]),
        threads=int(fields["Threads"]),
        fds=len(os.listdir(f"/proc/{pid}/fd")),
    )


def daemon_pid(daemon: Daemon) -> int:
    assert daemon.proc is not None
    assert daemon.proc.poll() is None, daemon.log()[-4000:]
    return daemon.proc.pid


def engine_workers(pid: int) -> list[int]:
    """The daemon's engine worker processes (its children running ``ptyd.terminal.workers.main``), sorted."""
    out = []
    for kid in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        with contextlib.suppress(OSError):
            if b"ptyd.terminal.workers.main" in Path(f"/proc/{kid}/cmdline").read_bytes():
                out.append(int(kid))
    return sorted(out)


def settled_fds(pid: int, at_most: int, timeout: float = 10.0) -> int:
    """The daemon's fd count once it drops to ``at_most`` (closing a connection takes a loop turn or two)."""
    deadline = time.monotonic() + timeout
    while True:
        count = footprint(pid).fds
        if count <= at_most or time.monotonic() > deadline:
            return count
        time.sleep(0.02)


# ----------------------------------------------------------------------------------------------------------------
# Processes, identified across pid reuse by (pid, start time)
# ----------------------------------------------------------------------------------------------------------------


class ProcId(NamedTuple):
    pid: int
    starttime: int


class ProcInfo(NamedTuple):
    ppid: int
    state: str
    starttime: int


def _stat(pid: int) -> ProcInfo | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    return ProcInfo(ppid=int(fields[1]), state=fields[0].decode(), starttime=int(fields[19]))


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def proc_id(pid: int) -> ProcId | None:
    info = _stat(pid)
    return None if info is None else ProcId(pid, info.starttime)


def still_running(procs: Iterable[ProcId]) -> list[ProcId]:
    """The processes that are still the same live process (a zombie has ended; a reused pid is another one)."""
    out = []
    for proc in procs:
        info = _stat(proc.pid)
        if info is not None and info.starttime == proc.starttime and info.state not in ("Z", "X"):
            out.append(proc)
    return out


def zombie_children(pid: int) -> list[int]:
    """Children of ``pid`` that exited and were never reaped."""
    out = []
    for candidate in _pids():
        info = _stat(candidate)
        if info is not None and info.ppid == pid and info.state == "Z":
            out.append(candidate)
    return out


def processes_tagged(tag: str) -> set[ProcId]:
    """Processes whose command line contains ``tag`` (tests start ``sleep 1000.<digits>`` to be found later)."""
    needle = tag.encode()
    found = set()
    for pid in _pids():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if needle in cmdline and (proc := proc_id(pid)) is not None:
            found.add(proc)
    return found


def session_processes(daemon: Daemon, session_id: str) -> set[ProcId]:
    """Every live process of a session: those carrying its marker variable, plus its cgroup's members."""
    marker = f"PTYD_SESSION={session_id}".encode()
    found = set()
    for pid in _pids():
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read().split(b"\0")
        except OSError:
            continue
        if marker in environ and (proc := proc_id(pid)) is not None:
            found.add(proc)
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        manifest = json.loads((daemon.directory / "sessions.json").read_text())
        cgroup = manifest["sessions"][session_id]["cgroup"]
        for word in (Path(cgroup) / "cgroup.procs").read_text().split():
            if (proc := proc_id(int(word))) is not None:
                found.add(proc)
    return set(still_running(found))


def unique_sleep() -> tuple[str, str]:
    """A ``sleep`` argument unique to this call, and the tag that finds its processes."""
    digits = str(secrets.randbelow(10**9)).zfill(9)
    return f"1000.{digits}", digits


def wait_for_count(tag: str, count: int, timeout: float = 20.0) -> set[ProcId]:
    deadline = time.monotonic() + timeout
    while True:
        procs = set(still_running(processes_tagged(tag)))
        if len(procs) >= count:
            return procs
        if time.monotonic() > deadline:
            raise AssertionError(f"only {len(procs)} of {count} processes tagged {tag} started")
        time.sleep(0.02)


# ----------------------------------------------------------------------------------------------------------------
# The daemon's log
# ----------------------------------------------------------------------------------------------------------------

_RECORD = re.compile(r"^ptyd: (DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+: ")


def log_problems(text: str) -> list[str]:
    """Lines a client's mistake must never cause: records above WARNING, tracebacks, and stray output.

    Every line the daemon writes is a log record (``ptyd: LEVEL logger: message``); anything else on its stderr
    is an uncaught exception, a warning or a message that smuggled a newline into the log.
    """
    problems = []
    for line in text.splitlines():
        match = _RECORD.match(line)
        if match is None or match.group(1) in ("ERROR", "CRITICAL"):
            problems.append(line)
    return problems


class LogWatch:
    """The part of a daemon's log written since the watch began."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.offset = daemon.log_path.stat().st_size if daemon.log_path.exists() else 0

    def text(self) -> str:
        with open(self.daemon.log_path, "rb") as f:
            f.seek(self.offset)
            return f.read().decode(errors="replace")

    def assert_quiet(self) -> None:
        problems = log_problems(self.text())
        assert problems == [], "the daemon logged above WARNING:\n" + "\n".join(problems[:40])


# ----------------------------------------------------------------------------------------------------------------
# Daemons and sessions
# ----------------------------------------------------------------------------------------------------------------


def private_dir(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    path = tmp_path_factory.mktemp(name)
    path.chmod(0o700)
    return path


@contextlib.contextmanager
def running_daemon(
    tmp_path_factory: pytest.TempPathFactory, name: str, config: str = "", *extra: str
) -> Iterator[Daemon]:
    """A daemon of the caller's own for a module's tests; it must still stop cleanly (exit 0) at the end."""
    daemon = Daemon(private_dir(tmp_path_factory, name), config)
    daemon.start(*extra)
    try:
        yield daemon
    finally:
        assert daemon.proc is not None
        if daemon.proc.poll() is None:
            code = daemon.stop(signal.SIGTERM)
            assert code == 0, daemon.log()[-4000:]
        end_keepers(daemon.directory)  # a daemon that died left its keeper holding the sessions


class Witness:
    """Another agent's session that hostile traffic must not reach: its transcript is the proof.

    It has its own connection, so it also proves that the daemon did not drop every client.
    """

    def __init__(self, daemon: Daemon) -> None:
        self.rpc = daemon.rpc()
        self.token: str = self.rpc.call("agent_register", name="witness")["token"]
        self.shell = Shell(self.rpc, self.token, env={"PS1": "$ "})
        self.mark = "witness-" + secrets.token_hex(6)
        assert self.shell.send(f"echo {self.mark}\n")["viewport"] == f"$ echo {self.mark}\n{self.mark}\n$"
        self.lines = self.shell.transcript()
        status = self.shell.call("terminal_status")
        self.size = (status["cols"], status["rows"])
        self.pid: int = status["pid"]

    @property
    def session_id(self) -> str:
        return self.shell.id

    def assert_untouched(self) -> None:
        assert self.shell.transcript() == self.lines
        status = self.shell.call("terminal_status")
        assert status["status"] == {"kind": "running"}
        assert status["busy"] is False
        assert (status["cols"], status["rows"]) == self.size
        assert status["pid"] == self.pid

    def assert_answers(self) -> None:
        """Still takes input and answers it (this changes the transcript, so it is the last check)."""
        mark = "again-" + secrets.token_hex(4)
        assert self.shell.send(f"echo {mark}\n")["viewport"] == f"$ echo {mark}\n{mark}\n$"
        self.lines = self.shell.transcript()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.shell.close()
        self.rpc.close()


def fuzzing(examples: int) -> settings:
    """Hypothesis settings against a live daemon: no deadline (the machine is shared, a round trip may stall),
    no example database written into the repository, and the per-test ``unharmed`` check runs once per test,
    not once per example, which is what the function-scoped-fixture health check would warn about.
    """
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )


# ----------------------------------------------------------------------------------------------------------------
# Raw frames
# ----------------------------------------------------------------------------------------------------------------


def kept_connection(daemon: Daemon) -> Rpc:
    """A connection for a whole module of raw frames: it presents a valid token first, as a client does, so the
    daemon keeps it past unauthenticated_connection_ms."""
    rpc = Rpc(daemon.socket)
    token = rpc.call("agent_register", name="wire")["token"]
    rpc.call("daemon_info", token=token)
    return rpc


SENTINEL_ID = "sentinel-\u2603-0f3a"
SENTINEL = json.dumps({"jsonrpc": "2.0", "id": SENTINEL_ID, "method": "daemon_info"}).encode() + b"\n"


def answers_to(rpc: Rpc, frame: bytes, expected: int) -> list[Any]:
    """Send one frame and a sentinel request; return the frame's ``expected`` answers.

    Requests on a connection run concurrently, so the answers may come before or after the sentinel's; one
    more answer than expected before the sentinel's is a failure here, one after it fails the next exchange.
    The sentinel's answer also proves that the daemon and this connection still work after the frame.
    """
    rpc.send_raw(frame + b"\n" + SENTINEL)
    out: list[Any] = []
    sentinel_seen = False
    while not sentinel_seen or len(out) < expected:
        reply = json.loads(rpc.recv_line())
        if isinstance(reply, dict) and reply.get("id") == SENTINEL_ID:
            assert "result" in reply, reply
            sentinel_seen = True
        else:
            out.append(reply)
            assert len(out) <= expected, f"more answers than the {expected} expected: {out}"
    return out


ERROR_CODES = {-32700, -32600, -32601, -32602, -32001, -32002, -32003, -32004, -32005, -32006, -32007}


def assert_response(reply: Any) -> None:
    """A well-formed JSON-RPC 2.0 response; an error is one of the documented ones, never an internal error."""
    assert isinstance(reply, dict), reply
    assert reply.get("jsonrpc") == "2.0", reply
    assert "id" in reply, reply
    assert ("result" in reply) != ("error" in reply), reply
    if "error" in reply:
        error = reply["error"]
        assert error["code"] in ERROR_CODES, reply
        assert isinstance(error["message"], str), reply
        assert isinstance(error["data"]["kind"], str), reply
