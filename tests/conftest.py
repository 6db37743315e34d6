"""Test harness: a real daemon process on a real socket in a private directory, and a raw JSON-RPC client."""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["sshd"]

ROOT = Path(__file__).resolve().parent.parent
EMULATOR = ""  # --emulator: the engine every test daemon runs (its config's ``emulator``); "" leaves "auto"
ENGINE_PROCESS = ""  # --engine-process: where it runs (``engine_process``); "" leaves the default, "worker"
# --sandbox: the profile every test daemon gives its agents (``sandbox_default``); "": "none", written into every
# test daemon's config that names no sandbox_default, so that the suite's daemons do the same on machines with and
# without bubblewrap (the default, "auto", would differ); tests/test_sandbox_default.py tests the default itself.
SANDBOX = ""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--emulator",
        choices=["auto", "ghostty", "pyte"],
        default="",
        help="the terminal engine of every daemon the tests start (.ci/run runs the terminal tests on pyte too)",
    )
    parser.addoption(
        "--engine-process",
        choices=["worker", "daemon"],
        default="",
        help="where every test daemon's engine runs (.ci/run reruns some tests with it in the daemon)",
    )
    parser.addoption(
        "--sandbox",
        default="",
        help="the sandbox profile of every agent of every daemon the tests start (.ci/run runs the readiness, "
        "relay and handover tests in 'workspace' too)",
    )
    parser.addoption(
        "--perf",
        action="store_true",
        help="hold latency claims to their tight bounds too (a quiet machine: make perf); see conftest.latency",
    )
    parser.addoption(
        "--stress",
        choices=["full", "ci"],
        default="full",
        help="the length of the slow tier's long tests: full (make stress), or ci, the bounded profile .ci/run "
        "runs in ~10 minutes on 2 cores; see conftest.stress",
    )


def pytest_configure(config: pytest.Config) -> None:
    global EMULATOR, ENGINE_PROCESS, PERF, SANDBOX, STRESS_CI
    EMULATOR = config.getoption("--emulator")
    ENGINE_PROCESS = config.getoption("--engine-process")
    SANDBOX = config.getoption("--sandbox")
    PERF = config.getoption("--perf")
    STRESS_CI = config.getoption("--stress") == "ci"


def on_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


MISSING_PROGRAM = "not installed"  # the words of every skip for a program the machine lacks
EXPECTED = "expected: "  # the start of a skip right on CI too (one engine's own feature, a known limit)


def skip_expected(reason: str) -> None:
    """Skip a test where it cannot apply on CI either, saying why (CI fails any other skip)."""
    pytest.skip(EXPECTED + reason)


def skip_reason(report: pytest.TestReport) -> str | None:
    """The reason of a skipped test, or None for any other outcome (an xfail is not a skip)."""
    if not report.skipped or hasattr(report, "wasxfail"):
        return None
    longrepr = report.longrepr
    return longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)


def missing_program_skip(report: pytest.TestReport) -> str | None:
    """The reason of a skip for a missing program (which .ci/run installs), or None for any other outcome."""
    reason = skip_reason(report)
    return reason if reason is not None and MISSING_PROGRAM in reason else None


def unverified_on_ci(report: pytest.TestReport) -> str | None:
    """Why a skip leaves a claim unverified on CI: any skip but an expected one (a missing program, a kernel
    feature, a cgroup controller, root). None when the report is no such skip."""
    reason = skip_reason(report)
    if reason is None or EXPECTED in reason:
        return None
    if MISSING_PROGRAM in reason:
        return f"{reason}. CI must run it: add the program to .ci/run's install list"
    return f"{reason}. CI must run it: give the CI machine what it needs, or say why it is expected (skip_expected)"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """On CI a skipped test fails unless its skip is expected: the relay, readiness and shell claims gated on mc,
    tmux, sshd..., and the sandbox limits gated on cgroup controllers, must run there, as the TypeScript harness
    demands `# skipped 0`."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    why = unverified_on_ci(report)
    if why is not None and on_ci():
        report.outcome = "failed"
        report.longrepr = f"skipped on CI: {why}"


PERF = False  # --perf: latency claims are held to their tight bounds too (make perf, on a quiet machine)


def latency(elapsed: float, *, tight: float, fallback: float, what: str) -> None:
    """A latency claim about the daemon, in seconds.

    The fast suite asserts only that ``what`` came before ``fallback``: the time after which the daemon would have
    answered anyway (idle_ms after the last output, a kill grace, the send's timeout). Beating it proves the daemon
    answered on its own evidence; any tighter bound on a loaded 2-core CI machine measures the machine, not the
    daemon. ``--perf`` (``make perf``) holds it to ``tight`` as well; bench/ measures latency as ratios.
    """
    assert elapsed < fallback, f"{what} took {elapsed:.2f} s: as long as the fallback ({fallback} s) it must beat"
    if PERF:
        assert elapsed < tight, f"{what} took {elapsed:.2f} s (perf bound {tight} s)"


STRESS_CI = False  # --stress=ci: the slow tier's bounded profile (.ci/run), not its full length (make stress)


def stress(full: int, *, ci: int) -> int:
    """How many rounds, sessions or examples a slow test runs: ``full`` under ``make stress``, ``ci`` under
    ``--stress=ci`` (.ci/run's slow phase, bounded to ~10 minutes on 2 cores). The assertions stay the same."""
    return ci if STRESS_CI else full


class RpcError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')} {error.get('message')}: {error.get('data')}")
        self.code: int = error["code"]
        self.message: str = error["message"]
        self.data: Any = error.get("data")
        self.kind: str | None = self.data.get("kind") if isinstance(self.data, dict) else None


class Rpc:
    """A blocking NDJSON JSON-RPC client: exactly what any language can do with a Unix socket."""

    def __init__(self, path: Path, timeout: float = 60.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(str(path))
        except OSError:
            self.sock.close()
            raise
        self._buf = b""
        self._next_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Rpc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_line(self) -> bytes:
        while b"\n" not in self._buf:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("daemon closed the connection")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def recv(self) -> Any:
        return json.loads(self.recv_line())

    def request(self, method: str, params: dict[str, Any] | None = None) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send_raw(json.dumps(message).encode() + b"\n")
        return self._next_id

    def response(self, request_id: int) -> Any:
        reply = self.recv()
        assert reply.get("id") == request_id, reply
        if "error" in reply:
            raise RpcError(reply["error"])
        return reply["result"]

    def call(self, method: str, **params: Any) -> Any:
        return self.response(self.request(method, params))


def sandboxed_config(config: str, profile: str) -> str:
    """``config`` with every agent in a copy of the built-in ``profile`` that may also write the tests' temporary
    directories (tests write to tmp_path), granted as the root of their workspaces."""
    from ptyd.config import BUILTIN_PROFILES

    base = BUILTIN_PROFILES[profile]
    temp = Path(tempfile.gettempdir()) / f"pytest-of-{getpass.getuser()}"
    # Sessions opened without a cwd run in their agent's scratch directory, one per unnamed agent: under this run's
    # temporary directory, which pytest removes, not the home's.
    current = temp / "pytest-current"
    scratch = (current.resolve() if current.exists() else temp) / "ptyd-scratch"
    # The machine's network: the relay tests' sshd listens on its loopback, which a namespace of the session's own
    # (sandbox_network "auto" with pasta) keeps out of reach; tests/test_sandbox_network.py covers that one.
    network = "" if "sandbox_network" in config else 'sandbox_network = "host"\n'
    return (
        f'sandbox_default = "ci-{profile}"\nsandbox_roots = ["{temp}"]\nsandbox_scratch_dir = "{scratch}"\n{network}'
        f"{config}\n[sandbox_profiles.ci-{profile}]\n"
        f'filesystem = "{base.filesystem}"\nnetwork = {str(base.network).lower()}\nwritable = ["{temp}"]\n'
    )


class ConfigPath(type(Path())):  # type: ignore[misc]
    """A test daemon's config file: what a test writes there names sandbox_default "none" unless it names one, so
    that the suite's daemons behave alike with and without bubblewrap (see SANDBOX)."""

    def write_text(self, data: str, *args: Any, **kwargs: Any) -> int:
        if "sandbox_default" not in data:
            data = f'sandbox_default = "none"\n{data}'
        return super().write_text(data, *args, **kwargs)


class Daemon:
    def __init__(self, directory: Path, config: str = "") -> None:
        self.directory = directory
        self.socket = directory / "ptyd.sock"
        self.config_path = ConfigPath(directory / "config.toml")
        if EMULATOR and "emulator" not in config:
            config = f'emulator = "{EMULATOR}"\n{config}'
        if ENGINE_PROCESS and "engine_process" not in config:
            config = f'engine_process = "{ENGINE_PROCESS}"\n{config}'
        if SANDBOX and "sandbox_default" not in config:
            config = sandboxed_config(config, SANDBOX)
        self.config_path.write_text(config)
        self.log_path = directory / "daemon.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *extra: str, wait: bool = True) -> subprocess.Popen[bytes]:
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ptyd",
                "--socket",
                str(self.socket),
                "--config",
                str(self.config_path),
                *extra,
            ],
            stdout=log,
            stderr=log,
            cwd=ROOT,
            # Without the developer's SHELL too, as under CI and cron: a session gets the login shell from the daemon.
            env={k: v for k, v in os.environ.items() if not k.startswith("PTYD_") and k != "SHELL"},
        )
        log.close()
        if wait:
            self.wait_ready()
        return self.proc

    def wait_ready(self, timeout: float = 20.0) -> None:
        """The daemon is ready when its socket accepts a connection and answers daemon_info."""
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with Rpc(self.socket, timeout=5) as rpc:
                    rpc.call("daemon_info")
                return
            except (FileNotFoundError, ConnectionRefusedError):
                if time.monotonic() > deadline:
                    raise AssertionError(f"daemon did not start:\n{self.log()}") from None
                time.sleep(0.02)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def rpc(self) -> Rpc:
        return Rpc(self.socket)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)


def _private_dir(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    path = tmp_path_factory.mktemp(name)
    path.chmod(0o700)
    return path


@pytest.fixture(scope="session")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(_private_dir(tmp_path_factory, "ptyd"))
    d.start()
    if EMULATOR and EMULATOR != "auto":
        assert f"emulator {EMULATOR})" in d.log()
    yield d
    code = d.stop()
    end_keepers(d.directory)  # if it died, its keeper holds the suite's sessions
    assert code == 0, d.log()


def keepers(directory: Path) -> list[int]:
    """The live ``ptyd keeper`` processes serving the daemon whose runtime directory is ``directory``."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"keeper" in argv and str(directory).encode() in argv:
                found.append(int(name))
    return [pid for pid in found if pid_alive(pid)]


def end_keepers(directory: Path) -> None:
    """End the keeper a test's crashed daemon left (it would hold the sessions for fd_keeper_grace_ms): its
    masters close, and the sessions get their hangup as after a crash without one."""
    for pid in keepers(directory):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    wait_until(lambda: not keepers(directory), message="the keeper's exit")


@pytest.fixture
def fresh_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """A daemon of the test's own, for tests that stop, crash or reconfigure it."""
    d = Daemon(_private_dir(tmp_path_factory, "ptyd-own"))
    yield d
    if d.proc is not None and d.proc.poll() is None:
        # SIGTERM, so the daemon ends its sessions, its keeper and its cgroup; SIGKILL only if it does not exit.
        try:
            d.stop(signal.SIGTERM, timeout=30)
        except subprocess.TimeoutExpired:
            d.stop(signal.SIGKILL)
    end_keepers(d.directory)  # a daemon the test crashed (or the SIGKILL above) left its keeper


@pytest.fixture
def rpc(daemon: Daemon) -> Iterator[Rpc]:
    with daemon.rpc() as client:
        yield client


@pytest.fixture
def token(rpc: Rpc) -> Iterator[str]:
    tok = rpc.call("agent_register", name="test")["token"]
    yield tok
    with contextlib.suppress(RpcError, OSError):
        rpc.call("agent_release", token=tok)


class Shell:
    """One session and the calls a test makes on it."""

    def __init__(self, rpc: Rpc, token: str, **open_params: Any) -> None:
        self.rpc = rpc
        self.token = token
        self.opened = rpc.call("terminal_open", token=token, **open_params)
        self.id: str = self.opened["session_id"]

    def send(self, text: str, **params: Any) -> Any:
        params.setdefault("timeout_ms", 20_000)
        return self.rpc.call("terminal_send", token=self.token, session_id=self.id, input=text, **params)

    def call(self, method: str, **params: Any) -> Any:
        return self.rpc.call(method, token=self.token, session_id=self.id, **params)

    def transcript(self) -> list[str]:
        return self.call("terminal_read", start_line=0, max_lines=100_000, max_bytes=16 * 1024 * 1024)["lines"]

    def close(self) -> Any:
        return self.call("terminal_close")


@pytest.fixture
def shell(rpc: Rpc, token: str) -> Iterator[Shell]:
    s = Shell(rpc, token, env={"PS1": "$ "})
    yield s
    with contextlib.suppress(RpcError, OSError):
        s.close()


@pytest.fixture
def human_shell(rpc: Rpc, token: str) -> Iterator[Shell]:
    """A session with the environment as it is (env_profile human): less and other programs with their own
    defaults, where the agent preset's LESS=-FRX keeps less off the alternate screen."""
    s = Shell(rpc, token, env={"PS1": "$ "}, env_profile="human")
    yield s
    with contextlib.suppress(RpcError, OSError):
        s.close()


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def wait_until(predicate: Any, timeout: float = 10.0, message: str = "condition") -> Any:
    """Poll a condition about the outside world (a process gone, a file there) with a deadline; its first true value.

    Callers use the value the poll saw rather than asking again: the world may have moved since (a process found
    mid-exec has no environment for an instant)."""
    deadline = time.monotonic() + timeout
    while not (seen := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        time.sleep(0.01)
    return seen


def hand_over(daemon: Daemon, handovers: int = 1) -> None:
    """SIGUSR2 (a live upgrade), then wait until the new daemon serves with ``handovers`` handovers counted."""
    assert daemon.proc is not None
    daemon.proc.send_signal(signal.SIGUSR2)

    def handed() -> bool:
        with contextlib.suppress(OSError, RpcError), daemon.rpc() as rpc:
            return bool(rpc.call("daemon_info")["handovers"] >= handovers)
        return False

    wait_until(handed, timeout=60, message="the handover")


def session_pids(shell: Shell) -> list[int]:
    """Every process of the session, as the session itself sees it (via its own marker variable)."""
    marker = f"PTYD_SESSION={shell.id}".encode()
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    if marker in f.read().split(b"\0"):
                        pids.append(int(name))
            except OSError:
                continue
    return [pid for pid in pids if pid_alive(pid)]


def start_escapee(shell: Shell) -> int:
    """A descendant in a session of its own (so neither the process group nor the PTY's hangup reaches it)."""
    shell.send("setsid nohup sleep 1000 > /dev/null 2>&1 &\n")

    def escapee() -> int | None:
        for pid in session_pids(shell):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rpartition(")")[2].split()
            except OSError:  # a short-lived process of the session (setsid's own fork) ended since it was listed
                continue
            if int(fields[3]) == pid and pid != shell.opened["pid"]:  # its own session's leader
                return pid
        return None

    pid: int = wait_until(escapee, message="the escapee")  # once found: mid-exec it may drop out of a second look
    return pid
