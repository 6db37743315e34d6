"""ptyd-mcp over streamable HTTP (a Unix socket, a loopback port), and how it is installed beside the daemon."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import re
import shutil
import socket
import stat
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from conftest import Daemon, Shell, latency
from ptyd_mcp.identity import secret_path, token_path
from ptyd_mcp.tools import BY_NAME

from .harness import ROOT, new_agent, ok, server_argv, server_env


@contextlib.contextmanager
def serving_http(socket_path: Path, unix: Path | None) -> Iterator[tuple[str, Path | None, dict[str, str]]]:
    """``ptyd-mcp`` serving HTTP; yields the endpoint URL, the Unix socket (None for a port) and the headers a
    request needs (the bearer secret, read from where the server says it keeps it)."""
    listen = ["--http-socket", str(unix)] if unix else ["--http-port", "0"]
    agent = new_agent()
    argv = server_argv(socket_path, agent, *listen)
    proc = subprocess.Popen(argv, env=server_env(), cwd=ROOT, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    try:
        url = "http://localhost/mcp"
        if unix is None:
            announced = re.search(r"http://127\.0\.0\.1:\d+/mcp", proc.stderr.readline())
            assert announced, "ptyd-mcp did not announce its port"
            url = announced.group(0)
        said = re.search(r"Authorization: Bearer SECRET\", SECRET in (\S+)$", proc.stderr.readline())
        assert said, "ptyd-mcp did not say where its secret is"
        kept = Path(said.group(1))
        assert kept == secret_path(socket_path, agent)
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        if unix is not None:
            deadline = time.monotonic() + 20
            while not unix.exists():  # bound and listening before the path appears
                assert proc.poll() is None, "ptyd-mcp exited"
                assert time.monotonic() < deadline, "ptyd-mcp did not start"
                time.sleep(0.01)
        yield url, unix, {"Authorization": f"Bearer {kept.read_text().strip()}"}
    finally:
        proc.terminate()
        proc.wait(20)
        proc.stderr.close()


@pytest.fixture
def http_server(
    request: pytest.FixtureRequest, daemon: Daemon, tmp_path: Path
) -> Iterator[tuple[str, Path | None, dict[str, str]]]:
    with serving_http(daemon.socket, tmp_path / "mcp.sock" if request.param == "unix" else None) as served:
        yield served


@pytest.mark.parametrize("http_server", ["unix", "port"], indirect=True)
def test_streamable_http(http_server: tuple[str, Path | None, dict[str, str]]) -> None:
    url, unix, headers = http_server
    if unix is not None:
        assert stat.S_IMODE(unix.stat().st_mode) == 0o600

    async def scenario() -> None:
        transport = httpx2.AsyncHTTPTransport(uds=str(unix)) if unix else None
        async with httpx2.AsyncClient(transport=transport) as http:  # without the secret: 401, and nothing else
            refused = await http.post(url, json=INITIALIZE, headers={"Accept": "application/json, text/event-stream"})
            assert (refused.status_code, refused.text) == (401, "unauthorized\n")
            wrong = await http.post(url, json=INITIALIZE, headers={"Authorization": headers["Authorization"] + "x"})
            assert wrong.status_code == 401
        async with (
            httpx2.AsyncClient(transport=transport, headers=headers) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            assert {tool.name for tool in (await client.list_tools()).tools} == set(BY_NAME)
            _, opened = await ok(client, "terminal_open", env={"PS1": "$ "})
            _, sent = await ok(client, "terminal_send", session_id=opened["session_id"], input="echo over-http\n")
            assert "over-http" in sent["viewport"]
            await ok(client, "terminal_close", session_id=opened["session_id"])

    anyio.run(scenario)


@pytest.mark.parametrize("http_server", ["unix"], indirect=True)
def test_a_second_server_leaves_a_live_servers_socket_alone(
    http_server: tuple[str, Path | None, dict[str, str]], daemon: Daemon
) -> None:
    unix = http_server[1]
    assert unix is not None
    argv = server_argv(daemon.socket, new_agent(), "--http-socket", str(unix))
    second = subprocess.run(argv, env=server_env(), cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert second.returncode == 1
    assert "held by another listener" in second.stderr
    assert unix.is_socket()


NOBODY = 65534


def status_seen_by_nobody(port: int) -> str:
    """Fork a child that drops to nobody and asks the server for /mcp; the HTTP status it got back."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            with socket.socket() as sock:  # no create_connection: its idna codec is unreadable after the drop
                sock.settimeout(10)
                sock.connect(("127.0.0.1", port))
                sock.sendall(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
                os.write(write_end, sock.recv(4096).split(b"\r\n", 1)[0])
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as answer:
        status = answer.read().decode()
    os.waitpid(pid, 0)
    return status


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another uid needs root")
@pytest.mark.parametrize("http_server", ["port"], indirect=True)
def test_a_loopback_port_serves_only_this_user(http_server: tuple[str, Path | None, dict[str, str]]) -> None:
    port = int(http_server[0].rsplit(":", 1)[1].split("/")[0])
    assert status_seen_by_nobody(port) == "HTTP/1.1 401 Unauthorized"  # the secret first; then the uid (403)

    async def same_user() -> int:
        async with httpx2.AsyncClient(headers=http_server[2]) as http:
            return (await http.get(http_server[0], headers={"Accept": "text/event-stream"})).status_code

    assert anyio.run(same_user) not in (401, 403)


def test_a_socket_no_sandbox_sees_needs_no_secret(daemon: Daemon, tmp_path: Path) -> None:
    from ptyd_mcp.http import private_to_sessions

    assert private_to_sessions(daemon.socket.parent / "mcp.sock", daemon.socket)  # the daemon's runtime directory
    assert not private_to_sessions(tmp_path / "mcp.sock", daemon.socket)
    assert not private_to_sessions(Path.home() / "mcp.sock", "ssh://host")


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "curl", "version": "1"}},
}


@pytest.mark.skipif(shutil.which("bwrap") is None or shutil.which("curl") is None, reason="needs bwrap and curl")
@pytest.mark.parametrize(("network", "answer"), [("auto", "code=000"), ("host", "code=401")])
def test_a_sandboxed_session_cannot_use_the_http_port(
    fresh_daemon: Daemon, tmp_path: Path, network: str, answer: str
) -> None:
    """Issue 27, attack 2: by default (sandbox_network "auto", pasta installed) a workspace session's loopback is
    its own, and a real HTTP client in it cannot even connect to the port (curl's code 000); where it shares the
    machine's ("host"), and the user, it reaches the port and gets 401. Either way it cannot read the secret."""
    fresh_daemon.config_path.write_text(
        f'sandbox_default = "workspace"\nsandbox_network = "{network}"\nsandbox_scratch_dir = "{tmp_path}/scratch"\n'
    )
    fresh_daemon.start()
    with serving_http(fresh_daemon.socket, None) as (url, _, headers), fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register", name="hostile")["token"]
        s = Shell(rpc, token, env={"PS1": "$ "})
        assert s.opened["sandbox"] == "workspace"
        body = json.dumps(INITIALIZE)
        curl = (
            f"curl -s -o /dev/null -w 'code=%{{http_code}}\\n' -H 'Content-Type: application/json' "
            f"-H 'Accept: application/json, text/event-stream' --data '{body}' {url}\n"
        )
        result = s.send(curl)
        assert answer in result["viewport"], result["viewport"]
        secret = re.sub(r"^Bearer ", "", headers["Authorization"])
        kept = secret_path(fresh_daemon.socket, "x").parent
        result = s.send(f"cat {kept}/*\n")  # ptyd's runtime directory: hidden
        assert "No such file or directory" in result["viewport"]
        assert secret not in result["viewport"]
        # The same request, with the secret, from outside: served.
        asked = ["-H", "Content-Type: application/json", "-H", "Accept: application/json, text/event-stream"]
        outside = subprocess.run(
            [
                "curl",
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "-H",
                f"Authorization: {headers['Authorization']}",
                *asked,
                "--data",
                body,
                url,
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        assert outside.stdout == "200"


def test_the_daemon_never_imports_the_mcp_sdk() -> None:
    probe = (
        "import pkgutil, importlib, sys, ptyd\n"
        "names = [m.name for m in pkgutil.walk_packages(ptyd.__path__, 'ptyd.') if not m.name.endswith('__main__')]\n"
        "for name in names: importlib.import_module(name)\n"
        "print(' '.join(sorted({n.split('.')[0] for n in sys.modules})))"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    loaded = set(proc.stdout.split())
    assert "ptyd" in loaded
    assert "msgspec" in loaded
    assert not loaded & {
        "mcp",
        "mcp_types",
        "ptyd_mcp",
        "ptyd_web",
        "pydantic",
        "starlette",
        "uvicorn",
        "httpx2",
        "anyio",
    }


def test_ptyd_mcp_is_installed_with_the_project_and_its_sdk_is_an_extra() -> None:
    scripts = {ep.name: ep for ep in importlib.metadata.distribution("ptyd").entry_points}
    assert scripts["ptyd-mcp"].value == "ptyd_mcp.cli:main"
    requires = importlib.metadata.requires("ptyd") or []
    pin = next(r for r in requires if r.startswith("mcp"))
    assert pin == f'mcp=={importlib.metadata.version("mcp")}; extra == "mcp"', "the SDK in use is the pinned one"
    # The core (no extra) is the daemon's few packages: none of the faces' frameworks.
    core = {re.split(r"[<>=!;\[ ]", r, maxsplit=1)[0] for r in requires if "extra ==" not in r}
    assert core == {"msgspec", "pyte", "uvloop", "wcwidth", "pyghostty"}, core
    web = {re.split(r"[<>=!;\[ ]", r, maxsplit=1)[0] for r in requires if 'extra == "web"' in r}
    assert web == {"starlette", "uvicorn"}
    assert any('extra == "all"' in r for r in requires)
    command = Path(sys.executable).parent / "ptyd-mcp"
    version = subprocess.run([command, "--version"], capture_output=True, text=True, check=True).stdout
    assert version.startswith("ptyd-mcp ")


def test_the_command_line_loads_no_sdk() -> None:
    """--help, --version and a bad flag answer at once: the SDK is imported only to serve."""
    probe = "import sys, ptyd_mcp.cli; ptyd_mcp.cli.parse_args(['--tools', 'ptyd,codex']); print(' '.join(sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    loaded = {name.split(".")[0] for name in done.stdout.split()}
    assert not loaded & {"mcp", "mcp_types", "pydantic", "anyio", "starlette", "ptyd_client"}, loaded
    bad = subprocess.run(
        [sys.executable, "-m", "ptyd_mcp", "--tools", "claude"], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2
    assert "unknown tool set claude; the sets are ptyd, codex" in bad.stderr


@pytest.mark.parametrize(
    ("hidden", "argv", "says"),
    [
        ("mcp", "from ptyd_mcp.cli import main; main(['--socket', 'x'])", "ptyd-mcp: the MCP SDK is not installed"),
        ("pydantic", "from ptyd_mcp.cli import main; main(['--socket', 'x'])", "(pydantic is missing)"),
        ("uvicorn", "from ptyd.cli import main; main(['web', '--socket', 'x'])", "the dashboard needs uvicorn"),
    ],
    ids=["mcp", "an-sdk-dependency", "web"],
)
def test_a_face_without_its_extra_names_the_extra(hidden: str, argv: str, says: str) -> None:
    # None in sys.modules: the import fails as it does where the package is not installed.
    probe = f"import sys; sys.modules[{hidden!r}] = None\n{argv}"
    done = subprocess.run(
        [sys.executable, "-c", probe], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert says in done.stderr, done.stderr
    extra = "web" if hidden == "uvicorn" else "mcp"
    assert f"pip install 'ptyd[{extra}]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_readme_host_snippet_starts_a_working_server(daemon: Daemon) -> None:
    readme = (ROOT / "README.md").read_text().split("## From an MCP host: ptyd-mcp", 1)[1]
    match = re.search(r"```json\n(.*?)```", readme, re.S)
    assert match, "no json block in the README's ptyd-mcp section"
    entry = json.loads(match.group(1))["mcpServers"]["terminals"]
    assert Path(entry["command"]).name == "ptyd-mcp"
    # As written, but this checkout's command and the test's daemon.
    command = str(Path(sys.executable).parent / "ptyd-mcp")
    env = server_env() | entry["env"] | {"PTYD_SOCKET": str(daemon.socket)}

    async def scenario() -> None:
        params = StdioServerParameters(command=command, args=entry["args"], env=env)
        async with Client(params) as client:
            _, listed = await ok(client, "terminal_list")
            assert listed["sessions"] == []

    anyio.run(scenario)
    assert token_path(daemon.socket, entry["args"][1]).exists()


def start_stdio(daemon: Daemon, *extra: str, stderr: int) -> subprocess.Popen[bytes]:
    """ptyd-mcp over stdio for a new agent, as a host starts it."""
    argv = server_argv(daemon.socket, new_agent(), *extra)
    return subprocess.Popen(
        argv, env=server_env(), cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr
    )


def initialize(proc: subprocess.Popen[bytes], version: str) -> dict[str, object]:
    """Send initialize (asking for ``version``) and read its answer."""
    assert proc.stdin is not None
    assert proc.stdout is not None
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}).encode() + b"\n")
    proc.stdin.flush()
    return dict(json.loads(proc.stdout.readline()))


def handshake(daemon: Daemon, version: str, *extra: str) -> tuple[dict[str, object], list[str], str]:
    """A raw stdio session: initialize (asking for ``version``), initialized, tools/list; the answer to initialize,
    the tool names and the server's stderr."""
    proc = start_stdio(daemon, *extra, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        answer = initialize(proc, version)
        for message in (
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        ):
            proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
        listed = json.loads(proc.stdout.readline())
        assert listed["id"] == 2, listed
        proc.stdin.close()  # the host goes away: the server ends
        assert proc.wait(60) == 0
        assert proc.stderr is not None
        stderr = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert answer["id"] == 1, answer
    return answer["result"], [tool["name"] for tool in listed["result"]["tools"]], stderr.decode()


@pytest.mark.parametrize("version", ["2024-11-05", "2025-11-25", "1999-01-01"])
def test_the_early_answer_to_initialize_is_the_sdks(daemon: Daemon, version: str) -> None:
    """ptyd-mcp answers initialize before the SDK is loaded (ptyd_mcp.early): the answer must be the SDK's own,
    version negotiation included, and the session the SDK then serves must work."""
    early, tools, stderr = handshake(daemon, version, "--tools", "ptyd,codex")
    sdk, sdk_tools, _ = handshake(daemon, version, "--tools", "ptyd,codex", "--no-early-initialize")
    assert early == sdk
    assert tools == sdk_tools
    assert {"terminal_send", "exec_command"} <= set(tools)
    assert "early answer" not in stderr, stderr


def time_to_initialize(daemon: Daemon, *extra: str) -> float:
    """Seconds from starting ptyd-mcp over stdio to its answer to initialize, as a host waits for it."""
    started = time.monotonic()
    proc = start_stdio(daemon, *extra, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        answer = initialize(proc, "2025-11-25")
        elapsed = time.monotonic() - started
        assert answer["id"] == 1, answer
    finally:
        proc.kill()
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()
    return elapsed


def test_initialize_is_answered_within_a_second_median(daemon: Daemon) -> None:
    """Issue 31: ptyd-mcp answers initialize in under 1 s median (measured 0.35 s on the 2-core dev machine). The
    fast suite holds the early answer to beating the SDK's own (--no-early-initialize), run turn about on the same
    machine; ``--perf`` to the second."""
    early, sdk = [], []
    for _ in range(5):
        early.append(time_to_initialize(daemon))
        sdk.append(time_to_initialize(daemon, "--no-early-initialize"))
    median = statistics.median(early)
    latency(median, tight=1.0, fallback=statistics.median(sdk), what="ptyd-mcp's answer to initialize (median of 5)")
