"""Sandboxed sessions through a real daemon and real bubblewrap: what a session's programs cannot reach, the limits
that stop a fork bomb and a memory hog (the daemon and a neighbour untouched), and the profiles an agent may ask for.

Needs bubblewrap and user namespaces (.ci/run installs bubblewrap) and, for the limits, a writable cgroup memory
and pids controller (root on these machines).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Daemon, Rpc, RpcError, Shell, hand_over, pid_alive, wait_until

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

TEMP = Path(tempfile.gettempdir()) / f"pytest-of-{getpass.getuser()}"  # the tests' workspaces are granted
CONFIG = (
    f'sandbox_roots = ["{TEMP}"]\n'
    + """
sandbox_agents = { "tight-agent" = "tight", "offline-agent" = "workspace-offline", "slow-agent" = "slow" }

[sandbox_profiles.tight]
filesystem = "workspace"
network = false
pids_max = 64
memory_mib = 256

[sandbox_profiles.secretive]
filesystem = "workspace"
hidden = ["~/.ptyd-test-hidden"]

[sandbox_profiles.slow]
filesystem = "workspace"
cpu_percent = 10

[sandbox_profiles.tighter]
filesystem = "readonly"
network = false
pids_max = 32
memory_mib = 128
"""
)
SANDBOXED = ["workspace", "workspace-offline", "readonly", "tight"]


@pytest.fixture(scope="module")
def sandboxing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    directory = tmp_path_factory.mktemp("ptyd-sandbox")
    directory.chmod(0o700)
    d = Daemon(directory, CONFIG)
    d.start()
    yield d
    assert d.stop() == 0, d.log()


@pytest.fixture
def client(sandboxing: Daemon) -> Iterator[Rpc]:
    with sandboxing.rpc() as rpc:
        yield rpc


def register(rpc: Rpc, name: str) -> str:
    token: str = rpc.call("agent_register", name=name)["token"]
    return token


@contextlib.contextmanager
def session(rpc: Rpc, name: str, workspace: Path, **params: Any) -> Iterator[Shell]:
    """A session of agent ``name`` in ``workspace/name``: two agents never share a workspace (refused)."""
    token = register(rpc, name)
    (workspace / name).mkdir(exist_ok=True)
    s = Shell(rpc, token, cwd=str(workspace / name), env={"PS1": "$ ", **params.pop("env", {})}, **params)
    try:
        yield s
    finally:
        with contextlib.suppress(RpcError, OSError):
            rpc.call("agent_release", token=token)


def last_lines(result: dict[str, Any], n: int = 3) -> str:
    return "\n".join(result["viewport"].splitlines()[-n:])


@pytest.mark.parametrize("profile", SANDBOXED)
def test_a_sandboxed_session_cannot_reach_the_runtime_dir_the_socket_or_other_processes(
    client: Rpc, sandboxing: Daemon, tmp_path: Path, profile: str
) -> None:
    token_file = sandboxing.directory / "operator.token"
    assert token_file.exists()
    daemon_pid = client.call("daemon_info")["pid"]
    with session(client, "neighbour", tmp_path) as neighbour, session(client, "me", tmp_path, sandbox=profile) as s:
        assert s.opened["sandbox"] == profile
        assert s.call("terminal_status")["sandbox"] == profile
        result = s.send(f"cat {token_file}; ls {sandboxing.directory} | wc -l\n")
        assert "No such file or directory" in result["viewport"], result["viewport"]
        assert result["viewport"].splitlines()[-2:-1] == ["0"] or "No such file" in last_lines(result, 2)
        connect = f"import socket; socket.socket(socket.AF_UNIX).connect('{sandboxing.socket}')"
        result = s.send(f'python3 -c "{connect}" 2>&1 | tail -1\n')
        assert "FileNotFoundError" in result["viewport"], result["viewport"]
        neighbour_pid = neighbour.opened["pid"]
        for pid in (daemon_pid, neighbour_pid):
            result = s.send(f"kill -9 {pid}; echo kill=$?\n")
            assert "kill=1" in result["viewport"], result["viewport"]
            assert "No such process" in result["viewport"]
            trace = f"import ctypes; print('ptrace', ctypes.CDLL(None, use_errno=True).ptrace(16, {pid}, 0, 0))"
            result = s.send(f'python3 -c "{trace}"; cat /proc/{pid}/mem; echo status=$?\n')
            assert "ptrace -1" in result["viewport"], result["viewport"]
            assert "status=1" in result["viewport"]
        assert pid_alive(daemon_pid)
        assert pid_alive(neighbour_pid)
        assert neighbour.send("echo alive\n")["wait_reason"] == "stdin_read"


@pytest.mark.parametrize("profile", SANDBOXED)
def test_writes_outside_the_workspace_fail_with_a_clear_error_and_inside_work(
    client: Rpc, tmp_path: Path, profile: str, request: pytest.FixtureRequest
) -> None:
    workspace = tmp_path / "writer"
    outside = Path(tempfile.mkdtemp(dir=Path.home(), prefix=".ptyd-test-"))  # not under /tmp: visible inside
    request.addfinalizer(lambda: shutil.rmtree(outside))
    with session(client, "writer", tmp_path, sandbox=profile) as s:
        result = s.send(f"echo in > {workspace}/inside; echo out > {outside}/x; echo t > /tmp/private\n")
        assert f"{outside}/x: Read-only file system" in result["viewport"], result["viewport"]
        assert not (outside / "x").exists()
        if profile == "readonly":
            assert f"{workspace}/inside: Read-only file system" in result["viewport"]
            assert not (workspace / "inside").exists()
        else:
            assert (workspace / "inside").read_text() == "in\n"
        assert not Path("/tmp/private").exists()  # its /tmp is its own
        assert s.send("cat /tmp/private\n")["viewport"].splitlines()[-2] == "t"


@pytest.fixture(scope="module")
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
    port = int(line.split(" port ")[1].split()[0])
    yield port
    proc.terminate()
    proc.wait(10)
    proc.stdout.close()


@pytest.mark.parametrize("profile", ["none", *SANDBOXED])
def test_the_network_is_reachable_only_where_the_profile_says(
    client: Rpc, tmp_path: Path, listener: int, profile: str
) -> None:
    fetch = f"import urllib.request as u; print('got', u.urlopen('http://127.0.0.1:{listener}/', timeout=5).status)"
    with session(client, "net", tmp_path, sandbox=profile) as s:
        result = s.send(f'python3 -c "{fetch}" 2>&1 | tail -1\n')
        routes = s.send('awk \'$2 == "00000000" {print "default via", $1}\' /proc/net/route\n')["viewport"]
    if profile == "none":
        assert "got 200" in result["viewport"], result["viewport"]
    else:  # workspace has a network, of its own (pasta: sandbox_network "auto"), without the machine's loopback
        assert "Connection refused" in result["viewport"], result["viewport"]
        assert ("default via " in routes) == (profile == "workspace"), routes


def test_a_fork_bomb_is_stopped_at_its_pids_limit_and_the_neighbour_and_daemon_carry_on(
    client: Rpc, tmp_path: Path
) -> None:
    with session(client, "tight-agent", tmp_path) as bomb, session(client, "neighbour", tmp_path) as neighbour:
        assert bomb.opened["sandbox"] == "tight"
        bomb.send(":(){ :|:& };:\n", timeout_ms=3_000)  # the bomb runs in the background: the prompt is back
        wait_until(lambda: bomb.call("terminal_status")["pids_limited"], timeout=20, message="the pids limit")
        info = bomb.call("terminal_status")
        assert info["limits"] == {"memory_mib": 256, "pids_max": 64, "cpu_percent": None}
        pids = next(path for path in session_limit_dirs(bomb.opened["pid"], bomb.id) if (path / "pids.max").exists())
        assert (pids / "pids.max").read_text().strip() == "64"
        if (pids / "pids.peak").exists():  # the kernel held it at the limit: reached, never passed
            assert int((pids / "pids.peak").read_text()) == 64
        started = time.monotonic()
        assert neighbour.send("echo still here\n")["viewport"].splitlines()[-2] == "still here"
        assert time.monotonic() - started < 5
        assert client.call("daemon_info")["sessions"] >= 2
        limit_dirs = session_limit_dirs(bomb.opened["pid"], bomb.id)
        assert len(limit_dirs) == 2, limit_dirs  # memory and pids
        assert all((path / "cgroup.procs").read_text().split() for path in limit_dirs)
        inside = {int(pid) for path in limit_dirs for pid in (path / "cgroup.procs").read_text().split()}
        closed = bomb.close()
        assert closed["closed"] is True
        # The bomb's pieces also die on their own (a failed fork ends one), so how many were left to kill varies;
        # the shell was, and none of what was in the session's cgroups just before the close outlives it.
        assert closed["killed"] >= 1
        assert not [pid for pid in inside if Path(f"/proc/{pid}").exists() and not _zombie(pid)], inside
        assert neighbour.send("echo after\n")["wait_reason"] == "stdin_read"
        assert not any(path.exists() for path in limit_dirs)  # removed with the session


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True  # gone meanwhile


def session_limit_dirs(pid: int, session_id: str) -> list[Path]:
    """The cgroup v1 directories of a session (its pid's memory and pids cgroups named after the session)."""
    mounts = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        if right.startswith("cgroup "):
            for option in right.split()[2].split(","):
                mounts[option] = (left.split()[3], left.split()[4])
    found = []
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        for name in names.split(","):
            if name in mounts and path.endswith("/" + session_id):
                root, point = mounts[name]
                found.append(Path(point) / os.path.relpath(path, root))
    return found


def test_a_memory_hog_is_killed_at_its_limit_and_the_result_says_so(client: Rpc, tmp_path: Path) -> None:
    daemon_pid = client.call("daemon_info")["pid"]
    with session(client, "tight-agent", tmp_path) as hog, session(client, "neighbour", tmp_path) as neighbour:
        result = hog.send('python3 -c \'b = b"x" * (512 << 20); print("survived")\'; echo status=$?\n')
        assert result["oom_killed"] is True, result
        assert "Killed" in result["viewport"]
        assert "status=137" in result["viewport"]
        assert "\nsurvived\n" not in result["viewport"]
        assert hog.call("terminal_status")["oom_killed"] is True
        assert hog.send("echo next\n")["oom_killed"] is False  # the flag is per send; the session goes on
        assert neighbour.send("echo fine\n")["viewport"].splitlines()[-2] == "fine"
        assert neighbour.call("terminal_status")["oom_killed"] is False
        assert pid_alive(daemon_pid)


def test_system_sockets_under_run_and_a_profiles_hidden_paths_are_out_of_reach(
    client: Rpc, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    listener = socket.socket(socket.AF_UNIX)
    path = Path("/run") / f"ptyd-test-{os.getpid()}.sock"
    listener.bind(str(path))
    listener.listen()
    request.addfinalizer(lambda: (listener.close(), path.unlink()))
    secrets = Path.home() / ".ptyd-test-hidden"
    secrets.mkdir(exist_ok=True)
    (secrets / "key").write_text("hunter2\n")
    request.addfinalizer(lambda: shutil.rmtree(secrets))
    connect = f"import socket; socket.socket(socket.AF_UNIX).connect('{path}'); print('connected')"
    with session(client, "plain", tmp_path) as plain:  # the socket works outside a sandbox
        assert "connected" in plain.send(f'python3 -c "{connect}" 2>&1 | tail -1\n')["viewport"].splitlines()
    with session(client, "me", tmp_path, sandbox="secretive") as s:
        result = s.send(f'python3 -c "{connect}" 2>&1 | tail -1\n')
        assert "FileNotFoundError" in result["viewport"], result["viewport"]
        result = s.send(f"cat {secrets}/key; getent hosts localhost >/dev/null && echo resolves\n")
        assert "hunter2" not in result["viewport"].splitlines()
        assert "No such file or directory" in result["viewport"]
        assert "resolves" in result["viewport"].splitlines()  # the resolver still works with /run emptied


def test_a_cpu_share_throttles_a_busy_loop(client: Rpc, tmp_path: Path) -> None:
    with session(client, "slow-agent", tmp_path) as busy:
        assert busy.call("terminal_status")["limits"] == {"memory_mib": None, "pids_max": None, "cpu_percent": 10}
        cpu = next(p for p in session_limit_dirs(busy.opened["pid"], busy.id) if (p / "cpu.cfs_quota_us").exists())
        assert (cpu / "cpu.cfs_quota_us").read_text().strip() == "10000"  # 10% of the 100 ms period
        loop = "import time; end = time.monotonic() + 1\nwhile time.monotonic() < end: pass"
        busy.send(f"python3 -c '{loop}'\n")
        stat = dict(line.split() for line in (cpu / "cpu.stat").read_text().splitlines())
        assert int(stat["nr_throttled"]) > 0, stat  # the kernel held it to its share


def test_an_agent_may_ask_for_a_stricter_profile_never_a_looser_one(client: Rpc, tmp_path: Path) -> None:
    token = register(client, "tight-agent")
    try:
        with pytest.raises(RpcError) as refused:
            client.call("terminal_open", token=token, cwd=str(tmp_path), sandbox="workspace")
        assert refused.value.kind == "sandbox_refused"
        assert refused.value.data["profile"] == "workspace"
        assert refused.value.data["agent_profile"] == "tight"
        assert refused.value.data["looser"] == ["network", "memory_mib", "pids_max"]
        for looser in ("none", "readonly"):  # readonly: stricter on files, but without tight's limits
            with pytest.raises(RpcError) as again:
                client.call("terminal_open", token=token, cwd=str(tmp_path), sandbox=looser)
            assert again.value.kind == "sandbox_refused"
            assert looser in again.value.message
        with pytest.raises(RpcError) as unknown:
            client.call("terminal_open", token=token, cwd=str(tmp_path), sandbox="nonesuch")
        assert unknown.value.kind == "sandbox_refused"
        assert "nonesuch" in unknown.value.message
        assert client.call("terminal_list", token=token)["sessions"] == []  # nothing was started
        opened = client.call("terminal_open", token=token, cwd=str(tmp_path), sandbox="tighter")
        assert opened["sandbox"] == "tighter"
    finally:
        client.call("agent_release", token=token)


def test_other_agents_workspaces_are_hidden(client: Rpc, tmp_path: Path) -> None:
    theirs = tmp_path / "other"
    with session(client, "other", tmp_path):
        (theirs / "secret").write_text("theirs\n")
        with session(client, "me", tmp_path, sandbox="workspace") as s:
            result = s.send(f"cat {theirs}/secret\n")
            assert "No such file or directory" in result["viewport"], result["viewport"]


def test_without_bubblewrap_a_sandboxed_open_is_refused_and_none_still_opens(
    fresh_daemon: Daemon, tmp_path: Path
) -> None:
    fresh_daemon.config_path.write_text('bwrap_program = "/nonexistent/bwrap"\nsandbox_default = "workspace"\n')
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        assert "not installed" in rpc.call("daemon_info")["sandbox"]
        token = register(rpc, "someone")
        with pytest.raises(RpcError) as refused:
            rpc.call("terminal_open", token=token, cwd=str(tmp_path))
        assert refused.value.kind == "sandbox_unavailable"
        assert "not installed" in refused.value.message
        assert rpc.call("daemon_info")["sessions"] == 0
        operator = (fresh_daemon.directory / "operator.token").read_text().strip()
        assert rpc.call("terminal_open", token=operator, cwd=str(tmp_path))["sandbox"] == "none"


def test_a_workspace_session_survives_a_handover_with_its_profile_and_limits(
    fresh_daemon: Daemon, tmp_path: Path
) -> None:
    fresh_daemon.config_path.write_text(CONFIG)
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        token = register(rpc, "tight-agent")
        s = Shell(rpc, token, cwd=str(tmp_path), env={"PS1": "$ "})
        assert s.send("echo before > f\n")["wait_reason"] == "stdin_read"
    hand_over(fresh_daemon)
    with fresh_daemon.rpc() as rpc:
        s.rpc = rpc
        info = s.call("terminal_status")
        assert info["sandbox"] == "tight"
        assert info["limits"]["pids_max"] == 64
        result = s.send("cat f; echo x > /etc/ptyd-test\n")
        assert "before" in result["viewport"]
        assert "Read-only file system" in result["viewport"]
        result = s.send("python3 -c 'b = b\"x\" * (512 << 20)'\n")
        assert result["oom_killed"] is True, result
        s.close()
    assert os.path.isdir(tmp_path)


def test_ptyd_mcp_tells_the_model_a_failure_was_the_sandboxs(client: Rpc, tmp_path: Path) -> None:
    from ptyd_mcp import text

    with session(client, "me", tmp_path, sandbox="workspace-offline") as s:
        denied = s.send("echo x > /etc/ptyd-test\n")
        assert denied["sandbox"] == "workspace-offline"
        said = text.send(denied, s.id)
        assert "SANDBOX:" in said
        assert "read-only" in said
        assert "ask the human" in said
        connect = "import socket; socket.create_connection(('10.1.2.3', 80), 3)"
        connect = "import socket; socket.create_connection(('10.1.2.3', 80), 3)"
        offline = s.send(f'python3 -c "{connect}" 2>&1 | tail -1\n')
        assert "Network is unreachable" in offline["viewport"], offline["viewport"]
        assert "no network" in text.send(offline, s.id)
        assert "SANDBOX:" not in text.send(s.send("echo fine\n"), s.id)
    with session(client, "plain", tmp_path) as plain:  # the same words from an unsandboxed session: no callout
        assert "SANDBOX:" not in text.send(plain.send("echo Read-only file system\n"), plain.id)
    with session(client, "tight-agent", tmp_path) as hog:
        killed = hog.send("python3 -c 'b = b\"x\" * (512 << 20)'\n")
        assert "MEMORY LIMIT:" in text.send(killed, hog.id)


def ptyctl(socket: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ptyd_client", "--socket", str(socket), *args],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("PTYD_")},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_ptyctl_opens_in_a_profile_and_ls_shows_it_with_what_its_limits_did(
    client: Rpc, sandboxing: Daemon, tmp_path: Path
) -> None:
    opened = ptyctl(sandboxing.socket, "open", "--sandbox", "readonly", "--cwd", str(tmp_path)).strip()
    with session(client, "tight-agent", tmp_path) as hog:
        hog.send("python3 -c 'b = b\"x\" * (512 << 20)'\n")
        rows = {line.split()[0]: line for line in ptyctl(sandboxing.socket, "ls").splitlines()}
        assert "SANDBOX" in rows["SESSION"]
        assert " readonly " in rows[opened]
        assert " tight oom " in rows[hog.id]
    ptyctl(sandboxing.socket, "close", opened)


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_a_sandboxed_shell_reports_exit_codes_wherever_ptyd_is_installed(
    client: Rpc, tmp_path: Path, shell: str
) -> None:
    """Each shell reads ptyd's integration files inside its sandbox, from ptyd's own directory: bound back where it
    lies in a private directory (a virtualenv or a clone under /tmp, which every sandbox replaces by its own),
    or the shell started without its marks (exit_code null, no cwd)."""
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    with session(client, f"{shell}-user", tmp_path, argv=[shell], sandbox="workspace") as s:
        result = s.send("cd /; false\n")
        assert (result["exit_code"], result["cwd"]) == (1, "/"), result


def test_fish_where_it_never_ran_prints_no_error_at_each_prompt(client: Rpc, tmp_path: Path) -> None:
    """A home fish never ran in, read-only in the sandbox: fish's first-run setup sets universal variables it cannot
    save, and printed "Unable to open universal variable file" at every prompt, into every viewport."""
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed")
    home = tmp_path / "home"
    (home / ".config" / "fish").mkdir(parents=True)
    with session(client, "fish-user", tmp_path, argv=["fish"], env={"HOME": str(home)}, sandbox="readonly") as s:
        assert s.send("false\n")["exit_code"] == 1
        result = s.send("echo done\n")
        assert result["exit_code"] == 0
        assert not any("universal variable" in line for line in s.transcript()), s.transcript()
        assert not (home / ".config" / "fish" / "fish_variables").exists()  # the home stayed read-only
