"""The README's examples run as written, with the PATH line of its "Set up" section, from the checkout; what the
README shows an example printing is what it prints (compared here, so it cannot go stale)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, Daemon, Rpc
from sshd import HOST_ALIAS, Sshd

sys.path.insert(0, str(ROOT / "tools"))
import readme as readme_tool

README = ROOT / "README.md"
VENV_BIN = Path(sys.executable).parent  # what `export PATH="$PWD/.venv/bin:$PATH"` puts first
NODE = shutil.which("node")


def readme_section(heading: str) -> str:
    text = README.read_text()
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def readme_blocks(heading: str, language: str) -> list[str]:
    blocks = re.findall(rf"```{language}\n(.*?)```", readme_section(heading), re.S)
    assert blocks, f"no {language} block under {heading!r}"
    return blocks


def readme_block(heading: str, language: str) -> str:
    return readme_blocks(heading, language)[0]


def shown_output(heading: str, after: str) -> str:
    """The block the README shows as what the example ending in ``after`` prints (the first one after it)."""
    section = readme_section(heading)
    found = re.search(re.escape(after) + r".*?It prints[^\n]*:\n\n```\w*\n(.*?)```", section, re.S)
    assert found, f"no shown output after {after!r} under {heading!r}"
    return found.group(1)


def as_the_readme_says(daemon: Daemon, **extra: str) -> dict[str, str]:
    """The user's environment after the README's PATH line, with the test's daemon as the default socket."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTYD_")}
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
    env["PTYD_SOCKET"] = str(daemon.socket)
    env.pop("PYTHONPATH", None)
    return {**env, **extra}


def run_sh(script: str, env: dict[str, str], cwd: Path = ROOT, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    # bash -e: a step of the block that fails fails the test (a pasted block would just print the error).
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def agents(rpc: Rpc, operator: str) -> set[str]:
    return {a["agent_id"] for a in rpc.call("agent_list", token=operator)["agents"]}


def test_set_up_puts_ptyd_and_ptyctl_on_the_path(daemon: Daemon) -> None:
    path_block = readme_blocks("Set up", "sh")[1]
    assert 'export PATH="$PWD/.venv/bin:$PATH"' in path_block
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTYD_")}
    env["PTYD_SOCKET"] = str(daemon.socket)
    env["PATH"] = "/usr/bin:/bin"  # nothing of the checkout until the block's own export
    done = run_sh(path_block, env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ptyd 0.1.0 (protocol ")


# --- A first session ---------------------------------------------------------------------------------------------

# Fields whose values differ from run to run and machine to machine: the shown value must have the same type.
VOLATILE = {"operation_id", "pid", "pgid", "cwd", "duration_ms"}
BASH_PROMPT = re.compile(r"bash-\d+\.\d+[$#]")  # --norc bash's prompt: its version, and # for root


def same_shape(shown: Any, real: Any, path: str = "$") -> list[str]:
    """Where ``shown`` (the README's) differs from ``real`` (this run's): keys, types, and stable values."""
    if isinstance(shown, dict) and isinstance(real, dict):
        problems = [f"{path}: shown lacks {sorted(set(real) - set(shown))}"] if set(real) - set(shown) else []
        problems += (
            [f"{path}: shown has {sorted(set(shown) - set(real))}, the daemon not"] if set(shown) - set(real) else []
        )
        for key in set(shown) & set(real):
            problems += same_shape(shown[key], real[key], f"{path}.{key}")
        return problems
    if isinstance(shown, list) and isinstance(real, list) and len(shown) == len(real):
        return [p for i, (s, r) in enumerate(zip(shown, real, strict=True)) for p in same_shape(s, r, f"{path}[{i}]")]
    name = path.rsplit(".", 1)[-1].split("[")[0]
    if name in VOLATILE:
        return [] if type(shown) is type(real) else [f"{path}: {shown!r} is not like {real!r}"]
    if name == "viewport":
        shown, real = BASH_PROMPT.sub("bash$", shown), BASH_PROMPT.sub("bash$", real)
    return [] if shown == real else [f"{path}: shown {shown!r}, the daemon says {real!r}"]


@pytest.mark.skipif(not (shutil.which("socat") and shutil.which("jq")), reason="socat or jq is not installed")
def test_first_session_example_prints_what_the_readme_shows_and_releases_its_agent(daemon: Daemon, rpc: Rpc) -> None:
    operator = (daemon.socket.parent / "operator.token").read_text().strip()
    before = agents(rpc, operator)
    done = run_sh(readme_block("A first session", "sh"), as_the_readme_says(daemon))
    assert done.returncode == 0, done.stderr
    real = json.loads(done.stdout)
    assert real["result"]["wait_reason"] == "stdin_read"
    assert real["result"]["viewport"].splitlines()[1] == "Linux"
    shown = json.loads(readme_block("A first session", "json"))
    problems = same_shape(shown, real)
    assert not problems, "\n".join([*problems, "this run printed:", done.stdout])
    assert agents(rpc, operator) == before  # released, with its session


def test_first_session_example_stops_and_says_so_without_socat_or_jq(daemon: Daemon, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # every tool the example uses but jq
    bin_dir.mkdir()
    for tool in ("id", "socat"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    script = readme_block("A first session", "sh")
    env = {**as_the_readme_says(daemon), "PATH": str(bin_dir)}
    # As pasted into an interactive shell: no -e, the example's own chain must stop.
    done = subprocess.run(
        [shutil.which("bash") or "/bin/bash", "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "this example needs socat and jq" in done.stderr
    assert done.stdout == ""


# --- Clients ---------------------------------------------------------------------------------------------------


def test_python_example_prints_what_the_readme_shows(daemon: Daemon, rpc: Rpc, tmp_path: Path) -> None:
    operator = (daemon.socket.parent / "operator.token").read_text().strip()
    before = agents(rpc, operator)
    example = readme_block("From Python", "python")
    (tmp_path / "hello.py").write_text(example)
    done = subprocess.run(
        ["python3", "hello.py"],
        env=as_the_readme_says(daemon),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == shown_output("From Python", "ptyd.agent_release()"), done.stdout
    assert agents(rpc, operator) == before


@pytest.fixture(scope="module")
def typescript_built(daemon: Daemon) -> None:
    """The README's build line for the TypeScript client and its examples, run as written."""
    if NODE is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed (Debian: apt-get install nodejs npm)")
    build = readme_block("From TypeScript / Node", "sh")
    assert build.startswith("cd clients/typescript && npm ci && npm run build && ")
    done = run_sh(build.split(" && node ", 1)[0], as_the_readme_says(daemon), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("heading", "example"),
    [
        ("From TypeScript / Node", "clients/typescript/examples/first-session.ts"),
        ("From TypeScript / Node", "clients/typescript/examples/harness-backend.ts"),
    ],
    ids=["first-session", "harness-backend"],
)
def test_typescript_example_prints_what_the_readme_shows(
    daemon: Daemon, rpc: Rpc, typescript_built: None, heading: str, example: str
) -> None:
    operator = (daemon.socket.parent / "operator.token").read_text().strip()
    before = agents(rpc, operator)
    compiled = "dist/examples/" + Path(example).with_suffix(".js").name
    assert f"node {compiled}" in readme_section(heading)  # how the README says to run it
    done = subprocess.run(
        ["node", compiled],
        env=as_the_readme_says(daemon),
        cwd=ROOT / "clients" / "typescript",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == shown_output(heading, f"<!-- include {example} -->"), done.stdout
    assert agents(rpc, operator) == before


def test_the_readme_includes_the_examples_as_they_are() -> None:
    text = README.read_text()
    assert readme_tool.includes(text) == [
        "clients/typescript/examples/first-session.ts",
        "clients/typescript/examples/harness-backend.ts",
    ]
    assert readme_tool.render(text) == text, "README.md is stale: run make docs"


# --- Another machine ------------------------------------------------------------------------------------------


def test_another_machine_example_reaches_the_daemon_through_ssh(
    sshd: Sshd, daemon: Daemon, rpc: Rpc, tmp_path: Path
) -> None:
    # "buildbox" is the loopback sshd: an ssh config alias, as a user's ~/.ssh/config would have it.
    config = tmp_path / "ssh_config"
    config.write_text(sshd.client_config.read_text().replace(f"Host {HOST_ALIAS}\n", "Host buildbox\n", 1))
    (tmp_path / "hello.py").write_text(readme_block("From Python", "python"))
    operator = (daemon.socket.parent / "operator.token").read_text().strip()
    before = agents(rpc, operator)
    # PTYD_SOCKET reaches the far side through the config's SendEnv PTYD_*: its ptyd dial-stdio finds the
    # test's daemon there, as the far side's default socket would be found.
    env = as_the_readme_says(daemon, PTYD_SSH_COMMAND=f"ssh -F {config}")
    done = run_sh(readme_block("Another machine", "sh"), env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ptyd 0.1.0 (protocol ")
    assert "socket:   ssh://buildbox\n" in done.stdout
    assert "hello from 42\n" in done.stdout
    assert agents(rpc, operator) == before
    assert sshd.log().count("Accepted publickey") >= 3  # the token, status, and hello.py went through sshd


# --- The rest ----------------------------------------------------------------------------------------------------


def test_configuration_example(daemon: Daemon, tmp_path: Path) -> None:
    done = run_sh(readme_block("Configuration", "sh"), as_the_readme_says(daemon), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == 'shell_argv = ["/bin/bash", "-i"]'


def test_the_method_table_lists_every_method(rpc: Rpc) -> None:
    table = README.read_text().split("| method | what it does |", 1)[1].split("\n\n", 1)[0]
    methods = [m["name"] for m in rpc.call("rpc.discover")["methods"]]
    missing = [name for name in methods if f"`{name}" not in table]
    assert not missing, f"README's method table lacks {missing}"


# Every runnable (```sh) block of the README, and the test that runs it as written, or why no test can.
SH_BLOCKS = {
    ("Set up", 0): "make run: the daemon every test starts (conftest's Daemon); timed from a fresh clone by hand",
    ("Set up", 1): "test_set_up_puts_ptyd_and_ptyctl_on_the_path",
    ("Set up", 2): "pip install -e '.[all]': make venv installs the same extras, and the suite runs both faces",
    ("Set up", 3): "pipx install: tests/test_install.py installs the same wheel into a fresh venv and runs it",
    ("A first session", 0): "test_first_session_example_prints_what_the_readme_shows_and_releases_its_agent",
    ("From TypeScript / Node", 0): "typescript_built, test_typescript_example_prints_what_the_readme_shows",
    ("Another machine", 0): "test_another_machine_example_reaches_the_daemon_through_ssh",
    ("As a systemd user service", 0): "needs a user service manager: tests/test_systemd.py runs a private one",
    ("Configuration", 0): "test_configuration_example",
}


def test_every_runnable_block_is_accounted_for() -> None:
    text = README.read_text()
    found = set()
    for heading in re.findall(r"^## (.*)$", text, re.M):
        for index, _ in enumerate(re.findall(r"```sh\n(.*?)```", readme_section(heading), re.S)):
            found.add((heading, index))
    assert found == set(SH_BLOCKS), f"new or moved sh blocks: {sorted(found ^ set(SH_BLOCKS))}"
    names = {name for name, value in globals().items() if name.startswith(("test_", "typescript_")) and value}
    for reason in SH_BLOCKS.values():
        for word in re.findall(r"(?<![/\w])(?:test|typescript)_\w+\b(?!\.py)", reason):
            assert word in names, f"{word} is named in SH_BLOCKS but is not a test here"
